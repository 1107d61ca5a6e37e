/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Plugin registry: probe every *.so of the plugin directory in a throw-away
 * child process and keep a validated deep copy of its descriptor.
 *
 * Why a child: dlopen() runs the library's constructors, and the entry point
 * and the descriptor's pointers are the plugin's code and data. A plugin that
 * crashes, hangs or scribbles while being loaded must cost only itself. The
 * child reads the descriptor (never past its struct_size, every string and
 * list length-capped) and sends it over a pipe; the parent decodes it with
 * the same distrust as any other input and validates it.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ipc.h"
#include "log.h"
#include "privileges.h"
#include "supervisor.h"
#include "support/trusted_path.h"
#include "worker_loop.h"

#define PROBE_TIMEOUT_MS 5000
#define PROBE_MAX_REPLY (1u << 20)

/* Caps on what a descriptor may contain. The child sends at most cap + 1 of
 * anything, so the parent can tell "too long" from "just fits". */
#define MAX_NAME 32
#define MAX_VERSION 64
#define MAX_TEXT 1024 /* description, help */
#define MAX_PATTERN 256
#define MAX_PATTERNS 64
#define MAX_OPTIONS 128
#define MAX_KEY 64
#define MAX_CHOICES 64
#define MAX_DEFAULT 4096

enum { PROBE_DESC = 1, PROBE_REFUSED = 2 };

/* Bits of the vtable presence mask. */
enum {
  VT_INIT = 1u << 0,
  VT_START = 1u << 1,
  VT_ADD_TARGETS = 1u << 2,
  VT_TICK = 1u << 3,
  VT_SNAPSHOT = 1u << 4,
  VT_STOP = 1u << 5,
  VT_FINI = 1u << 6,
};

/* ------------------------------------------------------------------------
 * Child side: serialise what the plugin declares.
 */

static void put_capped(struct pp_wbuf *b, const char *s, size_t cap) {
  if (!s) {
    pp_wbuf_str(b, NULL);
    return;
  }
  pp_wbuf_strn(b, s, strnlen(s, cap + 1));
}

static void put_list(struct pp_wbuf *b, const char *const *list, size_t max_items, size_t cap) {
  if (!list) {
    pp_wbuf_u32(b, PP_WIRE_NULL);
    return;
  }
  uint32_t n = 0;
  while (n <= max_items && list[n])
    n++;
  pp_wbuf_u32(b, n);
  for (uint32_t i = 0; i < n; i++)
    put_capped(b, list[i], cap);
}

static void probe_refuse(struct pp_wbuf *b, const char *fmt, ...) PP_PRINTF(2, 3);
static void probe_refuse(struct pp_wbuf *b, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  pp_wbuf_reset(b);
  pp_wbuf_u32(b, PROBE_REFUSED);
  pp_wbuf_str(b, msg);
}

static void serialise_desc(struct pp_wbuf *b, const struct pp_plugin *p) {
  /* Only the three header fields are common to every ABI; look at them
   * before anything else. */
  if (p->abi_major != PP_ABI_MAJOR) {
    probe_refuse(b, "ABI major %u, this agent speaks %d", p->abi_major, PP_ABI_MAJOR);
    return;
  }
  if (p->struct_size < PP_PLUGIN_V1_0_SIZE) {
    probe_refuse(b, "descriptor struct_size %u is smaller than the ABI 1.0 minimum %zu",
                 p->struct_size, (size_t)PP_PLUGIN_V1_0_SIZE);
    return;
  }
  /* Copy no more than the plugin declared, nor more than we know. */
  struct pp_plugin d;
  memset(&d, 0, sizeof(d));
  memcpy(&d, p, p->struct_size < sizeof(d) ? p->struct_size : sizeof(d));

  pp_wbuf_u32(b, PROBE_DESC);
  pp_wbuf_u32(b, d.abi_major);
  pp_wbuf_u32(b, d.abi_minor);
  pp_wbuf_u32(b, d.struct_size);
  put_capped(b, d.name, MAX_NAME);
  put_capped(b, d.version, MAX_VERSION);
  put_capped(b, d.description, MAX_TEXT);
  pp_wbuf_u64(b, d.capabilities);
  put_list(b, d.match_exe, MAX_PATTERNS, MAX_PATTERN);
  put_list(b, d.match_maps, MAX_PATTERNS, MAX_PATTERN);
  uint32_t nopt = d.options ? d.option_count : 0;
  pp_wbuf_u32(b, d.option_count);
  pp_wbuf_u32(b, d.options ? 1 : 0);
  if (nopt > MAX_OPTIONS) nopt = 0; /* refused by the parent anyway */
  for (uint32_t i = 0; i < nopt; i++) {
    const struct pp_option *o = &d.options[i];
    put_capped(b, o->key, MAX_KEY);
    pp_wbuf_u32(b, o->type);
    put_capped(b, o->cli_flag, MAX_KEY);
    put_capped(b, o->default_value, MAX_DEFAULT);
    put_list(b, o->choices, MAX_CHOICES, MAX_KEY);
    pp_wbuf_u64(b, (uint64_t)o->min);
    pp_wbuf_u64(b, (uint64_t)o->max);
    put_capped(b, o->help, MAX_TEXT);
  }
  uint32_t vt = (d.init ? VT_INIT : 0) | (d.start ? VT_START : 0) |
                (d.add_targets ? VT_ADD_TARGETS : 0) | (d.tick ? VT_TICK : 0) |
                (d.snapshot ? VT_SNAPSHOT : 0) | (d.stop ? VT_STOP : 0) | (d.fini ? VT_FINI : 0);
  pp_wbuf_u32(b, vt);
}

static void write_all(int fd, const uint8_t *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= (size_t)w;
  }
}

static _Noreturn void probe_child(const char *path, int wfd) {
  struct pp_wbuf b;
  pp_wbuf_init(&b);
  b.limit = PROBE_MAX_REPLY;
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    size_t plen = strlen(path);
    /* The reason already names the file: drop dlerror's copy of it. */
    if (e && strncmp(e, path, plen) == 0 && strncmp(e + plen, ": ", 2) == 0) e += plen + 2;
    probe_refuse(&b, "dlopen: %s", e ? e : "unknown error");
  } else {
    pp_plugin_entry_fn entry;
    *(void **)&entry = dlsym(h, PP_PLUGIN_ENTRY_SYMBOL);
    const struct pp_plugin *p = entry ? entry() : NULL;
    if (!entry)
      probe_refuse(&b, "no symbol %s", PP_PLUGIN_ENTRY_SYMBOL);
    else if (!p)
      probe_refuse(&b, "%s() returned NULL", PP_PLUGIN_ENTRY_SYMBOL);
    else
      serialise_desc(&b, p);
    if (b.err) probe_refuse(&b, "descriptor too large");
  }
  write_all(wfd, b.data, b.len);
  /* _exit: no atexit handlers of the agent, no destructors of the plugin. */
  _exit(0);
}

/* ------------------------------------------------------------------------
 * Parent side: run the probe, decode and validate.
 */

static void free_list(const char *const *list) {
  if (!list) return;
  for (size_t i = 0; list[i]; i++)
    free((char *)list[i]);
  free((void *)list);
}

static void free_desc(struct pp_plugin *d) {
  free((char *)d->name);
  free((char *)d->version);
  free((char *)d->description);
  free_list(d->match_exe);
  free_list(d->match_maps);
  for (uint32_t i = 0; d->options && i < d->option_count; i++) {
    struct pp_option *o = (struct pp_option *)&d->options[i];
    free((char *)o->key);
    free((char *)o->cli_flag);
    free((char *)o->default_value);
    free_list(o->choices);
    free((char *)o->help);
  }
  free((void *)d->options);
  memset(d, 0, sizeof(*d));
}

static int get_str(struct pp_rbuf *r, size_t cap, bool required, const char **out) {
  char *s;
  /* The child sends up to cap + 1 bytes; accept them here and let the
   * validation name the field that is too long. */
  int rc = pp_rbuf_strdup(r, cap + 1, required, &s);
  *out = s;
  return rc;
}

static int get_list(struct pp_rbuf *r, size_t max_items, size_t cap, const char *const **out) {
  *out = NULL;
  uint32_t n = pp_rbuf_u32(r);
  if (r->err) return r->err;
  if (n == PP_WIRE_NULL) return 0;
  if (n > max_items + 1) return -EINVAL;
  const char **l = calloc((size_t)n + 1, sizeof(*l));
  if (!l) return -ENOMEM;
  *out = l;
  for (uint32_t i = 0; i < n; i++) {
    int rc = get_str(r, cap, true, &l[i]);
    if (rc) return rc;
  }
  return 0;
}

static int decode_desc(const uint8_t *buf, size_t len, struct pp_plugin *d, char *why,
                       size_t whylen) {
  struct pp_rbuf r;
  pp_rbuf_init(&r, buf, len);
  memset(d, 0, sizeof(*d));
  uint32_t kind = pp_rbuf_u32(&r);
  if (kind == PROBE_REFUSED) {
    const char *s;
    size_t n;
    if (pp_rbuf_str(&r, 4096, &s, &n) || !s) {
      snprintf(why, whylen, "probe sent a malformed refusal");
    } else {
      snprintf(why, whylen, "%.*s", (int)n, s);
    }
    return -EINVAL;
  }
  if (kind != PROBE_DESC) goto malformed;
  d->abi_major = (uint16_t)pp_rbuf_u32(&r);
  d->abi_minor = (uint16_t)pp_rbuf_u32(&r);
  (void)pp_rbuf_u32(&r); /* the plugin's struct_size: our copy has our size */
  d->struct_size = sizeof(*d);
  if (get_str(&r, MAX_NAME, false, &d->name) || get_str(&r, MAX_VERSION, false, &d->version) ||
      get_str(&r, MAX_TEXT, false, &d->description))
    goto malformed;
  d->capabilities = pp_rbuf_u64(&r);
  if (get_list(&r, MAX_PATTERNS, MAX_PATTERN, &d->match_exe) ||
      get_list(&r, MAX_PATTERNS, MAX_PATTERN, &d->match_maps))
    goto malformed;
  uint32_t declared = pp_rbuf_u32(&r);
  uint32_t has_options = pp_rbuf_u32(&r);
  if (r.err) goto malformed;
  if (declared && !has_options) {
    snprintf(why, whylen, "option_count is %u but options is NULL", declared);
    return -EINVAL;
  }
  if (declared > MAX_OPTIONS) {
    snprintf(why, whylen, "%u options declared, at most %d are allowed", declared, MAX_OPTIONS);
    return -EINVAL;
  }
  if (declared) {
    struct pp_option *opts = calloc(declared, sizeof(*opts));
    if (!opts) goto malformed;
    d->options = opts;
    d->option_count = declared;
    for (uint32_t i = 0; i < declared; i++) {
      struct pp_option *o = &opts[i];
      if (get_str(&r, MAX_KEY, false, &o->key)) goto malformed;
      o->type = pp_rbuf_u32(&r);
      if (get_str(&r, MAX_KEY, false, &o->cli_flag) ||
          get_str(&r, MAX_DEFAULT, false, &o->default_value) ||
          get_list(&r, MAX_CHOICES, MAX_KEY, &o->choices))
        goto malformed;
      o->min = (int64_t)pp_rbuf_u64(&r);
      o->max = (int64_t)pp_rbuf_u64(&r);
      if (get_str(&r, MAX_TEXT, false, &o->help)) goto malformed;
    }
  }
  uint32_t vt = pp_rbuf_u32(&r);
  if (r.err || pp_rbuf_left(&r)) goto malformed;
  return (int)(vt & 0x7fffffff);

malformed:
  snprintf(why, whylen, "probe sent a malformed descriptor");
  return -EINVAL;
}

static bool ident_ok(const char *s, size_t max, bool dash) {
  if (!s || !*s || strlen(s) > max) return false;
  for (const char *c = s; *c; c++) {
    bool ok =
        (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_' || (dash && *c == '-');
    if (!ok) return false;
  }
  return true;
}

static bool in_list(const char *const *list, const char *s) {
  for (size_t i = 0; list && list[i]; i++)
    if (strcmp(list[i], s) == 0) return true;
  return false;
}

static bool bool_text_ok(const char *s) {
  static const char *const words[] = {"true", "false", "yes", "no", "on", "off", "1", "0", NULL};
  return in_list(words, s);
}

static int check_option(const struct pp_option *o, uint32_t i, char *why, size_t whylen) {
  if (!ident_ok(o->key, MAX_KEY, false)) {
    snprintf(why, whylen, "option %u: key \"%s\" is not [a-z0-9_]+ (1-%d characters)", i,
             o->key ? o->key : "(null)", MAX_KEY);
    return -EINVAL;
  }
  const char *k = o->key;
  if (o->type > PP_OPT_LIST) {
    snprintf(why, whylen, "option %s: unknown type %u", k, o->type);
    return -EINVAL;
  }
  if (strcmp(k, "enabled") == 0) {
    snprintf(why, whylen, "option \"enabled\" is reserved for the agent");
    return -EINVAL;
  }
  if (strcmp(k, "mode") == 0 && o->type != PP_OPT_ENUM) {
    snprintf(why, whylen, "option \"mode\" must be an enum");
    return -EINVAL;
  }
  if (o->cli_flag && !ident_ok(o->cli_flag, MAX_KEY, true)) {
    snprintf(why, whylen, "option %s: cli_flag is not [a-z0-9_-]+ (1-%d characters)", k, MAX_KEY);
    return -EINVAL;
  }
  if ((o->default_value && strlen(o->default_value) > MAX_DEFAULT) ||
      (o->help && strlen(o->help) > MAX_TEXT)) {
    snprintf(why, whylen, "option %s: default or help text too long", k);
    return -EINVAL;
  }
  size_t nchoices = 0;
  while (o->choices && o->choices[nchoices])
    nchoices++;
  if (o->type == PP_OPT_ENUM && nchoices == 0) {
    snprintf(why, whylen, "option %s: enum without choices", k);
    return -EINVAL;
  }
  if (nchoices > MAX_CHOICES) {
    snprintf(why, whylen, "option %s: more than %d choices", k, MAX_CHOICES);
    return -EINVAL;
  }
  for (size_t c = 0; c < nchoices; c++) {
    if (!ident_ok(o->choices[c], MAX_KEY, true)) {
      snprintf(why, whylen, "option %s: choice \"%s\" is not [a-z0-9_-]+", k, o->choices[c]);
      return -EINVAL;
    }
  }
  const char *dv = o->default_value;
  if (!dv) return 0;
  /* "mode" may default to "disabled": that is how a plugin is opt-in */
  bool host_mode_value = strcmp(k, "mode") == 0 && strcmp(dv, "disabled") == 0;
  if (o->type == PP_OPT_ENUM && !host_mode_value && !in_list(o->choices, dv)) {
    snprintf(why, whylen, "option %s: default \"%s\" is not one of its choices", k, dv);
    return -EINVAL;
  }
  if (o->type == PP_OPT_BOOL && !bool_text_ok(dv)) {
    snprintf(why, whylen, "option %s: default \"%s\" is not a boolean", k, dv);
    return -EINVAL;
  }
  if (o->type == PP_OPT_INT) {
    char *end;
    errno = 0;
    long long v = strtoll(dv, &end, 0);
    if (errno || end == dv || *end || (o->min <= o->max && (v < o->min || v > o->max))) {
      snprintf(why, whylen, "option %s: default \"%s\" is not an integer in range", k, dv);
      return -EINVAL;
    }
  }
  return 0;
}

static uint64_t this_arch_cap(void) {
#if defined(__x86_64__)
  return PP_CAP_ARCH_X86_64;
#elif defined(__aarch64__)
  return PP_CAP_ARCH_AARCH64;
#else
  return 0;
#endif
}

static int validate_desc(struct pp_plugin *d, uint32_t vt, char *why, size_t whylen) {
  if (!ident_ok(d->name, MAX_NAME, false)) {
    snprintf(why, whylen, "plugin name \"%s\" is not [a-z0-9_]+ (1-%d characters)",
             d->name ? d->name : "(null)", MAX_NAME);
    return -EINVAL;
  }
  /* Consumers print these: never leave them NULL. */
  if (!d->version) d->version = strdup("");
  if (!d->description) d->description = strdup("");
  if (!d->version || !d->description) return -ENOMEM;
  if (strlen(d->version) > MAX_VERSION || strlen(d->description) > MAX_TEXT) {
    snprintf(why, whylen, "version or description too long");
    return -EINVAL;
  }
  static const struct {
    uint32_t bit;
    const char *name;
  } required[] = {{VT_INIT, "init"},
                  {VT_START, "start"},
                  {VT_SNAPSHOT, "snapshot"},
                  {VT_STOP, "stop"},
                  {VT_FINI, "fini"}};
  for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
    if (!(vt & required[i].bit)) {
      snprintf(why, whylen, "required function %s() is NULL", required[i].name);
      return -EINVAL;
    }
  }
  if (!pp_priv_declared(d->capabilities)) {
    /* Its worker would hold exactly what it declares: nothing declared
     * cannot be told from an old descriptor that needs everything. */
    snprintf(why, whylen,
             "plugin %s declares no privileges: set the PP_CAP_NEEDS_* bits it needs, or "
             "PP_CAP_NEEDS_NOTHING (ABI 1.2, docs/plugin-sdk.md)",
             d->name);
    return -EINVAL;
  }
  bool system_wide = d->capabilities & PP_CAP_SYSTEM_WIDE;
  if (!system_wide && !(vt & VT_ADD_TARGETS)) {
    snprintf(why, whylen, "add_targets() is NULL but the plugin is not PP_CAP_SYSTEM_WIDE");
    return -EINVAL;
  }
  uint64_t arches = d->capabilities & (PP_CAP_ARCH_X86_64 | PP_CAP_ARCH_AARCH64);
  if (arches && !(arches & this_arch_cap())) {
    /* said at load time rather than letting an x86-64 register set or
     * layout misread another architecture's processes */
    snprintf(why, whylen, "does not support this architecture: built for %s only, this is %s",
             arches & PP_CAP_ARCH_X86_64 ? "x86_64" : "aarch64",
             this_arch_cap() == PP_CAP_ARCH_AARCH64  ? "aarch64"
             : this_arch_cap() == PP_CAP_ARCH_X86_64 ? "x86_64"
                                                     : "an architecture it does not name");
    return -EINVAL;
  }
  const char *const *lists[2] = {d->match_exe, d->match_maps};
  for (int l = 0; l < 2; l++) {
    size_t n = 0;
    for (; lists[l] && lists[l][n]; n++) {
      size_t len = strlen(lists[l][n]);
      if (!len || len > MAX_PATTERN) {
        snprintf(why, whylen, "%s pattern %zu is empty or too long", l ? "match_maps" : "match_exe",
                 n);
        return -EINVAL;
      }
    }
    if (n > MAX_PATTERNS) {
      snprintf(why, whylen, "more than %d %s patterns", MAX_PATTERNS,
               l ? "match_maps" : "match_exe");
      return -EINVAL;
    }
  }
  for (uint32_t i = 0; i < d->option_count; i++) {
    int rc = check_option(&d->options[i], i, why, whylen);
    if (rc) return rc;
    for (uint32_t j = 0; j < i; j++) {
      if (strcmp(d->options[i].key, d->options[j].key) == 0) {
        snprintf(why, whylen, "option %s declared twice", d->options[i].key);
        return -EINVAL;
      }
    }
  }
  return 0;
}

/* Human text for a probe child's wait status. */
static void describe_death(int status, char *buf, size_t len) {
  if (WIFSIGNALED(status)) {
    snprintf(buf, len, "crashed while loading: %s", pp_signal_name(WTERMSIG(status)));
  } else if (WIFEXITED(status)) {
    snprintf(buf, len, "probe exited with status %d before describing the plugin",
             WEXITSTATUS(status));
  } else {
    snprintf(buf, len, "probe ended abnormally");
  }
}

/* Read the child's answer until EOF, the size cap or the deadline. */
static int read_reply(int fd, uint64_t deadline, struct pp_wbuf *b, bool *timed_out) {
  *timed_out = false;
  for (;;) {
    int r = pp_ipc_wait_readable(fd, deadline);
    if (r == 0) {
      *timed_out = true;
      return -ETIMEDOUT;
    }
    if (r < 0) return r;
    uint8_t *p = pp_wbuf_reserve(b, 4096);
    if (!p) return b->err;
    ssize_t n = read(fd, p, 4096);
    if (n < 0) {
      b->len -= 4096;
      if (errno == EINTR || errno == EAGAIN) continue;
      return -errno;
    }
    b->len -= 4096 - (size_t)n;
    if (n == 0) return 0;
  }
}

static void probe(struct pp_plugin_info *info) {
  char why[1024] = "";
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC) < 0) {
    snprintf(why, sizeof(why), "pipe: %s", strerror(errno));
    goto refuse;
  }
  pid_t parent = getpid();
  int last_cap = pp_priv_last_cap(); /* before fork: the child reads no files */
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(why, sizeof(why), "fork: %s", strerror(errno));
    close(pfd[0]);
    close(pfd[1]);
    goto refuse;
  }
  if (pid == 0) {
    close(pfd[0]);
    int fd = pp_worker_child_setup(parent, pfd[1], "pp-probe");
    /* Loading a plugin to read its descriptor needs no privilege at all. */
    if (pp_priv_child_drop_all(last_cap) != 0) _exit(1);
    probe_child(info->path, fd);
  }
  close(pfd[1]);
  struct pp_wbuf b;
  pp_wbuf_init(&b);
  b.limit = PROBE_MAX_REPLY;
  bool timed_out;
  uint64_t deadline = pp_ipc_now_ns() + PROBE_TIMEOUT_MS * 1000000ull;
  int rrc = read_reply(pfd[0], deadline, &b, &timed_out);
  close(pfd[0]);
  if (rrc) kill(pid, SIGKILL); /* hung, or sending more than a descriptor can be */
  int status = 0;
  bool reaped = pp_reap(
      pid, deadline > pp_ipc_now_ns() ? deadline : pp_ipc_now_ns() + 1000000000ull, &status);

  if (timed_out) {
    snprintf(why, sizeof(why), "did not finish loading within %d s", PROBE_TIMEOUT_MS / 1000);
  } else if (reaped && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    describe_death(status, why, sizeof(why));
  } else if (rrc) {
    snprintf(why, sizeof(why), "probe failed: %s", strerror(-rrc));
  } else if (b.len == 0) {
    snprintf(why, sizeof(why), "probe sent nothing");
  } else {
    int vt = decode_desc(b.data, b.len, &info->desc, why, sizeof(why));
    if (vt >= 0 && validate_desc(&info->desc, (uint32_t)vt, why, sizeof(why)) == 0) {
      pp_wbuf_free(&b);
      return;
    }
    free_desc(&info->desc);
  }
  pp_wbuf_free(&b);
refuse:
  if (!why[0]) snprintf(why, sizeof(why), "refused");
  if (asprintf(&info->error, "%s: %s", info->path, why) < 0) info->error = NULL;
  if (!info->error) info->error = strdup("plugin refused (out of memory)");
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_plugin_file(const char *dir, const char *name) {
  size_t n = strlen(name);
  if (n < 4 || strcmp(name + n - 3, ".so") != 0 || name[0] == '.') return false;
  char path[4096];
  struct stat st;
  if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path)) return false;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int pp_registry_scan(const char *dir, struct pp_plugin_info **out, size_t *count) {
  *out = NULL;
  *count = 0;
  char *absdir = realpath(dir, NULL);
  if (!absdir) return -errno;
  /* dlopen runs a plugin's code with the agent's privileges: the directory
   * and every one above it must be beyond the reach of other users */
  char why[PATH_MAX + 128];
  int trc = pp_trusted_path_check(dir, true, why, sizeof(why));
  if (trc < 0) {
    pp_log(PP_LOG_ERROR, "polyprof", "plugin directory %s refused: %s", dir, why);
    free(absdir);
    return trc == -ENOENT ? trc : -EACCES;
  }
  DIR *dh = opendir(absdir);
  if (!dh) {
    int rc = -errno;
    free(absdir);
    return rc;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  int rc = 0;
  struct dirent *de;
  while ((de = readdir(dh))) {
    if (!is_plugin_file(absdir, de->d_name)) continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 16;
      char **nn = realloc(names, cap * sizeof(*names));
      if (!nn) {
        rc = -ENOMEM;
        break;
      }
      names = nn;
    }
    if (!(names[n] = strdup(de->d_name))) {
      rc = -ENOMEM;
      break;
    }
    n++;
  }
  closedir(dh);
  struct pp_plugin_info *infos = NULL;
  if (!rc && n) {
    qsort(names, n, sizeof(*names), cmp_names);
    infos = calloc(n, sizeof(*infos));
    if (!infos) rc = -ENOMEM;
  }
  for (size_t i = 0; !rc && i < n; i++) {
    struct pp_plugin_info *info = &infos[i];
    if (asprintf(&info->path, "%s/%s", absdir, names[i]) < 0) {
      info->path = NULL;
      rc = -ENOMEM;
      break;
    }
    char why_file[PATH_MAX + 128];
    if (pp_trusted_path_check(info->path, false, why_file, sizeof(why_file)) < 0) {
      if (asprintf(&info->error, "%s", why_file) < 0) info->error = strdup("untrusted plugin file");
    } else {
      probe(info);
    }
    for (size_t j = 0; !info->error && j < i; j++) {
      if (!infos[j].error && strcmp(infos[j].desc.name, info->desc.name) == 0) {
        if (asprintf(&info->error, "%s: duplicate plugin name \"%s\" (already provided by %s)",
                     info->path, info->desc.name, infos[j].path) < 0)
          info->error = strdup("duplicate plugin name");
        free_desc(&info->desc);
      }
    }
    if (info->error)
      pp_log(PP_LOG_WARNING, "polyprof", "plugin refused: %s", info->error);
    else
      pp_log(PP_LOG_DEBUG, "polyprof", "plugin %s %s found at %s", info->desc.name,
             info->desc.version, info->path);
  }
  for (size_t i = 0; i < n; i++)
    free(names[i]);
  free(names);
  free(absdir);
  if (rc) {
    pp_registry_free(infos, n);
    return rc;
  }
  *out = infos;
  *count = n;
  return 0;
}

void pp_registry_free(struct pp_plugin_info *infos, size_t count) {
  if (!infos) return;
  for (size_t i = 0; i < count; i++) {
    free(infos[i].path);
    free(infos[i].error);
    free_desc(&infos[i].desc);
  }
  free(infos);
}
