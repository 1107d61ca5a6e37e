/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The merge stage: perf's system-wide stacks are the base, runtime plugins'
 * stacks replace them per pid (the rule: merge.h, docs/gprofiler-compat.md).
 *
 * Deviations from gProfiler, all deliberate:
 *  - Scaling uses largest-remainder rounding instead of a random coin per
 *    stack, so a pid's total is exactly perf's count and two runs over the
 *    same input give the same bytes (ties: earlier stack wins).
 *  - When two runtime plugins claim the same pid (both have stacks or a
 *    status for it), the first in `runtimes` order wins and the other is
 *    logged and ignored; gProfiler's dict update would let the last one win
 *    silently, which depends on thread-pool timing there.
 *  - A runtime pid record with status error/skipped is an error profile even
 *    if the plugin also emitted stacks for it (gProfiler's error profile has
 *    no other stacks, so this cannot differ in practice).
 *
 * Speed: everything from a source profile reaches `out` through per-source
 * id maps (string id -> out string id, frame id -> out frame id), filled
 * lazily, so each distinct string and frame is hashed once per merge; stacks
 * are grouped by pid with one counting sort per source. Allocation is per
 * source and per merge, never per stack.
 */
#include "merge.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define UNMAPPED UINT32_MAX

/* ---- pid -> value hash (open addressing, linear probing) ---------------- */

struct pid_map {
  uint32_t *keys; /* pid + 1; 0 = empty slot (pid 0, swapper, is a real pid) */
  uint32_t *vals;
  size_t mask;
};

static int pid_map_init(struct pid_map *m, size_t n) {
  size_t cap = 16;
  while (cap < n * 2)
    cap <<= 1;
  m->keys = calloc(cap, sizeof(*m->keys));
  m->vals = malloc(cap * sizeof(*m->vals));
  m->mask = cap - 1;
  return m->keys && m->vals ? 0 : -ENOMEM;
}

static void pid_map_free(struct pid_map *m) {
  free(m->keys);
  free(m->vals);
}

static size_t pid_hash(uint32_t pid) {
  return (size_t)(pid * 2654435761u);
}

/* Returns the slot of pid: keys[slot] == pid + 1 if present, 0 if free. The
 * table is sized for the number of keys it will ever hold, so never full. */
static size_t pid_map_slot(const struct pid_map *m, uint32_t pid) {
  size_t i = pid_hash(pid) & m->mask;
  while (m->keys[i] && m->keys[i] != pid + 1)
    i = (i + 1) & m->mask;
  return i;
}

static bool pid_map_get(const struct pid_map *m, uint32_t pid, uint32_t *val) {
  size_t i = pid_map_slot(m, pid);
  if (!m->keys[i]) return false;
  *val = m->vals[i];
  return true;
}

static void pid_map_put(struct pid_map *m, uint32_t pid, uint32_t val) {
  size_t i = pid_map_slot(m, pid);
  m->keys[i] = pid + 1;
  m->vals[i] = val;
}

/* ---- one source profile as seen by the merge --------------------------- */

struct src {
  const struct pp_profile *p;
  const char *name;    /* for logs */
  uint32_t *str_map;   /* src string id -> out string id */
  uint32_t *frame_map; /* src frame id -> out frame id */
  size_t npids;
  struct pid_map slot_of; /* pid -> index in pid_at() order */
  uint32_t *start;        /* stacks of pid slot s: order[start[s] .. start[s+1]) */
  uint32_t *order;        /* stack indices grouped by pid slot, stack order kept */
  uint64_t *sum;          /* per pid slot: sum of its stack counts */
};

static void src_free(struct src *s) {
  free(s->str_map);
  free(s->frame_map);
  pid_map_free(&s->slot_of);
  free(s->start);
  free(s->order);
  free(s->sum);
  memset(s, 0, sizeof(*s));
}

static int src_init(struct src *s, const struct pp_profile *p, const char *name) {
  memset(s, 0, sizeof(*s));
  s->p = p;
  s->name = name ? name : "?";
  size_t nstr = pp_profile_str_count(p), nframe = pp_profile_frame_count(p);
  size_t nstack = pp_profile_stack_count(p);
  s->npids = pp_profile_pid_count(p);
  s->str_map = malloc((nstr ? nstr : 1) * sizeof(uint32_t));
  s->frame_map = malloc((nframe ? nframe : 1) * sizeof(uint32_t));
  s->start = calloc(s->npids + 2, sizeof(uint32_t));
  s->order = malloc((nstack ? nstack : 1) * sizeof(uint32_t));
  s->sum = calloc(s->npids + 1, sizeof(uint64_t));
  if (!s->str_map || !s->frame_map || !s->start || !s->order || !s->sum ||
      pid_map_init(&s->slot_of, s->npids) < 0)
    goto oom;
  memset(s->str_map, 0xff, (nstr ? nstr : 1) * sizeof(uint32_t));
  memset(s->frame_map, 0xff, (nframe ? nframe : 1) * sizeof(uint32_t));
  for (size_t i = 0; i < s->npids; i++)
    pid_map_put(&s->slot_of, pp_profile_pid_at(p, i)->pid, i);

  /* Counting sort of stacks by pid slot. A stack whose pid has no record
   * (the profile API creates one with every stack, so only defensively) is
   * ignored. */
  uint32_t *slot_tmp = malloc((nstack ? nstack : 1) * sizeof(uint32_t));
  if (!slot_tmp) goto oom;
  for (size_t i = 0; i < nstack; i++) {
    const struct pp_stack_rec *st = pp_profile_stack(p, i);
    uint32_t slot;
    if (!pid_map_get(&s->slot_of, st->pid, &slot)) slot = (uint32_t)s->npids; /* dropped */
    slot_tmp[i] = slot;
    s->start[slot + 1]++;
    s->sum[slot] += st->count;
  }
  for (size_t k = 0; k <= s->npids; k++)
    s->start[k + 1] += s->start[k];
  uint32_t *fill = malloc((s->npids + 1) * sizeof(uint32_t));
  if (!fill) {
    free(slot_tmp);
    goto oom;
  }
  memcpy(fill, s->start, (s->npids + 1) * sizeof(uint32_t));
  for (size_t i = 0; i < nstack; i++)
    s->order[fill[slot_tmp[i]]++] = (uint32_t)i;
  free(fill);
  free(slot_tmp);
  return 0;
oom:
  src_free(s);
  return -ENOMEM;
}

/* ---- merge state ------------------------------------------------------- */

struct claim {
  uint32_t src;  /* index into runtimes */
  uint32_t slot; /* pid slot in that runtime */
  bool done;
  /* the runtime sampled nothing of the pid (perf does, its runtime plugin
   * only names the process: .NET's perf map mode): perf's stacks stay,
   * with the runtime's appid and metadata */
  bool facts_only;
};

struct merge {
  struct pp_profile *out;
  struct src base; /* base.p == NULL in perf-less mode */
  struct src *rt;
  size_t nrt;
  struct claim *claims;
  size_t nclaims;
  struct pid_map claim_of; /* pid -> index into claims */
  uint64_t *counts;        /* scratch for scaling, one per stack of a pid */
  uint64_t *rem;
  size_t scratch_cap;
  bool oom; /* an intern failed: the merge is abandoned */
  uint32_t frames[PP_MAX_FRAMES + 1];
};

static uint32_t map_str(struct merge *m, struct src *s, uint32_t id) {
  if (id == PP_NO_STR || id >= pp_profile_str_count(s->p)) return PP_NO_STR;
  if (s->str_map[id] == UNMAPPED) {
    s->str_map[id] =
        pp_profile_intern(m->out, pp_profile_str(s->p, id), pp_profile_str_len(s->p, id));
    if (s->str_map[id] == PP_NO_STR) m->oom = true;
  }
  return s->str_map[id];
}

/* Out frame id for a source frame, UNMAPPED when out of memory. */
static uint32_t map_frame(struct merge *m, struct src *s, uint32_t id) {
  if (s->frame_map[id] != UNMAPPED) return s->frame_map[id];
  const struct pp_frame_rec *f = pp_profile_frame(s->p, id);
  uint32_t name = map_str(m, s, f->name);
  uint32_t file = map_str(m, s, f->file);
  if (m->oom) return UNMAPPED;
  s->frame_map[id] = pp_profile_intern_frame(m->out, name, file, f->line, f->kind);
  return s->frame_map[id]; /* UNMAPPED (UINT32_MAX) when out of memory */
}

static inline bool has_str(uint32_t id) {
  return id != PP_NO_STR;
}

/* Create the out record of a pid: the runtime's fields win, perf's fill in
 * what the runtime left unset (notably the container name). */
static int put_pid(struct merge *m, uint32_t pid, struct src *rs, const struct pp_pid_rec *r,
                   struct src *bs, const struct pp_pid_rec *b) {
  struct pp_pid_rec v = {.pid = pid,
                         .comm = PP_NO_STR,
                         .appid = PP_NO_STR,
                         .app_meta = PP_NO_STR,
                         .container = PP_NO_STR,
                         .reason = PP_NO_STR};
  const struct {
    struct src *s;
    const struct pp_pid_rec *rec;
  } order[2] = {{rs, r}, {bs, b}};
  /* Walk perf first, then let the runtime overwrite what it has. */
  for (int k = 1; k >= 0; k--) {
    const struct pp_pid_rec *x = order[k].rec;
    struct src *s = order[k].s;
    if (!x) continue;
    if (has_str(x->comm)) v.comm = map_str(m, s, x->comm);
    if (has_str(x->appid)) v.appid = map_str(m, s, x->appid);
    if (has_str(x->app_meta)) v.app_meta = map_str(m, s, x->app_meta);
    if (has_str(x->container) && pp_profile_str_len(s->p, x->container) > 0)
      v.container = map_str(m, s, x->container);
    if (x->app_meta_index) v.app_meta_index = x->app_meta_index;
    if (x->start_time) v.start_time = x->start_time;
  }
  if (r) { /* status belongs to the plugin that covered the pid */
    v.status = r->status;
    v.reason = map_str(m, rs, r->reason);
  }
  if (m->oom) return -ENOMEM;
  struct pp_pid_rec *o = pp_profile_pid_upsert(m->out, pid);
  if (!o) return -ENOMEM;
  uint64_t total = o->total; /* maintained by the profile, not ours to set */
  *o = v;
  o->total = total;
  return 0;
}

/* Stack comm in out: an explicit comm stays explicit unless it equals the
 * out pid's comm; "the pid's comm" (PP_NO_STR) of a source whose pid comm
 * differs from the out pid's (perf's thread name vs the runtime's process
 * name) is made explicit so the line keeps the comm it had. */
static uint32_t map_stack_comm(struct merge *m, struct src *s, const struct pp_stack_rec *st,
                               const struct pp_pid_rec *src_pid, uint32_t out_pid_comm) {
  uint32_t c = st->comm;
  if (!has_str(c) && src_pid) c = src_pid->comm;
  if (!has_str(c)) return PP_NO_STR;
  uint32_t o = map_str(m, s, c);
  return o == out_pid_comm ? PP_NO_STR : o;
}

/* Copy stack `i` of source s to out with `count`, optionally behind an
 * error frame. */
static int emit_stack(struct merge *m, struct src *s, size_t i, uint64_t count, uint32_t pid,
                      const struct pp_pid_rec *src_pid, uint32_t out_pid_comm, uint32_t err_frame) {
  const struct pp_stack_rec *st = pp_profile_stack(s->p, i);
  const uint32_t *fr = pp_profile_stack_frames(s->p, st);
  uint32_t n = st->nframes, k = 0, skip = 0;
  if (err_frame != UNMAPPED) {
    m->frames[k++] = err_frame;
    /* Keep the error frame next to the comm: truncate after it, as the
     * profile would truncate at the root side. */
    if (n + 1 > PP_MAX_FRAMES) skip = n + 1 - PP_MAX_FRAMES;
  } else if (n > PP_MAX_FRAMES) {
    skip = n - PP_MAX_FRAMES;
  }
  for (uint32_t j = skip; j < n; j++) {
    uint32_t f = map_frame(m, s, fr[j]);
    if (f == UNMAPPED) return -ENOMEM;
    m->frames[k++] = f;
  }
  uint32_t comm = map_stack_comm(m, s, st, src_pid, out_pid_comm);
  if (m->oom) return -ENOMEM;
  return pp_profile_add_stack(m->out, pid, comm, m->frames, k, count);
}

static uint32_t out_comm_of(struct merge *m, uint32_t pid) {
  const struct pp_pid_rec *o = pp_profile_pid(m->out, pid);
  return o ? o->comm : PP_NO_STR;
}

/* The "[Profiling error: <reason>]" frame of a runtime pid record. */
static uint32_t error_frame(struct merge *m, struct src *rs, const struct pp_pid_rec *r) {
  char buf[4096];
  const char *what = r->status == PP_PID_SKIPPED ? "skipped" : "error";
  const char *reason = has_str(r->reason) ? pp_profile_str(rs->p, r->reason) : "";
  if (!*reason) reason = "unknown";
  int len = snprintf(buf, sizeof(buf), "[Profiling %s: %s]", what, reason);
  if (len < 0) return UNMAPPED;
  if ((size_t)len >= sizeof(buf)) { /* absurdly long reason: keep the shape */
    len = sizeof(buf) - 1;
    buf[len - 1] = ']';
  }
  uint32_t name = pp_profile_intern(m->out, buf, (size_t)len);
  if (name == PP_NO_STR) return UNMAPPED;
  return pp_profile_intern_frame(m->out, name, PP_NO_STR, 0, PP_FRAME_ERROR);
}

static int grow_scratch(struct merge *m, size_t n) {
  if (n <= m->scratch_cap) return 0;
  size_t cap = m->scratch_cap ? m->scratch_cap : 256;
  while (cap < n)
    cap *= 2;
  uint64_t *c = realloc(m->counts, cap * sizeof(*c));
  if (!c) return -ENOMEM;
  m->counts = c;
  uint64_t *r = realloc(m->rem, cap * sizeof(*r));
  if (!r) return -ENOMEM;
  m->rem = r;
  m->scratch_cap = cap;
  return 0;
}

static void scale(uint64_t *c, size_t n, uint64_t total, uint64_t target, uint64_t *rem);

/* All stacks of source pid `slot`, scaled to `target` when target != 0. */
static int emit_pid_stacks(struct merge *m, struct src *s, uint32_t slot, uint32_t pid,
                           uint64_t target, uint32_t err_frame) {
  const struct pp_pid_rec *sp = pp_profile_pid_at(s->p, slot);
  uint32_t out_comm = out_comm_of(m, pid);
  uint32_t a = s->start[slot], b = s->start[slot + 1];
  size_t n = b - a;
  uint64_t *counts = NULL;
  if (target && s->sum[slot] && target != s->sum[slot]) {
    if (grow_scratch(m, n) < 0) return -ENOMEM;
    counts = m->counts;
    for (size_t k = 0; k < n; k++)
      counts[k] = pp_profile_stack(s->p, s->order[a + k])->count;
    scale(counts, n, s->sum[slot], target, m->rem);
  }
  for (size_t k = 0; k < n; k++) {
    uint32_t i = s->order[a + k];
    uint64_t cnt = counts ? counts[k] : pp_profile_stack(s->p, i)->count;
    if (!cnt) continue; /* rounded away, as gProfiler drops stacks scaled to 0 */
    int rc = emit_stack(m, s, i, cnt, pid, sp, out_comm, err_frame);
    if (rc < 0) return rc;
  }
  return 0;
}

/* A runtime-covered pid. base_slot < 0: perf has no record of it. */
static int emit_claimed(struct merge *m, struct claim *c, long base_slot) {
  struct src *rs = &m->rt[c->src];
  const struct pp_pid_rec *r = pp_profile_pid_at(rs->p, c->slot);
  const struct pp_pid_rec *b = base_slot >= 0 ? pp_profile_pid_at(m->base.p, base_slot) : NULL;
  uint64_t perf_total = base_slot >= 0 ? m->base.sum[base_slot] : 0;
  uint32_t pid = r->pid;
  bool error = r->status != PP_PID_OK;
  c->done = true;

  if (c->facts_only) {
    if (perf_total == 0) return 0;
    int rc = put_pid(m, pid, rs, r, &m->base, b);
    return rc < 0 ? rc : emit_pid_stacks(m, &m->base, (uint32_t)base_slot, pid, 0, UNMAPPED);
  }
  if (m->base.p && error && perf_total == 0) return 0; /* nothing to annotate: dropped */
  int rc = put_pid(m, pid, rs, r, &m->base, b);
  if (rc < 0) return rc;
  if (!error) /* scaled to perf's count; unscaled if perf saw nothing or there is no perf */
    return emit_pid_stacks(m, rs, c->slot, pid, perf_total, UNMAPPED);

  uint32_t ef = error_frame(m, rs, r);
  if (ef == UNMAPPED) return -ENOMEM;
  if (!m->base.p) { /* perf-less: "comm;[Profiling error: ...] 1" */
    m->frames[0] = ef;
    return pp_profile_add_stack(m->out, pid, PP_NO_STR, m->frames, 1, 1);
  }
  return emit_pid_stacks(m, &m->base, (uint32_t)base_slot, pid, 0, ef);
}

static int claim_pids(struct merge *m) {
  size_t total = 0;
  for (size_t i = 0; i < m->nrt; i++)
    total += m->rt[i].npids;
  m->claims = calloc(total ? total : 1, sizeof(*m->claims));
  if (!m->claims || pid_map_init(&m->claim_of, total) < 0) return -ENOMEM;
  size_t dups = 0;
  for (size_t i = 0; i < m->nrt; i++) {
    struct src *s = &m->rt[i];
    for (size_t k = 0; k < s->npids; k++) {
      const struct pp_pid_rec *r = pp_profile_pid_at(s->p, k);
      /* Empty runtime profile: perf's stacks for the pid stay as they are
       * (with the runtime's facts about it, unless another plugin claims it). */
      bool facts_only = r->status == PP_PID_OK && s->sum[k] == 0;
      uint32_t prev;
      if (pid_map_get(&m->claim_of, r->pid, &prev)) {
        if (facts_only) continue;
        if (m->claims[prev].facts_only) {
          m->claims[prev] = (struct claim){.src = (uint32_t)i, .slot = (uint32_t)k};
          continue;
        }
        /* One line per merge, not per pid: overlapping plugins are a
         * configuration matter that would otherwise flood every session. */
        if (!dups++)
          pp_log(PP_LOG_WARNING, "merge",
                 "pid %u is covered by both %s and %s; keeping %s (first plugin wins)", r->pid,
                 m->rt[m->claims[prev].src].name, s->name, m->rt[m->claims[prev].src].name);
        continue;
      }
      pid_map_put(&m->claim_of, r->pid, (uint32_t)m->nclaims);
      m->claims[m->nclaims++] =
          (struct claim){.src = (uint32_t)i, .slot = (uint32_t)k, .facts_only = facts_only};
    }
  }
  if (dups > 1)
    pp_log(PP_LOG_WARNING, "merge", "%zu pids were covered by more than one plugin this session",
           dups);
  return 0;
}

static int run(struct merge *m) {
  int rc = claim_pids(m);
  if (rc < 0) return rc;
  if (m->base.p) {
    /* perf's pids in perf's order, each with perf's or its runtime's stacks */
    for (size_t k = 0; k < m->base.npids; k++) {
      const struct pp_pid_rec *b = pp_profile_pid_at(m->base.p, k);
      uint32_t ci;
      if (pid_map_get(&m->claim_of, b->pid, &ci)) {
        rc = emit_claimed(m, &m->claims[ci], (long)k);
      } else if (m->base.sum[k] > 0) {
        rc = put_pid(m, b->pid, NULL, NULL, &m->base, b);
        if (rc == 0) rc = emit_pid_stacks(m, &m->base, (uint32_t)k, b->pid, 0, UNMAPPED);
      }
      if (rc < 0) return rc;
    }
  }
  /* then pids only runtimes saw, in runtime order (all of them if perf-less) */
  for (size_t i = 0; i < m->nclaims; i++) {
    if (m->claims[i].done) continue;
    rc = emit_claimed(m, &m->claims[i], -1);
    if (rc < 0) return rc;
  }
  return 0;
}

int pp_merge(struct pp_profile *out, const struct pp_profile *base,
             const struct pp_merge_source *runtimes, size_t n) {
  struct merge *m = calloc(1, sizeof(*m));
  if (!m) return -ENOMEM;
  int rc = -ENOMEM;
  pp_profile_clear(out);
  m->out = out;
  if (base && src_init(&m->base, base, "perf") < 0) goto done;
  m->rt = calloc(n ? n : 1, sizeof(*m->rt));
  if (!m->rt) goto done;
  for (; m->nrt < n; m->nrt++) {
    const struct pp_profile *p = runtimes[m->nrt].profile;
    if (p && src_init(&m->rt[m->nrt], p, runtimes[m->nrt].plugin) < 0) goto done;
  }
  rc = run(m);
done:
  if (rc < 0) pp_profile_clear(out); /* never hand out half a merge */
  for (size_t i = 0; i < m->nrt; i++)
    src_free(&m->rt[i]);
  free(m->rt);
  if (m->base.p) src_free(&m->base);
  free(m->claims);
  pid_map_free(&m->claim_of);
  free(m->counts);
  free(m->rem);
  free(m);
  return rc;
}

/* ---- largest-remainder scaling ----------------------------------------- */

/* floor(c * target / total) and the remainder, exactly. */
static inline uint64_t muldiv(uint64_t c, uint64_t target, uint64_t total, uint64_t *r) {
  if (c <= UINT32_MAX && target <= UINT32_MAX) { /* the common case: no 128-bit division */
    uint64_t x = c * target;
    *r = x % total;
    return x / total;
  }
  unsigned __int128 x = (unsigned __int128)c * target;
  *r = (uint64_t)(x % total);
  return (uint64_t)(x / total);
}

/*
 * Each count becomes floor(c*target/total); the deficit d = target - sum of
 * floors (< n) goes, one each, to the d stacks with the largest remainders,
 * ties to the earlier stack. The d-th largest remainder T is found by a
 * binary search on its value (count of remainders >= T), so no sort and no
 * allocation: with `rem` (n scratch slots) the remainders are computed once,
 * without it they are recomputed from the untouched counts on every pass.
 */
static void scale(uint64_t *c, size_t n, uint64_t total, uint64_t target, uint64_t *rem) {
  if (!n || !total || total == target) return;
  uint64_t floors = 0, maxr = 0, r;
  for (size_t i = 0; i < n; i++) {
    uint64_t q = muldiv(c[i], target, total, &r);
    floors += q;
    if (r > maxr) maxr = r;
    if (rem) {
      rem[i] = r;
      c[i] = q;
    }
  }
  /* floors <= target when counts really sum to total; be safe if not */
  uint64_t deficit = floors < target ? target - floors : 0;
#define REM(i) (rem ? rem[i] : (muldiv(c[i], target, total, &r), r))
  uint64_t lo = 1, hi = maxr, above = 0; /* deficit > 0 implies T >= 1 */
  if (deficit) {
    while (lo < hi) {
      uint64_t mid = lo + (hi - lo + 1) / 2, cnt = 0;
      for (size_t i = 0; i < n; i++)
        cnt += REM(i) >= mid;
      if (cnt >= deficit)
        lo = mid;
      else
        hi = mid - 1;
    }
    for (size_t i = 0; i < n; i++)
      above += REM(i) > lo;
  }
  uint64_t ties = deficit - above; /* remainders == T that still get +1 */
  for (size_t i = 0; i < n; i++) {
    uint64_t ri = deficit ? REM(i) : 0;
    uint64_t q = rem ? c[i] : muldiv(c[i], target, total, &r);
    if (deficit && ri > lo) {
      q++;
    } else if (deficit && ri == lo && ties) {
      q++;
      ties--;
    }
    c[i] = q;
  }
#undef REM
}

void pp_scale_counts(uint64_t *counts, size_t n, uint64_t total, uint64_t target) {
  if (!counts || !n || !total || total == target) return;
  uint64_t *rem = malloc(n * sizeof(*rem)); /* NULL: the slower in-place path */
  scale(counts, n, total, target, rem);
  free(rem);
}
