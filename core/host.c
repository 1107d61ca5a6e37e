/* SPDX-License-Identifier: Apache-2.0 */
/* Host services for plugins (see host.h). */
#include "host.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "polyprof/kit/proc.h"
#include "profile_marker.h"
#include "rootless.h"

/* Truncating copy (snprintf("%s") makes GCC warn about the truncation we
 * want). */
static void copy_trunc(char *dst, size_t cap, const char *src) {
  size_t n = strnlen(src, cap - 1);
  memcpy(dst, src, n);
  dst[n] = 0;
}

static struct pp_host_ctx *ctx_of(const struct pp_host *h) {
  return (struct pp_host_ctx *)h->host_data;
}

/* ---- configuration ---- */

static char **split_commas(const char *s, size_t *count) {
  size_t n = 1;
  for (const char *c = s; *c; c++)
    n += *c == ',';
  char **items = calloc(n + 1, sizeof(*items));
  if (!items) return NULL;
  size_t k = 0;
  const char *start = s;
  for (const char *c = s;; c++) {
    if (*c != ',' && *c) continue;
    size_t len = (size_t)(c - start);
    while (len && *start == ' ')
      start++, len--;
    while (len && start[len - 1] == ' ')
      len--;
    if (len) {
      if (!(items[k] = strndup(start, len))) goto oom;
      k++;
    }
    if (!*c) break;
    start = c + 1;
  }
  *count = k;
  return items;
oom:
  for (size_t i = 0; i < k; i++)
    free(items[i]);
  free(items);
  return NULL;
}

static void free_items(char **items) {
  for (size_t i = 0; items && items[i]; i++)
    free(items[i]);
  free(items);
}

static char **dup_items(char *const *items, size_t n) {
  char **out = calloc(n + 1, sizeof(*out));
  if (!out) return NULL;
  for (size_t i = 0; i < n; i++) {
    if (!(out[i] = strdup(items[i] ? items[i] : ""))) {
      free_items(out);
      return NULL;
    }
  }
  return out;
}

/* Set o's value from text (scalar) or a list. */
static int set_value(struct pp_host_option *o, const char *scalar, char *const *items, size_t n) {
  free(o->scalar);
  free_items(o->items);
  o->scalar = NULL;
  o->items = NULL;
  o->item_count = 0;
  if (items) {
    if (!(o->items = dup_items(items, n))) return -ENOMEM;
    o->item_count = n;
  } else if (scalar && o->type == PP_OPT_LIST) {
    if (!(o->items = split_commas(scalar, &o->item_count))) return -ENOMEM;
  } else if (scalar) {
    if (!(o->scalar = strdup(scalar))) return -ENOMEM;
  }
  return 0;
}

static struct pp_host_option *find_opt(const struct pp_host_config *c, const char *key) {
  for (size_t i = 0; key && i < c->count; i++)
    if (strcmp(c->options[i].key, key) == 0) return &c->options[i];
  return NULL;
}

static struct pp_host_option *add_opt(struct pp_host_config *c, const char *key, uint32_t type) {
  struct pp_host_option *o = realloc(c->options, (c->count + 1) * sizeof(*o));
  if (!o) return NULL;
  c->options = o;
  o = &c->options[c->count];
  memset(o, 0, sizeof(*o));
  if (!(o->key = strdup(key))) return NULL;
  o->type = type;
  c->count++;
  return o;
}

int pp_host_config_build(struct pp_host_config *out, const struct pp_plugin *desc,
                         const struct pp_plugin_config *pcfg) {
  memset(out, 0, sizeof(*out));
  out->enabled = pcfg ? pcfg->enabled : true;
  if (!(out->plugin = strdup(desc->name ? desc->name : ""))) goto oom;
  for (uint32_t i = 0; desc->options && i < desc->option_count; i++) {
    const struct pp_option *d = &desc->options[i];
    if (!d->key || find_opt(out, d->key)) continue;
    struct pp_host_option *o = add_opt(out, d->key, d->type);
    if (!o || set_value(o, d->default_value, NULL, 0)) goto oom;
  }
  for (size_t i = 0; pcfg && i < pcfg->option_count; i++) {
    const struct pp_bound_option *b = &pcfg->options[i];
    if (!b->opt || !b->opt->key) continue;
    struct pp_host_option *o = find_opt(out, b->opt->key);
    if (!o && !(o = add_opt(out, b->opt->key, b->opt->type))) goto oom;
    if (!b->scalar && !b->items) continue; /* unset: keep the declared default */
    if (set_value(o, b->scalar, b->items, b->item_count)) goto oom;
  }
  const char *mode = pcfg && pcfg->mode ? pcfg->mode : NULL;
  struct pp_host_option *mo = find_opt(out, "mode");
  if (!mode && mo) mode = mo->scalar;
  if (mode && !(out->mode = strdup(mode))) goto oom;
  if (mo && out->mode && set_value(mo, out->mode, NULL, 0)) goto oom;
  return 0;
oom:
  pp_host_config_free(out);
  return -ENOMEM;
}

int pp_host_config_copy(struct pp_host_config *out, const struct pp_host_config *in) {
  memset(out, 0, sizeof(*out));
  out->enabled = in->enabled;
  if (!(out->plugin = strdup(in->plugin))) goto oom;
  if (in->mode && !(out->mode = strdup(in->mode))) goto oom;
  for (size_t i = 0; i < in->count; i++) {
    const struct pp_host_option *s = &in->options[i];
    struct pp_host_option *o = add_opt(out, s->key, s->type);
    if (!o || set_value(o, s->scalar, s->items, s->item_count)) goto oom;
  }
  return 0;
oom:
  pp_host_config_free(out);
  return -ENOMEM;
}

void pp_host_config_free(struct pp_host_config *c) {
  for (size_t i = 0; i < c->count; i++) {
    free(c->options[i].key);
    free(c->options[i].scalar);
    free_items(c->options[i].items);
  }
  free(c->options);
  free(c->plugin);
  free(c->mode);
  memset(c, 0, sizeof(*c));
}

static int cfg_string(const struct pp_host *h, const char *key, const char **out) {
  const struct pp_host_config *c = ctx_of(h)->cfg;
  if (!out) return -EINVAL;
  *out = NULL;
  struct pp_host_option *o = find_opt(c, key);
  if (!o && key && strcmp(key, "mode") == 0 && c->mode) {
    *out = c->mode;
    return 0;
  }
  if (!o) return -ENOENT;
  if (o->type != PP_OPT_STRING && o->type != PP_OPT_ENUM) return -EINVAL;
  if (!o->scalar) return -ENOENT;
  *out = o->scalar;
  return 0;
}

static int cfg_int(const struct pp_host *h, const char *key, int64_t *out) {
  struct pp_host_option *o = find_opt(ctx_of(h)->cfg, key);
  if (!out) return -EINVAL;
  if (!o) return -ENOENT;
  if (o->type != PP_OPT_INT) return -EINVAL;
  if (!o->scalar) return -ENOENT;
  char *end;
  errno = 0;
  long long v = strtoll(o->scalar, &end, 0);
  if (errno || end == o->scalar || *end) return -EINVAL;
  *out = v;
  return 0;
}

static int parse_bool(const char *s, int *out) {
  static const char *const yes[] = {"true", "yes", "on", "1"};
  static const char *const no[] = {"false", "no", "off", "0"};
  for (size_t i = 0; i < 4; i++) {
    if (strcasecmp(s, yes[i]) == 0) return *out = 1, 0;
    if (strcasecmp(s, no[i]) == 0) return *out = 0, 0;
  }
  return -EINVAL;
}

static int cfg_bool(const struct pp_host *h, const char *key, int *out) {
  const struct pp_host_config *c = ctx_of(h)->cfg;
  if (!out) return -EINVAL;
  struct pp_host_option *o = find_opt(c, key);
  if (!o && key && strcmp(key, "enabled") == 0) return *out = c->enabled, 0;
  if (!o) return -ENOENT;
  if (o->type != PP_OPT_BOOL) return -EINVAL;
  if (!o->scalar) return -ENOENT;
  return parse_bool(o->scalar, out);
}

static int cfg_list(const struct pp_host *h, const char *key, const char *const **items,
                    size_t *count) {
  static const char *const empty[] = {NULL};
  if (!items || !count) return -EINVAL;
  struct pp_host_option *o = find_opt(ctx_of(h)->cfg, key);
  if (!o) return -ENOENT;
  if (o->type != PP_OPT_LIST) return -EINVAL;
  *items = o->items ? (const char *const *)o->items : empty;
  *count = o->item_count;
  return 0;
}

/* ---- logging ---- */

/* format attribute: clang checks the vsnprintf below only with it */
static void host_log(const struct pp_host *h, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void host_log(const struct pp_host *h, int level, const char *fmt, ...) {
  if (!h || !fmt) return;
  struct pp_host_ctx *c = ctx_of(h);
  char buf[PP_HOST_MAX_LOG + 1];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  /* One plugin line stays one log line: no forged entries via newlines. */
  for (char *p = buf; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = ' ';
  if (level < PP_LOG_DEBUG) level = PP_LOG_DEBUG;
  if (level > PP_LOG_ERROR) level = PP_LOG_ERROR;
  if (level >= PP_LOG_WARNING) {
    pthread_mutex_lock(&c->lock);
    copy_trunc(c->last_problem, sizeof(c->last_problem), buf);
    pthread_mutex_unlock(&c->lock);
  }
  if (c->log_fn) {
    c->log_fn(c->log_ctx, level, buf);
  } else {
    char tag[64];
    snprintf(tag, sizeof(tag), "polyprof.%s", c->cfg->plugin);
    pp_log_msg(level, tag, buf);
  }
}

void pp_host_clear_problem(struct pp_host_ctx *c) {
  pthread_mutex_lock(&c->lock);
  c->last_problem[0] = 0;
  pthread_mutex_unlock(&c->lock);
}

void pp_host_last_problem(struct pp_host_ctx *c, char *buf, size_t len) {
  pthread_mutex_lock(&c->lock);
  copy_trunc(buf, len, c->last_problem);
  pthread_mutex_unlock(&c->lock);
}

/* ---- clocks ---- */

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t host_monotonic(const struct pp_host *h) {
  return clock_ns(CLOCK_MONOTONIC);
}

static uint64_t host_realtime(const struct pp_host *h) {
  return clock_ns(CLOCK_REALTIME);
}

/* ---- sink ---- */

enum {
  WARN_INACTIVE = 1u << 0,
  WARN_PID0 = 1u << 1,
  WARN_FRAMES = 1u << 2,
  WARN_KIND = 1u << 3,
  WARN_STATUS = 1u << 4,
  WARN_JSON = 1u << 5,
  WARN_ARG = 1u << 6,
  WARN_NOMEM = 1u << 7,
  WARN_NEWER_KIND = 1u << 8,
};

/* Kinds at or above PP_FRAME_KIND_COUNT and below this come from a plugin
 * built against a later minor (enum values are only ever appended); beyond
 * it a kind is garbage and the sample is refused. */
#define PP_FRAME_KIND_MAX 64

static int refuse(struct pp_sink *s, uint32_t what, int rc, const char *fmt, ...) PP_PRINTF(4, 5);
static int refuse(struct pp_sink *s, uint32_t what, int rc, const char *fmt, ...) {
  s->rejected++;
  if (s->warned & what) return rc;
  s->warned |= what;
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  s->host->log(s->host, PP_LOG_WARNING,
               "%s (reported once per snapshot, counted as invalid_samples)", msg);
  return rc;
}

void pp_sink_begin(struct pp_sink *s, struct pp_profile *p, const struct pp_host *host) {
  s->profile = p;
  s->host = host;
  s->active = true;
  s->warned = 0;
  s->rejected = 0;
  s->keep_tid = false;
}

void pp_sink_end(struct pp_sink *s) {
  s->active = false;
  if (s->rejected) pp_profile_add_counter(s->profile, "invalid_samples", s->rejected);
}

static uint32_t intern_capped(struct pp_profile *p, const char *str, size_t cap) {
  return str ? pp_profile_intern(p, str, strnlen(str, cap)) : PP_NO_STR;
}

static int sink_emit(struct pp_sink *s, const struct pp_sample *smp) {
  if (!s) return -EINVAL;
  if (!s->active) return refuse(s, WARN_INACTIVE, -EINVAL, "emit() outside snapshot()");
  if (!smp) return refuse(s, WARN_ARG, -EINVAL, "emit(NULL)");
  /* pid 0 is accepted: it is the idle task (perf's "swapper" stacks). */
  if (smp->nframes && !smp->frames)
    return refuse(s, WARN_FRAMES, -EINVAL, "emit(): nframes %u but frames is NULL", smp->nframes);
  if (smp->count == 0) return 0;
  if (smp->type >= PP_PROFILE_TYPE_COUNT)
    return refuse(s, WARN_KIND, -EINVAL, "emit(): profile type %u out of range", smp->type);
  /* a typed stack keeps its type as a root marker frame (profile_marker.h),
   * a dumped one its thread as "[tid N]" below that */
  uint32_t roots = (smp->type != PP_PROFILE_CPU) + (s->keep_tid && smp->tid);
  /* frames[0] is the leaf; deeper stacks lose their root side. */
  uint32_t n = smp->nframes > PP_MAX_FRAMES - roots ? PP_MAX_FRAMES - roots : smp->nframes;
  for (uint32_t i = 0; i < n; i++) {
    if (smp->frames[i].kind >= PP_FRAME_KIND_MAX)
      return refuse(s, WARN_KIND, -EINVAL, "emit(): frame kind %u out of range",
                    smp->frames[i].kind);
    if (smp->frames[i].kind >= PP_FRAME_KIND_COUNT && !(s->warned & WARN_NEWER_KIND)) {
      s->warned |= WARN_NEWER_KIND;
      s->host->log(s->host, PP_LOG_WARNING,
                   "emit(): frame kind %u is newer than this agent (ABI %d.%d): shown as native "
                   "(reported once per snapshot)",
                   smp->frames[i].kind, PP_ABI_MAJOR, PP_ABI_MINOR);
    }
  }
  struct pp_profile *p = s->profile;
  for (uint32_t i = 0; i < n; i++) {
    const struct pp_frame *f = &smp->frames[i];
    /* a kind added by a later minor is code all the same: native */
    uint32_t kind = f->kind < PP_FRAME_KIND_COUNT ? f->kind : PP_FRAME_NATIVE;
    uint32_t name = f->name ? intern_capped(p, f->name, PP_HOST_MAX_FRAME_STR)
                            : pp_profile_intern(p, "[unknown]", 9);
    uint32_t file = intern_capped(p, f->file, PP_HOST_MAX_FRAME_STR);
    uint32_t fid = name == PP_NO_STR || (f->file && file == PP_NO_STR)
                       ? UINT32_MAX
                       : pp_profile_intern_frame(p, name, file, f->line, kind);
    if (fid == UINT32_MAX) return refuse(s, WARN_NOMEM, -ENOMEM, "emit(): out of memory");
    s->ids[roots + n - 1 - i] = fid;
  }
  uint32_t root = 0;
  if (smp->type != PP_PROFILE_CPU &&
      (s->ids[root++] = pp_type_marker_frame(p, smp->type)) == UINT32_MAX)
    return refuse(s, WARN_NOMEM, -ENOMEM, "emit(): out of memory");
  if (s->keep_tid && smp->tid) {
    char text[32];
    int len = snprintf(text, sizeof(text), "[tid %u]", smp->tid);
    uint32_t name = pp_profile_intern(p, text, (size_t)len);
    s->ids[root] = name == PP_NO_STR
                       ? UINT32_MAX
                       : pp_profile_intern_frame(p, name, PP_NO_STR, 0, PP_FRAME_PSEUDO);
    if (s->ids[root] == UINT32_MAX) return refuse(s, WARN_NOMEM, -ENOMEM, "emit(): out of memory");
  }
  uint32_t comm = intern_capped(p, smp->comm, 256);
  int rc = pp_profile_add_stack(p, smp->pid, comm, s->ids, roots + n, smp->count);
  if (rc) return refuse(s, WARN_NOMEM, rc, "emit(): out of memory");
  return 0;
}

static int sink_check(struct pp_sink *s, uint32_t pid, const char *what) {
  if (!s) return -EINVAL;
  if (!s->active) return refuse(s, WARN_INACTIVE, -EINVAL, "%s() outside snapshot()", what);
  /* The idle task has no application: per-pid facts for pid 0 are a bug. */
  if (!pid) return refuse(s, WARN_PID0, -EINVAL, "%s() for pid 0", what);
  return 0;
}

static int sink_set_appid(struct pp_sink *s, uint32_t pid, const char *appid) {
  int rc = sink_check(s, pid, "set_appid");
  if (rc) return rc;
  uint32_t id = intern_capped(s->profile, appid, 1024);
  struct pp_pid_rec *r = pp_profile_pid_upsert(s->profile, pid);
  if (!r || (appid && id == PP_NO_STR)) return -ENOMEM;
  r->appid = id;
  return 0;
}

static int sink_set_app_metadata(struct pp_sink *s, uint32_t pid, const char *text) {
  int rc = sink_check(s, pid, "set_app_metadata");
  if (rc) return rc;
  size_t len = text ? strnlen(text, PP_HOST_MAX_JSON + 1) : 0;
  if (!text || len > PP_HOST_MAX_JSON)
    return refuse(s, WARN_JSON, -EINVAL, "set_app_metadata(): missing or oversized JSON");
  json_error_t jerr;
  json_t *obj = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!json_is_object(obj)) {
    json_decref(obj);
    return refuse(s, WARN_JSON, -EINVAL, "set_app_metadata(pid %u): not a JSON object", pid);
  }
  /* Several calls merge into one object (later keys win). */
  struct pp_pid_rec *r = pp_profile_pid(s->profile, pid);
  if (r && r->app_meta != PP_NO_STR) {
    json_t *old = json_loads(pp_profile_str(s->profile, r->app_meta), 0, NULL);
    if (json_is_object(old) && json_object_update(old, obj) == 0) {
      json_decref(obj);
      obj = old;
    } else {
      json_decref(old);
    }
  }
  char *out = json_dumps(obj, JSON_COMPACT);
  json_decref(obj);
  if (!out) return -ENOMEM;
  uint32_t id = pp_profile_intern_cstr(s->profile, out);
  free(out);
  if (id == PP_NO_STR || !(r = pp_profile_pid_upsert(s->profile, pid))) return -ENOMEM;
  r->app_meta = id;
  return 0;
}

static int sink_set_pid_status(struct pp_sink *s, uint32_t pid, int status, const char *reason) {
  int rc = sink_check(s, pid, "set_pid_status");
  if (rc) return rc;
  if (status < PP_PID_OK || status > PP_PID_SKIPPED)
    return refuse(s, WARN_STATUS, -EINVAL, "set_pid_status(): status %d out of range", status);
  uint32_t id = intern_capped(s->profile, reason, 1024);
  struct pp_pid_rec *r = pp_profile_pid_upsert(s->profile, pid);
  if (!r || (reason && id == PP_NO_STR)) return -ENOMEM;
  r->status = (uint32_t)status;
  r->reason = id;
  return 0;
}

static int sink_add_counter(struct pp_sink *s, const char *name, uint64_t delta) {
  if (!s) return -EINVAL;
  if (!s->active) return refuse(s, WARN_INACTIVE, -EINVAL, "add_counter() outside snapshot()");
  if (!name || !*name || strnlen(name, 65) > 64)
    return refuse(s, WARN_ARG, -EINVAL, "add_counter(): missing or oversized name");
  return pp_profile_add_counter(s->profile, name, delta);
}

/* ---- process facts ---- */

static int host_proc_comm(const struct pp_host *h, uint32_t pid, char *buf, size_t len) {
  return buf && len ? pp_proc_comm(pid, buf, len) : -EINVAL;
}

static int host_proc_exe(const struct pp_host *h, uint32_t pid, char *buf, size_t len) {
  return buf && len ? pp_proc_exe(pid, buf, len) : -EINVAL;
}

static int host_proc_ns_pid(const struct pp_host *h, uint32_t pid, uint32_t *ns_pid) {
  return ns_pid ? pp_proc_ns_pid(pid, ns_pid) : -EINVAL;
}

static int host_proc_root(const struct pp_host *h, uint32_t pid, char *buf, size_t len) {
  return buf && len ? pp_proc_root(pid, buf, len) : -EINVAL;
}

static int host_proc_start_time(const struct pp_host *h, uint32_t pid, uint64_t *t) {
  return t ? pp_proc_start_time(pid, t) : -EINVAL;
}

/* mkdir, or accept an existing directory only if it is ours and not a
 * symlink (a shared /tmp is writable by anyone). */
static int ensure_private_dir(const char *path, mode_t mode) {
  if (mkdir(path, mode) == 0) return 0;
  if (errno != EEXIST) return -errno;
  struct stat st;
  if (lstat(path, &st) < 0) return -errno;
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid()) return -EPERM;
  if ((st.st_mode & 077) && (mode & 077) == 0 && chmod(path, mode) < 0) return -errno;
  return 0;
}

static const char *host_scratch_dir(const struct pp_host *h) {
  struct pp_host_ctx *c = ctx_of(h);
  pthread_mutex_lock(&c->lock);
  if (!c->scratch) {
    char base[4096], dir[4200];
    int ok = 0;
    if (geteuid() == 0 && ensure_private_dir("/run/polyprof", 0755) == 0) {
      snprintf(dir, sizeof(dir), "/run/polyprof/%s", c->cfg->plugin);
      ok = ensure_private_dir(dir, 0700) == 0;
    }
    if (!ok) {
      /* not root (or /run not ours): the user's own runtime directory */
      pp_rootless_user_dir(base, sizeof(base));
      snprintf(dir, sizeof(dir), "%s/%s", base, c->cfg->plugin);
      ok = ensure_private_dir(base, 0700) == 0 && ensure_private_dir(dir, 0700) == 0;
    }
    if (ok) c->scratch = strdup(dir);
  }
  const char *out = c->scratch;
  pthread_mutex_unlock(&c->lock);
  return out;
}

/* ---- assembly ---- */

void pp_host_init(struct pp_host *host, struct pp_host_ctx *ctx, const struct pp_host_config *cfg,
                  pp_host_log_fn log_fn, void *log_ctx) {
  memset(ctx, 0, sizeof(*ctx));
  ctx->cfg = cfg;
  ctx->log_fn = log_fn;
  ctx->log_ctx = log_ctx;
  pthread_mutex_init(&ctx->lock, NULL);
  memset(host, 0, sizeof(*host));
  host->struct_size = sizeof(*host);
  host->abi_major = PP_ABI_MAJOR;
  host->abi_minor = PP_ABI_MINOR;
  host->host_data = ctx;
  host->log = host_log;
  host->config_string = cfg_string;
  host->config_int = cfg_int;
  host->config_bool = cfg_bool;
  host->config_list = cfg_list;
  host->monotonic_ns = host_monotonic;
  host->realtime_ns = host_realtime;
  host->emit = sink_emit;
  host->set_appid = sink_set_appid;
  host->set_app_metadata = sink_set_app_metadata;
  host->set_pid_status = sink_set_pid_status;
  host->add_counter = sink_add_counter;
  host->proc_comm = host_proc_comm;
  host->proc_exe = host_proc_exe;
  host->proc_ns_pid = host_proc_ns_pid;
  host->proc_root = host_proc_root;
  host->proc_start_time = host_proc_start_time;
  host->scratch_dir = host_scratch_dir;
}

void pp_host_fini(struct pp_host_ctx *ctx) {
  free(ctx->scratch);
  ctx->scratch = NULL;
  pthread_mutex_destroy(&ctx->lock);
}
