/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The process memory (see proc_memory.h): facts read from /proc while a
 * process lives, served after it exited.
 */
#include "proc_memory.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app_metadata.h"
#include "enrich.h"
#include "lru.h"
#include "polyprof/kit/proc.h"

#define CMDLINE_CAP (128 * 1024)
#define CGROUP_CAP (64 * 1024)

struct pp_proc_memory {
  const struct pp_enrich_opts *opts;
  struct pp_lru *procs;  /* (pid, start) -> struct pp_proc_facts */
  struct pp_lru *newest; /* pid -> malloc'd uint64_t start time */
  char *cmd;             /* CMDLINE_CAP scratch, kept: no allocation per process */
  char *cgroup;          /* CGROUP_CAP scratch, likewise */
};

static void facts_free(void *v) {
  struct pp_proc_facts *f = v;
  if (!f) return;
  free(f->comm);
  free(f->exe);
  free(f->appid);
  json_decref(f->core_meta);
  free(f);
}

void pp_proc_memory_free(struct pp_proc_memory *m) {
  if (!m) return;
  pp_lru_free(m->procs);
  pp_lru_free(m->newest);
  free(m->cmd);
  free(m->cgroup);
  free(m);
}

struct pp_proc_memory *pp_proc_memory_new(const struct pp_enrich_opts *opts, size_t capacity) {
  struct pp_proc_memory *m = calloc(1, sizeof(*m));
  if (!m) return NULL;
  m->opts = opts;
  m->procs = pp_lru_new(capacity, facts_free);
  m->newest = pp_lru_new(capacity, free);
  m->cmd = malloc(CMDLINE_CAP);
  m->cgroup = malloc(CGROUP_CAP);
  if (!m->procs || !m->newest || !m->cmd || !m->cgroup) {
    pp_proc_memory_free(m);
    return NULL;
  }
  return m;
}

size_t pp_proc_memory_count(const struct pp_proc_memory *m) {
  return m ? pp_lru_count(m->procs) : 0;
}

/* Everything about a live process, read once per (pid, start) and again
 * after an exec. */
static struct pp_proc_facts *facts_read(struct pp_proc_memory *m, uint32_t pid) {
  const struct pp_enrich_opts *o = m->opts;
  struct pp_proc_facts *f = calloc(1, sizeof(*f));
  if (!f) return NULL;
  char buf[PATH_MAX];
  if (pp_proc_comm(pid, buf, sizeof(buf)) == 0) f->comm = strdup(buf);
  f->exe_id = pp_proc_exe_id(pid);
  if (pp_proc_exe(pid, buf, sizeof(buf)) == 0) f->exe = strdup(buf);
  size_t cmd_len = 0;
  if (pp_proc_cmdline(pid, m->cmd, CMDLINE_CAP, &cmd_len) != 0) cmd_len = 0;
  /* execve() switches /proc/PID/exe before it writes argv and auxv; a
   * user process with an exe and an empty command line is in that gap */
  f->unsettled = f->exe && cmd_len == 0;
  f->rt = pp_runtime_detect(f->exe, m->cmd, cmd_len);
  if (o->appids && cmd_len && f->rt != PP_RT_UNKNOWN) {
    char cwd[PATH_MAX], root[64];
    bool have_cwd = pp_proc_cwd(pid, cwd, sizeof(cwd)) == 0;
    pp_proc_root(pid, root, sizeof(root));
    f->appid = pp_appid_for(f->exe, m->cmd, cmd_len, have_cwd ? cwd : NULL, root, o);
  }
  if (o->containers) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%u/cgroup", pid);
    if (pp_read_file(path, m->cgroup, CGROUP_CAP, NULL) == 0)
      pp_container_id_from_cgroup(m->cgroup, f->container_id);
  }
  /* a runtime's metadata (versions, build ids) is read from its live
   * files and memory: now, since the process may be gone at the end */
  if (o->app_metadata && !f->unsettled && f->rt != PP_RT_UNKNOWN && f->rt != PP_RT_PHP) {
    f->core_meta = pp_app_metadata_collect(pid, f->rt, f->exe, true);
    f->meta_done = true;
  }
  return f;
}

/* exec() keeps pid and start time but changes comm (to the new program's
 * name) and exe; both are small reads, so a live process is checked each
 * time it is looked up. */
static bool exec_changed(const struct pp_proc_facts *f, uint32_t pid) {
  uint64_t id = pp_proc_exe_id(pid);
  /* an exe that cannot be read any more is a process exiting (its memory
   * and exe gone, its command line empty), not an exec: read again, it
   * would lose its name and appid just before its last samples are named */
  if (id == 0) return false;
  if (f->unsettled) return true;
  if (f->exe_id != id) return true;
  char buf[64];
  if (pp_proc_comm(pid, buf, sizeof(buf)) != 0) return false;
  return !f->comm || strcmp(buf, f->comm) != 0;
}

static void note_newest(struct pp_proc_memory *m, uint32_t pid, uint64_t start) {
  uint64_t *v = pp_lru_get(m->newest, &pid, sizeof(pid));
  if (v) {
    if (*v < start) *v = start;
    return;
  }
  v = malloc(sizeof(*v));
  if (!v) return;
  *v = start;
  pp_lru_put(m->newest, &pid, sizeof(pid), v);
}

/* The facts of (pid, start): cached, or read now while the pid still names
 * that process. */
static struct pp_proc_facts *lookup(struct pp_proc_memory *m, uint32_t pid, uint64_t start,
                                    bool live) {
  struct pp_lru_pid_key key = pp_lru_pid_key(pid, start);
  void *v = NULL;
  if (pp_lru_lookup(m->procs, &key, sizeof(key), &v) && v) {
    if (!live || !exec_changed(v, pid)) return v;
    /* same process, new program (a shell that exec'd python): what was
     * learnt about the old one is wrong now */
    pp_lru_remove(m->procs, &key, sizeof(key));
  }
  if (!live) return NULL;
  struct pp_proc_facts *f = facts_read(m, pid);
  if (!f) return NULL;
  /* it may have exited (and the pid been reused) while we read it */
  if (!pp_proc_same_process(pid, start)) {
    facts_free(f);
    return NULL;
  }
  if (pp_lru_put(m->procs, &key, sizeof(key), f) != 0) return NULL;
  note_newest(m, pid, start);
  return f;
}

struct pp_proc_facts *pp_proc_memory_get(struct pp_proc_memory *m, uint32_t pid,
                                         uint64_t start_time, bool *live) {
  *live = false;
  if (!m || pid == 0) return NULL; /* the idle task has no /proc entry */
  uint64_t cur = 0;
  bool exists = pp_proc_start_time(pid, &cur) == 0;
  uint64_t start = start_time;
  if (!start) {
    /* A pid alone: the newest process remembered with it, unless the pid
     * names a live process the memory knows. Runtime plugins sample only
     * processes the scan announced (all remembered), and pids are reused
     * within seconds on a busy host (pid_max 32768): a live process that
     * was never seen took the pid of one that was sampled and exited. */
    uint64_t *v = pp_lru_get(m->newest, &pid, sizeof(pid));
    if (v && exists && *v != cur) {
      struct pp_lru_pid_key k = pp_lru_pid_key(pid, cur);
      start = pp_lru_get(m->procs, &k, sizeof(k)) ? cur : *v;
    } else if (v) {
      start = *v;
    } else if (exists) {
      start = cur;
    } else {
      return NULL;
    }
  }
  *live = exists && cur == start;
  return lookup(m, pid, start, *live);
}

void pp_proc_memory_see(struct pp_proc_memory *m, uint32_t pid, uint64_t start_time) {
  bool live;
  pp_proc_memory_get(m, pid, start_time, &live);
}

/* An exited process is kept for one more session, since a plugin may hand
 * over its last stacks a snapshot late (a Node program let go at exit),
 * then dropped: under churn the memory would otherwise hold only dead
 * processes. */
static bool drop_exited(const void *key, size_t key_len, void *value, void *ctx) {
  (void)ctx;
  struct pp_proc_facts *f = value;
  struct pp_lru_pid_key k;
  if (key_len != sizeof(k)) return false;
  memcpy(&k, key, sizeof(k));
  if (!f) return !pp_proc_same_process(k.pid, k.start_time);
  if (pp_proc_same_process(k.pid, k.start_time)) {
    f->gone = false;
    return false;
  }
  if (f->gone) return true;
  f->gone = true;
  return false;
}

/* A pid whose newest process is no longer remembered. */
static bool drop_stale_pid(const void *key, size_t key_len, void *value, void *ctx) {
  struct pp_proc_memory *m = ctx;
  uint32_t pid;
  if (key_len != sizeof(pid) || !value) return true;
  memcpy(&pid, key, sizeof(pid));
  struct pp_lru_pid_key k = pp_lru_pid_key(pid, *(const uint64_t *)value);
  return !pp_lru_get(m->procs, &k, sizeof(k)); /* the other cache: allowed */
}

void pp_proc_memory_end_session(struct pp_proc_memory *m) {
  if (!m) return;
  pp_lru_remove_if(m->procs, drop_exited, NULL);
  pp_lru_remove_if(m->newest, drop_stale_pid, m);
}
