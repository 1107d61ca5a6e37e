/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The target table (see target_table.h): entries in an array of stable
 * pointers, found by pid through an open-addressing index.
 */
#include "polyprof/kit/target_table.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "polyprof/kit/log.h"
#include "polyprof/kit/proc.h"

struct pp_target_table {
  const struct pp_host *host;
  struct pp_target_ops ops;
  void *plugin;
  struct pp_target_table_config cfg;
  struct pp_target_entry **v; /* entries, in announcement order */
  size_t n, cap;
  struct pp_target_entry **index; /* by pid, open addressing; icap a power of two */
  size_t icap;
  uint64_t next_due_ns; /* earliest retry or liveness check, 0: none */
  uint64_t last_liveness_ns;
};

static size_t slot_of(uint32_t pid, size_t mask) {
  return (size_t)(pid * 2654435761u) & mask;
}

static void index_fill(struct pp_target_table *tt) {
  memset(tt->index, 0, tt->icap * sizeof(*tt->index));
  for (size_t i = 0; i < tt->n; i++) {
    size_t s = slot_of(tt->v[i]->pid, tt->icap - 1);
    while (tt->index[s])
      s = (s + 1) & (tt->icap - 1);
    tt->index[s] = tt->v[i];
  }
}

/* An index of at least twice `want` slots (kept at most half full). */
static int index_rebuild(struct pp_target_table *tt, size_t want) {
  size_t icap = 64;
  while (icap < want * 2)
    icap *= 2;
  if (icap != tt->icap) {
    struct pp_target_entry **ix = calloc(icap, sizeof(*ix));
    if (!ix) return -ENOMEM;
    free(tt->index);
    tt->index = ix;
    tt->icap = icap;
  }
  index_fill(tt);
  return 0;
}

struct pp_target_entry *pp_target_table_find(const struct pp_target_table *tt, uint32_t pid) {
  if (!tt->icap) return NULL;
  for (size_t s = slot_of(pid, tt->icap - 1);; s = (s + 1) & (tt->icap - 1)) {
    if (!tt->index[s]) return NULL;
    if (tt->index[s]->pid == pid) return tt->index[s];
  }
}

struct pp_target_table *pp_target_table_new(const struct pp_host *host,
                                            const struct pp_target_ops *ops, void *plugin,
                                            const struct pp_target_table_config *config) {
  struct pp_target_table *tt = calloc(1, sizeof(*tt));
  if (!tt) return NULL;
  tt->host = host;
  tt->ops = *ops;
  tt->plugin = plugin;
  if (config) tt->cfg = *config;
  if (!tt->cfg.max_targets) tt->cfg.max_targets = 65536;
  if (!tt->cfg.retry_attempts) tt->cfg.retry_attempts = 12;
  if (!tt->cfg.retry_first_ns) tt->cfg.retry_first_ns = 250000000ull;
  if (!tt->cfg.retry_max_ns) tt->cfg.retry_max_ns = 10000000000ull;
  if (index_rebuild(tt, 32) < 0) {
    free(tt);
    return NULL;
  }
  return tt;
}

static void release(struct pp_target_table *tt, struct pp_target_entry *t) {
  if (tt->ops.release && t->data) tt->ops.release(tt->plugin, t);
  t->data = NULL;
}

void pp_target_table_free(struct pp_target_table *tt) {
  if (!tt) return;
  for (size_t i = 0; i < tt->n; i++) {
    release(tt, tt->v[i]);
    free(tt->v[i]);
  }
  free(tt->v);
  free(tt->index);
  free(tt);
}

static void due(struct pp_target_table *tt, uint64_t at) {
  if (!tt->next_due_ns || at < tt->next_due_ns) tt->next_due_ns = at;
}

/* One attach() call and what its answer makes of the entry. */
static void attach(struct pp_target_table *tt, struct pp_target_entry *t, uint64_t now) {
  t->attempts++;
  t->reason[0] = '\0';
  int rc = tt->ops.attach(tt->plugin, t);
  if (rc == 0) {
    t->state = PP_TARGET_ATTACHED;
    t->last_error = 0;
    t->attached_ns = now;
    if (tt->cfg.liveness_ns) due(tt, now + tt->cfg.liveness_ns);
    return;
  }
  /* a refusal leaves nothing held */
  release(tt, t);
  if (rc == PP_ATTACH_IGNORE) {
    t->state = PP_TARGET_IGNORED;
  } else if (rc == PP_ATTACH_SKIP) {
    t->state = PP_TARGET_SKIPPED;
  } else if (rc == -ESRCH) {
    t->state = PP_TARGET_GONE;
  } else if (rc > 0 || t->attempts >= tt->cfg.retry_attempts) {
    t->state = PP_TARGET_FAILED;
    if (!t->reason[0])
      snprintf(t->reason, sizeof(t->reason), "attach failed: %s",
               rc < 0 ? strerror(-rc) : "refused by the plugin");
    if (rc < 0) t->last_error = rc;
  } else {
    t->state = PP_TARGET_PENDING;
    t->last_error = rc;
    uint64_t wait = tt->cfg.retry_first_ns;
    for (uint32_t i = 1; i < t->attempts && wait < tt->cfg.retry_max_ns; i++)
      wait *= 2;
    if (wait > tt->cfg.retry_max_ns) wait = tt->cfg.retry_max_ns;
    t->next_try_ns = now + wait;
    due(tt, t->next_try_ns);
  }
}

/* Back to a fresh look: a new image in the same process. */
static void reset(struct pp_target_table *tt, struct pp_target_entry *t, uint64_t start_time,
                  uint64_t exe_id) {
  release(tt, t);
  t->start_time = start_time;
  t->exe_id = exe_id;
  t->state = PP_TARGET_PENDING;
  t->attempts = 0;
  t->last_error = 0;
  t->next_try_ns = 0;
  t->attached_ns = 0;
  t->reason[0] = '\0';
}

int pp_target_table_add(struct pp_target_table *tt, const struct pp_target *targets, size_t n) {
  uint64_t now = pp_clock_ns();
  for (size_t i = 0; i < n; i++) {
    const struct pp_target *g = &targets[i];
    uint64_t exe_id = pp_proc_exe_id(g->pid);
    struct pp_target_entry *t = pp_target_table_find(tt, g->pid);
    if (t) {
      bool same = t->start_time == g->start_time && t->state != PP_TARGET_GONE;
      /* the same image again (a session's re-announcement): nothing to do;
       * an unknown image id (0) is taken as the same */
      if (same && (exe_id == t->exe_id || !exe_id || !t->exe_id)) continue;
      if (same) PP_DEBUG(tt->host, "pid %u: new executable image (exec): looking again", g->pid);
      reset(tt, t, g->start_time, exe_id);
      attach(tt, t, now);
      continue;
    }
    if (tt->n == tt->cap) {
      size_t ncap = tt->cap ? tt->cap * 2 : 64;
      struct pp_target_entry **nv = realloc(tt->v, ncap * sizeof(*nv));
      if (!nv) return -ENOMEM;
      tt->v = nv;
      tt->cap = ncap;
    }
    t = calloc(1, sizeof(*t));
    if (!t) return -ENOMEM;
    t->pid = g->pid;
    t->start_time = g->start_time;
    t->exe_id = exe_id;
    if ((tt->n + 1) * 2 > tt->icap && index_rebuild(tt, tt->n + 1) < 0) {
      free(t);
      return -ENOMEM;
    }
    tt->v[tt->n++] = t;
    size_t s = slot_of(t->pid, tt->icap - 1);
    while (tt->index[s])
      s = (s + 1) & (tt->icap - 1);
    tt->index[s] = t;
    if (pp_target_table_count(tt, PP_TARGET_ATTACHED) +
            pp_target_table_count(tt, PP_TARGET_PENDING) >
        tt->cfg.max_targets) {
      t->state = PP_TARGET_SKIPPED;
      snprintf(t->reason, sizeof(t->reason), "more than %zu processes to profile (max_targets)",
               tt->cfg.max_targets);
      continue;
    }
    attach(tt, t, now);
  }
  return 0;
}

static bool alive(const struct pp_target_entry *t) {
  uint64_t st = 0;
  return pp_proc_start_time(t->pid, &st) == 0 && st == t->start_time;
}

void pp_target_table_gone(struct pp_target_table *tt, struct pp_target_entry *t) {
  release(tt, t);
  t->state = PP_TARGET_GONE;
}

void pp_target_table_reattach(struct pp_target_table *tt, struct pp_target_entry *t) {
  PP_DEBUG(tt->host, "pid %u: new program image: looking again", t->pid);
  reset(tt, t, t->start_time, pp_proc_exe_id(t->pid));
  attach(tt, t, pp_clock_ns());
}

void pp_target_table_retry(struct pp_target_table *tt, struct pp_target_entry *t, int err,
                           uint64_t delay_ns) {
  if (t->state == PP_TARGET_GONE) return;
  char reason[sizeof(t->reason)];
  memcpy(reason, t->reason, sizeof(reason));
  release(tt, t);
  memcpy(t->reason, reason, sizeof(reason));
  /* attached until now: a new cycle, its attempts counted afresh */
  if (t->state == PP_TARGET_ATTACHED) t->attempts = 0;
  t->attempts++;
  t->state = PP_TARGET_PENDING;
  t->last_error = err < 0 ? err : -EIO;
  uint64_t wait = delay_ns ? delay_ns : tt->cfg.retry_first_ns;
  for (uint32_t i = 1; !delay_ns && i < t->attempts && wait < tt->cfg.retry_max_ns; i++)
    wait *= 2;
  if (!delay_ns && wait > tt->cfg.retry_max_ns) wait = tt->cfg.retry_max_ns;
  t->next_try_ns = pp_clock_ns() + wait;
  due(tt, t->next_try_ns);
}

/* Liveness of an attached target: gone, or exec'd into another file. */
static void check_live(struct pp_target_table *tt, struct pp_target_entry *t) {
  if (!alive(t)) {
    pp_target_table_gone(tt, t);
    return;
  }
  uint64_t exe_id = pp_proc_exe_id(t->pid);
  if (exe_id && t->exe_id && exe_id != t->exe_id) pp_target_table_reattach(tt, t);
}

void pp_target_table_poll(struct pp_target_table *tt, uint64_t now_ns) {
  if (!tt->next_due_ns || now_ns < tt->next_due_ns) return;
  tt->next_due_ns = 0;
  bool liveness = tt->cfg.liveness_ns && now_ns - tt->last_liveness_ns >= tt->cfg.liveness_ns;
  if (liveness) tt->last_liveness_ns = now_ns;
  for (size_t i = 0; i < tt->n; i++) {
    struct pp_target_entry *t = tt->v[i];
    if (t->state == PP_TARGET_PENDING) {
      if (t->next_try_ns <= now_ns)
        attach(tt, t, now_ns);
      else
        due(tt, t->next_try_ns);
    } else if (liveness && t->state == PP_TARGET_ATTACHED) {
      check_live(tt, t);
    }
  }
  if (tt->cfg.liveness_ns) due(tt, tt->last_liveness_ns + tt->cfg.liveness_ns);
}

void pp_target_table_report(struct pp_target_table *tt, struct pp_sink *sink) {
  const struct pp_host *h = tt->host;
  uint64_t attached = 0, pending = 0, failed = 0;
  size_t keep = 0;
  for (size_t i = 0; i < tt->n; i++) {
    struct pp_target_entry *t = tt->v[i];
    if (t->state == PP_TARGET_ATTACHED)
      check_live(tt, t);
    else if (t->state != PP_TARGET_GONE && !alive(t))
      pp_target_table_gone(tt, t);
    switch (t->state) {
      case PP_TARGET_ATTACHED:
        attached++;
        break;
      case PP_TARGET_PENDING:
        pending++;
        if (t->reason[0]) h->set_pid_status(sink, t->pid, PP_PID_ERROR, t->reason);
        break;
      case PP_TARGET_SKIPPED:
        h->set_pid_status(sink, t->pid, PP_PID_SKIPPED, t->reason);
        break;
      case PP_TARGET_FAILED:
        failed++;
        h->set_pid_status(sink, t->pid, PP_PID_ERROR, t->reason);
        break;
      default:
        break;
    }
    if (t->state == PP_TARGET_GONE)
      free(t);
    else
      tt->v[keep++] = t;
  }
  if (keep != tt->n) {
    tt->n = keep;
    /* fewer entries: the index in place always fits (a smaller one is a
     * saving, not a need) */
    if (index_rebuild(tt, tt->n > 32 ? tt->n : 32) < 0) index_fill(tt);
  }
  if (attached) h->add_counter(sink, "targets_attached", attached);
  if (pending) h->add_counter(sink, "targets_pending", pending);
  if (failed) h->add_counter(sink, "targets_failed", failed);
}

struct pp_target_entry *pp_target_table_next(const struct pp_target_table *tt, size_t *cursor,
                                             int state) {
  while (*cursor < tt->n) {
    struct pp_target_entry *t = tt->v[(*cursor)++];
    if (state < 0 || t->state == state) return t;
  }
  return NULL;
}

size_t pp_target_table_count(const struct pp_target_table *tt, int state) {
  if (state < 0) return tt->n;
  size_t c = 0;
  for (size_t i = 0; i < tt->n; i++)
    c += tt->v[i]->state == state;
  return c;
}
