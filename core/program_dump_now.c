/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `polyprof dump`'s one-shot read (see program.h): the plugins that have
 * dump() (ABI 1.5) read every thread's stack of their targets at once;
 * each stack comes back under a "[tid N]" root frame, so the threads are
 * told apart by their ids, not by their names. The system-wide plugin's
 * dump() gives the native stack of every thread; a runtime plugin's, the
 * runtime's stacks of the threads it knows.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent.h"
#include "log.h"
#include "program_dump.h"

/* The plugins attach on the targets the session hands them, which takes
 * tens to hundreds of milliseconds; until one has, its dump is empty. */
#define DUMP_FIRST_MS 150
#define DUMP_RETRY_MS 150

static uint64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct pp_dump *pp_dump_new(pid_t pid) {
  struct pp_dump *d = calloc(1, sizeof(*d));
  if (d) d->pid = pid;
  return d;
}

void pp_dump_free(struct pp_dump *d) {
  if (!d) return;
  for (size_t i = 0; i < d->n; i++)
    pp_profile_free(d->profs[i]);
  free(d->profs);
  free(d->done);
  free(d->system_wide);
  free(d);
}

/* The thread a dumped stack belongs to, from its root frame; 0: none. */
uint32_t pp_dump_stack_tid(const struct pp_profile *p, const struct pp_stack_rec *s) {
  const uint32_t *ids = pp_profile_stack_frames(p, s);
  const struct pp_frame_rec *root = ids && s->nframes ? pp_profile_frame(p, ids[0]) : NULL;
  if (!root || root->kind != PP_FRAME_PSEUDO) return 0;
  unsigned tid;
  char end;
  if (sscanf(pp_profile_str(p, root->name), "[tid %u%c", &tid, &end) != 2 || end != ']') return 0;
  return tid;
}

static bool has_stack_of(const struct pp_profile *p, pid_t pid) {
  for (size_t i = 0; i < pp_profile_stack_count(p); i++) {
    const struct pp_stack_rec *s = pp_profile_stack(p, i);
    if (s->pid == (uint32_t)pid && s->nframes > 1 && pp_dump_stack_tid(p, s)) return true;
  }
  return false;
}

/* Plugin i was handed pid. */
static bool targets_pid(const struct pp_agent *a, size_t i, pid_t pid) {
  const struct pp_target *t = NULL;
  size_t nt = pp_targets_of(a->targets, i, &t);
  for (size_t k = 0; t && k < nt; k++)
    if (t[k].pid == (uint32_t)pid) return true;
  return false;
}

bool pp_dump_poll(struct pp_dump *d, struct pp_agent *a) {
  if (d->read) return true;
  uint64_t now = mono_ms();
  if (!d->next_ms) d->next_ms = now + DUMP_FIRST_MS;
  if (now < d->next_ms) return false;
  d->next_ms = now + DUMP_RETRY_MS;
  if (!d->profs) {
    d->profs = calloc(a->nplugins, sizeof(*d->profs));
    d->done = calloc(a->nplugins ? a->nplugins : 1, sizeof(*d->done));
    d->system_wide = calloc(a->nplugins ? a->nplugins : 1, sizeof(*d->system_wide));
    if (!d->profs || !d->done || !d->system_wide) return false;
    d->n = a->nplugins;
    for (size_t i = 0; i < d->n; i++) {
      d->system_wide[i] = a->plugins[i].system_wide;
      if (!(d->profs[i] = pp_profile_new())) return false;
    }
  }
  char err[256];
  int rc[PP_TARGETS_MAX_PLUGINS] = {0};
  size_t n = d->n < PP_TARGETS_MAX_PLUGINS ? d->n : PP_TARGETS_MAX_PLUGINS;
  /* the runtime plugins all asked first, then collected: they read in
   * parallel; the system-wide one after them, as it holds each thread an
   * instant with ptrace, which a runtime plugin holding the same thread
   * (python's blocking mode, nodejs's dump) would refuse it. A plugin
   * that gave its stacks is not asked again. */
  for (int sw = 0; sw < 2; sw++) {
    for (size_t i = 0; i < n; i++)
      if (d->system_wide[i] == (sw == 1))
        rc[i] =
            d->done[i] ? -EALREADY : pp_worker_dump_begin(a->plugins[i].worker, err, sizeof(err));
    for (size_t i = 0; i < n; i++)
      if (d->system_wide[i] == (sw == 1) && rc[i] == 0)
        rc[i] = pp_worker_snapshot_end(a->plugins[i].worker, d->profs[i], err, sizeof(err));
  }
  bool runtime = false, runtime_due = false;
  for (size_t i = 0; i < n; i++) {
    if (rc[i] == 0 && has_stack_of(d->profs[i], d->pid)) d->done[i] = true;
    if (rc[i] && rc[i] != -ENOTSUP && rc[i] != -EALREADY) pp_profile_clear(d->profs[i]);
    if (d->done[i] && !d->system_wide[i]) runtime = true;
    if (d->done[i] && d->system_wide[i]) d->native = true;
    /* a runtime plugin handed pid: its dump is to come once it has
     * attached; one without dump() gives its frames through the session */
    if (!d->system_wide[i] && !d->done[i] && targets_pid(a, i, d->pid)) {
      if (rc[i] == -ENOTSUP)
        d->session = true;
      else
        runtime_due = true;
    }
  }
  /* native stacks alone end the wait only where no runtime plugin is to
   * give its own; otherwise they are shown if none came by the end */
  d->read = runtime || (d->native && !runtime_due && !d->session);
  return d->read;
}
