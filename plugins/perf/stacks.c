/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-session stacks of frame ids, and their emission.
 *
 * Why not the kit's stack table (pp_stack_table): perf symbolizes each
 * address once per session into symbolize.c's frame table, keyed by
 * (object, symbol address), so a stack here is a run of 32-bit frame ids
 * and adding a sample hashes and compares those ids. The kit's table keys
 * stacks by frame text: it would hash and compare every name and path of
 * every frame of every sample again (measured ~100 times the cost per
 * 30-frame sample, twice per sample in smart mode), for frames that are
 * already interned. And smart mode needs what its emit cannot do: per
 * process, emit one of the two tables and rescale the other's counts. The
 * concept is the same (bounded, counted, no allocation once grown), at the
 * level of ids; the strings are the frame table's, emitted as pp_frames.
 *
 * Identical stacks (pid, thread comm, frame ids leaf first) are counted in
 * an open-addressing table whose frame lists live in one pool, so adding a
 * sample allocates nothing once the table has grown to the session's
 * working set. The table is bounded (max_stacks); samples of stacks that
 * do not fit are counted as dropped.
 *
 * Smart mode keeps two tables filled from the same samples (frame-pointer
 * callchain and DWARF unwinding) and picks per process the one with the
 * higher average depth over its distinct stacks, ignoring kernel and
 * [unknown] frames, as gProfiler's smart mode does; DWARF counts are
 * rescaled to the FP total with random rounding, and processes only DWARF
 * saw are left out, as there.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"

static uint64_t stack_hash(uint32_t pid, const char *comm, const uint32_t *f, uint32_t n) {
  uint64_t h = 1469598103934665603ull ^ pid;
  for (const char *c = comm; *c; c++)
    h = (h ^ (unsigned char)*c) * 1099511628211ull;
  for (uint32_t i = 0; i < n; i++)
    h = (h ^ f[i]) * 1099511628211ull;
  h ^= h >> 29;
  return h ? h : 1;
}

void perf_stacks_init(struct perf_stacks *s, size_t max) {
  memset(s, 0, sizeof(*s));
  s->max = max < 64 ? 64 : max;
}

void perf_stacks_reset(struct perf_stacks *s) {
  s->n = 0;
  s->pool_len = 0;
  s->total = s->dropped = 0;
  if (s->slots) memset(s->slots, 0, s->nslots * sizeof(*s->slots));
}

void perf_stacks_fini(struct perf_stacks *s) {
  free(s->v);
  free(s->slots);
  free(s->pool);
  memset(s, 0, sizeof(*s));
}

static int stacks_rehash(struct perf_stacks *s, size_t nslots) {
  uint32_t *sl = calloc(nslots, sizeof(*sl));
  if (!sl) return -ENOMEM;
  for (size_t i = 0; i < s->n; i++) {
    size_t j = s->v[i].hash & (nslots - 1);
    while (sl[j])
      j = (j + 1) & (nslots - 1);
    sl[j] = (uint32_t)i + 1;
  }
  free(s->slots);
  s->slots = sl;
  s->nslots = nslots;
  return 0;
}

void perf_stacks_add(struct perf_stacks *s, uint32_t pid, const char *comm, const uint32_t *frames,
                     uint32_t n) {
  perf_stacks_add_n(s, pid, comm, frames, n, 1);
}

void perf_stacks_add_n(struct perf_stacks *s, uint32_t pid, const char *comm,
                       const uint32_t *frames, uint32_t n, uint64_t weight) {
  s->total += weight;
  uint64_t h = stack_hash(pid, comm, frames, n);
  if (s->nslots) {
    size_t mask = s->nslots - 1;
    for (size_t j = h & mask;; j = (j + 1) & mask) {
      uint32_t x = s->slots[j];
      if (!x) break;
      struct perf_stack *e = &s->v[x - 1];
      if (e->hash == h && e->pid == pid && e->nframes == n &&
          strncmp(e->comm, comm, PERF_COMM_LEN) == 0 &&
          memcmp(s->pool + e->off, frames, n * sizeof(*frames)) == 0) {
        e->count += weight;
        return;
      }
    }
  }
  if (s->n >= s->max) {
    s->dropped++;
    return;
  }
  if ((s->n + 1) * 2 > s->nslots && stacks_rehash(s, s->nslots ? s->nslots * 2 : 4096) < 0) {
    s->dropped++;
    return;
  }
  if (s->n == s->cap) {
    size_t ncap = s->cap ? s->cap * 2 : 1024;
    struct perf_stack *g = realloc(s->v, ncap * sizeof(*g));
    if (!g) {
      s->dropped++;
      return;
    }
    s->v = g;
    s->cap = ncap;
  }
  if (s->pool_len + n > s->pool_cap) {
    size_t ncap = s->pool_cap ? s->pool_cap * 2 : 16384;
    while (ncap < s->pool_len + n)
      ncap *= 2;
    if (ncap > UINT32_MAX) {
      s->dropped++;
      return;
    }
    uint32_t *g = realloc(s->pool, ncap * sizeof(*g));
    if (!g) {
      s->dropped++;
      return;
    }
    s->pool = g;
    s->pool_cap = ncap;
  }
  struct perf_stack *e = &s->v[s->n];
  e->hash = h;
  e->count = weight;
  e->pid = pid;
  e->nframes = n;
  e->off = (uint32_t)s->pool_len;
  strncpy(e->comm, comm, PERF_COMM_LEN - 1);
  e->comm[PERF_COMM_LEN - 1] = '\0';
  memcpy(s->pool + s->pool_len, frames, n * sizeof(*frames));
  s->pool_len += n;
  size_t mask = s->nslots - 1, j = h & mask;
  while (s->slots[j])
    j = (j + 1) & mask;
  s->slots[j] = (uint32_t)s->n + 1;
  s->n++;
}

/* ---- smart mode ---- */

struct pid_stat {
  uint32_t pid;
  uint32_t used;
  double depth_fp, depth_dw; /* sums over distinct stacks */
  uint32_t n_fp, n_dw;       /* distinct stacks */
  int use_dwarf;
};

struct pid_stats {
  struct pid_stat *v;
  size_t cap; /* power of two */
};

static struct pid_stat *pid_stat(struct pid_stats *t, uint32_t pid) {
  size_t mask = t->cap - 1;
  for (size_t j = (pid * 2654435761u) & mask;; j = (j + 1) & mask) {
    if (!t->v[j].used) {
      t->v[j].used = 1;
      t->v[j].pid = pid;
      return &t->v[j];
    }
    if (t->v[j].pid == pid) return &t->v[j];
  }
}

/* gProfiler's get_average_frame_count for one stack: the comm plus the user
 * frames (everything below the first kernel frame from the root), minus
 * [unknown] frames. */
static double stack_depth(const struct perf_state *st, const struct perf_stacks *s,
                          const struct perf_stack *e) {
  const uint32_t *f = s->pool + e->off;
  int depth = 1;
  for (uint32_t i = e->nframes; i > 0; i--) {
    if (st->frames.v[f[i - 1]].kind == PP_FRAME_KERNEL) break;
    if (st->frames.v[f[i - 1]].flags & PERF_FRAME_UNKNOWN) continue;
    depth++;
  }
  return depth;
}

/* Random rounding keeps the expected total (gProfiler scale_sample_counts). */
static uint64_t scale(uint64_t count, double ratio, uint64_t *rng) {
  double x = (double)count * ratio;
  uint64_t base = (uint64_t)x;
  double frac = x - (double)base;
  *rng ^= *rng << 13;
  *rng ^= *rng >> 7;
  *rng ^= *rng << 17;
  double r = (double)(*rng >> 11) / 9007199254740992.0;
  return base + (r < frac ? 1 : 0);
}

void perf_emit_stack(struct perf_state *st, struct pp_sink *sink, const struct perf_stacks *s,
                     const struct perf_stack *e, uint64_t count, uint32_t type) {
  struct pp_frame fr[PERF_MAX_FRAMES];
  uint32_t n = e->nframes > PERF_MAX_FRAMES ? PERF_MAX_FRAMES : e->nframes;
  for (uint32_t i = 0; i < n; i++) {
    const struct perf_frame *f = &st->frames.v[s->pool[e->off + i]];
    fr[i] = (struct pp_frame){.name = perf_frames_str(&st->frames, f->name),
                              .file = perf_frames_str(&st->frames, f->file),
                              .kind = f->kind};
  }
  /* a stack of a thread that had no name when sampled: its process's name
   * if a COMM record brought it since, else the host's (NULL) */
  const char *comm = e->comm;
  if (!comm[0]) {
    struct perf_proc *p = perf_proc_get(st, e->pid, false);
    comm = p && p->comm[0] ? p->comm : NULL;
  }
  struct pp_sample smp = {.pid = e->pid,
                          .tid = 0,
                          .comm = comm,
                          .frames = fr,
                          .nframes = n,
                          .type = type,
                          .count = count};
  st->host->emit(sink, &smp);
}

void perf_stacks_emit(struct perf_state *st, struct pp_sink *sink) {
  if (st->mode == PERF_MODE_FP || st->mode == PERF_MODE_DWARF) {
    const struct perf_stacks *s = st->mode == PERF_MODE_FP ? &st->fp : &st->dwarf;
    for (size_t i = 0; i < s->n; i++)
      perf_emit_stack(st, sink, s, &s->v[i], s->v[i].count, PP_PROFILE_CPU);
    return;
  }
  /* smart */
  struct pid_stats t;
  t.cap = 64;
  while (t.cap < (st->fp.n + st->dwarf.n) * 2)
    t.cap *= 2;
  t.v = calloc(t.cap, sizeof(*t.v));
  if (!t.v) { /* no memory for the choice: FP alone is still a profile */
    for (size_t i = 0; i < st->fp.n; i++)
      perf_emit_stack(st, sink, &st->fp, &st->fp.v[i], st->fp.v[i].count, PP_PROFILE_CPU);
    return;
  }
  for (size_t i = 0; i < st->fp.n; i++) {
    struct pid_stat *ps = pid_stat(&t, st->fp.v[i].pid);
    ps->depth_fp += stack_depth(st, &st->fp, &st->fp.v[i]);
    ps->n_fp++;
  }
  for (size_t i = 0; i < st->dwarf.n; i++) {
    struct pid_stat *ps = pid_stat(&t, st->dwarf.v[i].pid);
    ps->depth_dw += stack_depth(st, &st->dwarf, &st->dwarf.v[i]);
    ps->n_dw++;
  }
  uint64_t fp_total = 0, dw_total = 0;
  for (size_t i = 0; i < st->fp.n; i++)
    fp_total += st->fp.v[i].count;
  for (size_t i = 0; i < st->dwarf.n; i++)
    dw_total += st->dwarf.v[i].count;
  double ratio = dw_total ? (double)fp_total / (double)dw_total : 0.0;
  size_t chose_dwarf = 0, chose_fp = 0;
  for (size_t i = 0; i < t.cap; i++) {
    struct pid_stat *ps = &t.v[i];
    if (!ps->used || !ps->n_fp) continue;
    double afp = ps->depth_fp / ps->n_fp;
    double adw = ps->n_dw ? ps->depth_dw / ps->n_dw : -1.0;
    ps->use_dwarf = ps->n_dw && !(afp > adw);
    if (ps->use_dwarf)
      chose_dwarf++;
    else
      chose_fp++;
  }
  uint64_t rng = 0x9E3779B97F4A7C15ull ^ st->tick;
  for (size_t i = 0; i < st->fp.n; i++) {
    struct pid_stat *ps = pid_stat(&t, st->fp.v[i].pid);
    if (!ps->use_dwarf)
      perf_emit_stack(st, sink, &st->fp, &st->fp.v[i], st->fp.v[i].count, PP_PROFILE_CPU);
  }
  /* pids seen only by DWARF are dropped, as gProfiler does */
  for (size_t i = 0; i < st->dwarf.n; i++) {
    struct pid_stat *ps = pid_stat(&t, st->dwarf.v[i].pid);
    if (!ps->use_dwarf) continue;
    uint64_t c = ratio == 1.0 ? st->dwarf.v[i].count : scale(st->dwarf.v[i].count, ratio, &rng);
    if (c) perf_emit_stack(st, sink, &st->dwarf, &st->dwarf.v[i], c, PP_PROFILE_CPU);
  }
  st->host->add_counter(sink, "smart_pids_dwarf", chose_dwarf);
  st->host->add_counter(sink, "smart_pids_fp", chose_fp);
  free(t.v);
}
