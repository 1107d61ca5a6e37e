/*
 * Per-pid enrichment of the merged profile: comm, container name, appid and
 * the application-metadata index, plus the header tables they refer to, by
 * gProfiler's rules (docs/gprofiler-compat.md).
 *
 * What is learnt about a process is cached in a bounded LRU keyed by
 * (pid, start time): a reused pid has another start time and gets a fresh
 * entry, and a process that exited keeps what was learnt while it lived.
 * /proc is only read while the pid still names the same process.
 */
#include "enrich.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "app_metadata.h"
#include "appid.h"
#include "container.h"
#include "log.h"
#include "lru.h"
#include "metadata.h"
#include "polyprof/kit/proc.h"

#define CMDLINE_CAP (128 * 1024)
#define CGROUP_CAP (64 * 1024)
#define DEFAULT_CACHE 4096

struct proc_entry {
  char *comm;            /* NULL if unknown */
  char *exe;             /* NULL if unreadable */
  uint64_t exe_id;       /* pp_proc_exe_id when read: an exec changes it */
  char *appid;           /* NULL if no rule matched */
  char container_id[65]; /* "" if not in a container */
  enum pp_runtime rt;
  bool unsettled; /* exe switched but argv not laid out yet: read again */
  bool meta_done;
  bool gone;         /* seen exited at the end of a session */
  json_t *core_meta; /* NULL: nothing to report */
};

struct pp_enricher {
  struct pp_enrich_opts opts; /* strings owned */
  struct pp_lru *procs;
  struct pp_containers *containers;
};

static void entry_free(void *v) {
  struct proc_entry *e = v;
  free(e->comm);
  free(e->exe);
  free(e->appid);
  json_decref(e->core_meta);
  free(e);
}

void pp_enricher_free(struct pp_enricher *e) {
  if (!e) return;
  for (size_t i = 0; i < e->opts.app_id_args_filter_count; i++)
    free((char *)e->opts.app_id_args_filters[i]);
  free((void *)e->opts.app_id_args_filters);
  free((char *)e->opts.docker_socket);
  pp_lru_free(e->procs);
  pp_containers_free(e->containers);
  free(e);
}

struct pp_enricher *pp_enricher_new(const struct pp_enrich_opts *opts) {
  struct pp_enricher *e = calloc(1, sizeof(*e));
  if (!e) return NULL;
  e->opts = *opts;
  e->opts.app_id_args_filters = NULL;
  e->opts.app_id_args_filter_count = 0;
  e->opts.docker_socket = NULL;
  if (!e->opts.cache_size) e->opts.cache_size = DEFAULT_CACHE;
  size_t nf = opts->app_id_args_filter_count;
  if (nf) {
    char **f = calloc(nf, sizeof(*f));
    if (!f) goto oom;
    e->opts.app_id_args_filters = (const char *const *)f;
    for (size_t i = 0; i < nf; i++) {
      f[i] = strdup(opts->app_id_args_filters[i] ? opts->app_id_args_filters[i] : "");
      if (!f[i]) goto oom;
      e->opts.app_id_args_filter_count = i + 1;
    }
  }
  if (opts->docker_socket && !(e->opts.docker_socket = strdup(opts->docker_socket))) goto oom;
  e->procs = pp_lru_new(e->opts.cache_size, entry_free);
  if (!e->procs) goto oom;
  if (e->opts.containers) {
    e->containers = pp_containers_new(e->opts.docker_socket, e->opts.cache_size);
    if (!e->containers) goto oom;
  }
  return e;
oom:
  pp_enricher_free(e);
  return NULL;
}

/* Everything cheap about a live process, read once per (pid, start). */
static struct proc_entry *entry_create(struct pp_enricher *en, uint32_t pid) {
  struct proc_entry *e = calloc(1, sizeof(*e));
  if (!e) return NULL;
  char buf[PATH_MAX];
  if (pp_proc_comm(pid, buf, sizeof(buf)) == 0) e->comm = strdup(buf);
  e->exe_id = pp_proc_exe_id(pid);
  if (pp_proc_exe(pid, buf, sizeof(buf)) == 0) e->exe = strdup(buf);
  char *cmd = malloc(CMDLINE_CAP);
  size_t cmd_len = 0;
  if (cmd && pp_proc_cmdline(pid, cmd, CMDLINE_CAP, &cmd_len) != 0) cmd_len = 0;
  /* execve() switches /proc/PID/exe before it writes argv and auxv; a
   * user process with an exe and an empty command line is in that gap */
  e->unsettled = e->exe && cmd && cmd_len == 0;
  e->rt = pp_runtime_detect(e->exe, cmd, cmd_len);
  if (en->opts.appids && cmd_len && e->rt != PP_RT_UNKNOWN) {
    char cwd[PATH_MAX], root[64];
    bool have_cwd = pp_proc_cwd(pid, cwd, sizeof(cwd)) == 0;
    pp_proc_root(pid, root, sizeof(root));
    e->appid = pp_appid_for(e->exe, cmd, cmd_len, have_cwd ? cwd : NULL, root, &en->opts);
  }
  free(cmd);
  if (en->opts.containers) {
    char *cg = malloc(CGROUP_CAP);
    char path[64];
    snprintf(path, sizeof(path), "/proc/%u/cgroup", pid);
    if (cg && pp_read_file(path, cg, CGROUP_CAP, NULL) == 0)
      pp_container_id_from_cgroup(cg, e->container_id);
    free(cg);
  }
  return e;
}

/* exec() keeps pid and start time but changes comm (to the new program's
 * name) and exe; comm is one small read, so live processes are checked
 * each time they are enriched. */
static bool exec_changed(const struct proc_entry *e, uint32_t pid) {
  /* exec keeps pid and start time; the file or the comm tells */
  if (e->unsettled) return true;
  if (e->exe_id != pp_proc_exe_id(pid)) return true;
  char buf[64];
  if (pp_proc_comm(pid, buf, sizeof(buf)) != 0) return false;
  return !e->comm || strcmp(buf, e->comm) != 0;
}

/* The cache entry of a pid record: created while the pid still names the
 * process the record is about, otherwise whatever was cached (or NULL). */
static struct proc_entry *entry_for(struct pp_enricher *en, uint32_t pid, uint64_t rec_start,
                                    bool *live) {
  *live = false;
  if (pid == 0) return NULL; /* the idle task has no /proc entry */
  uint64_t cur = 0;
  bool exists = pp_proc_start_time(pid, &cur) == 0;
  uint64_t start = rec_start ? rec_start : cur;
  if (!start && !exists) return NULL;
  *live = exists && cur == start;
  struct pp_lru_pid_key key = pp_lru_pid_key(pid, start);
  void *v = NULL;
  if (pp_lru_lookup(en->procs, &key, sizeof(key), &v) && v) {
    if (!*live || !exec_changed(v, pid)) return v;
    /* same process, new program (a shell that exec'd python): what was
     * learnt about the old one is wrong now */
    pp_lru_remove(en->procs, &key, sizeof(key));
  }
  if (!*live) return NULL;
  struct proc_entry *e = entry_create(en, pid);
  if (!e) return NULL;
  /* it may have exited (and the pid been reused) while we read it */
  if (!pp_proc_same_process(pid, start)) {
    entry_free(e);
    *live = false;
    return NULL;
  }
  if (pp_lru_put(en->procs, &key, sizeof(key), e) != 0) return NULL;
  return e;
}

/* Index of `md` in the header table, appending it if new. Equal dicts share
 * one index, compared by value through a canonical dump. */
static uint32_t meta_index(json_t *list, struct pp_lru *seen, json_t *md) {
  char *canon = json_dumps(md, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENCODE_ANY);
  if (!canon) return 0;
  void *v = NULL;
  uint32_t idx = 0;
  if (pp_lru_lookup_str(seen, canon, &v)) {
    idx = (uint32_t)(uintptr_t)v;
  } else if (json_array_append(list, md) == 0) {
    idx = (uint32_t)(json_array_size(list) - 1);
    pp_lru_put_str(seen, canon, (void *)(uintptr_t)idx);
  }
  free(canon);
  return idx;
}

static void add_container_name(json_t *containers, const char *name) {
  if (!containers || !name || !*name) return;
  for (size_t i = 0; i < json_array_size(containers); i++) {
    const char *s = json_string_value(json_array_get(containers, i));
    if (s && strcmp(s, name) == 0) return;
  }
  json_array_append_new(containers, pp_json_string_lossy(name, strlen(name)));
}

/* Container name for an id: the runtime's name, else (unless an empty name
 * was asked for, as gProfiler writes it) the 12-hex short id Docker itself
 * shows. */
static char *container_name(struct pp_enricher *en, const char *id) {
  if (!id[0]) return NULL;
  char *name = NULL;
  if (en->containers && pp_containers_name(en->containers, id, &name) == 0) return name;
  if (en->opts.container_empty_if_unnamed) return NULL;
  return strndup(id, 12);
}

static json_t *pid_metadata(struct pp_enricher *en, const struct pp_pid_rec *rec,
                            const struct pp_profile *p, struct proc_entry *e, bool live) {
  const char *plugin_md = rec->app_meta != PP_NO_STR ? pp_profile_str(p, rec->app_meta) : NULL;
  bool runtime = e && e->rt != PP_RT_UNKNOWN && e->rt != PP_RT_PHP;
  if (e && !e->meta_done && live && (runtime || plugin_md)) {
    e->core_meta = pp_app_metadata_collect(rec->pid, e->rt, e->exe, true);
    e->meta_done = true;
  }
  const json_t *core = e && (runtime || plugin_md) ? e->core_meta : NULL;
  return pp_app_metadata_merge(core, plugin_md);
}

/* An exited process is kept for one more session, since a plugin may hand
 * over its last stacks a snapshot late (a Node program let go at exit),
 * then dropped: under churn the cache otherwise filled with thousands of
 * dead processes (~36 KiB of the core's RSS a minute in the soak). */
static bool drop_exited(const void *key, size_t key_len, void *value, void *ctx) {
  (void)ctx;
  struct proc_entry *e = value;
  struct pp_lru_pid_key k;
  if (key_len != sizeof(k)) return false;
  memcpy(&k, key, sizeof(k));
  if (!e) return !pp_proc_same_process(k.pid, k.start_time);
  if (pp_proc_same_process(k.pid, k.start_time)) {
    e->gone = false;
    return false;
  }
  if (e->gone) return true;
  e->gone = true;
  return false;
}

static void forget_exited(struct pp_enricher *en) {
  pp_lru_remove_if(en->procs, drop_exited, NULL);
}

int pp_enrich(struct pp_enricher *en, struct pp_profile *merged, json_t *app_meta_list,
              json_t *containers) {
  if (!en || !merged) return -EINVAL;
  if (app_meta_list && json_array_size(app_meta_list) == 0)
    json_array_append_new(app_meta_list, json_null());
  size_t npids = pp_profile_pid_count(merged);
  struct pp_lru *seen = pp_lru_new(npids + json_array_size(app_meta_list) + 1, NULL);
  if (!seen) return -ENOMEM;
  /* entries already in the table keep their indexes */
  for (size_t i = 1; app_meta_list && i < json_array_size(app_meta_list); i++) {
    char *canon = json_dumps(json_array_get(app_meta_list, i),
                             JSON_SORT_KEYS | JSON_COMPACT | JSON_ENCODE_ANY);
    if (canon) pp_lru_put_str(seen, canon, (void *)(uintptr_t)i);
    free(canon);
  }
  int rc = 0;
  for (size_t i = 0; i < npids; i++) {
    struct pp_pid_rec *rec = pp_profile_pid_at(merged, i);
    bool live;
    struct proc_entry *e = entry_for(en, rec->pid, rec->start_time, &live);
    uint32_t id;

    if (rec->comm == PP_NO_STR && e && e->comm) {
      id = pp_profile_intern_cstr(merged, e->comm);
      if (id == PP_NO_STR) rc = -ENOMEM;
      pp_profile_pid_at(merged, i)->comm = id;
    }

    rec = pp_profile_pid_at(merged, i);
    if (en->opts.containers && e && e->container_id[0]) {
      char *name = container_name(en, e->container_id);
      if (name) {
        id = pp_profile_intern_cstr(merged, name);
        if (id == PP_NO_STR) rc = -ENOMEM;
        pp_profile_pid_at(merged, i)->container = id;
        add_container_name(containers, name);
        free(name);
      }
    } else if (en->opts.containers && rec->container != PP_NO_STR) {
      add_container_name(containers, pp_profile_str(merged, rec->container));
    }

    rec = pp_profile_pid_at(merged, i);
    if (en->opts.appids && rec->appid == PP_NO_STR && e && e->appid) {
      id = pp_profile_intern_cstr(merged, e->appid);
      if (id == PP_NO_STR) rc = -ENOMEM;
      pp_profile_pid_at(merged, i)->appid = id;
    }

    rec = pp_profile_pid_at(merged, i);
    rec->app_meta_index = 0;
    if (en->opts.app_metadata && app_meta_list) {
      json_t *md = pid_metadata(en, rec, merged, e, live);
      if (md) rec->app_meta_index = meta_index(app_meta_list, seen, md);
      json_decref(md);
    }
  }
  pp_lru_free(seen);
  forget_exited(en);
  return rc;
}

void pp_enrich_remember(struct pp_enricher *en, uint32_t pid, uint64_t start_time) {
  bool live;
  if (en) entry_for(en, pid, start_time, &live);
}
