/*
 * Stacks counted between two snapshots.
 *
 * A stack is stored as (name, file, line) triples whose strings are
 * interned once per session: the code cache may evict an entry while a
 * stack that used it is still waiting for the snapshot, so stacks never
 * point into the cache. Each code-cache entry remembers its string ids for
 * the current session, so a sample costs a hash of its frames and no
 * string work. Every table is bounded (stacks, frames, string bytes); a
 * sample that does not fit is counted as dropped.
 *
 * Memory: the hash tables start small and double (rehashing) as a session
 * needs them, up to their caps, and shrink back at a snapshot when a
 * session used only a fraction of them: a hash table is touched all over,
 * so a table sized for the cap would be resident in full (it was 12 MiB of
 * the worker's 18 MiB peak). The frame and string arenas are filled in
 * order, so only what is used is touched; what a big session touched is
 * given back at the snapshot.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "python.h"

struct triple {
  uint32_t name, file, line;
};

struct stack {
  uint64_t hash;
  uint64_t count;
  uint32_t pid;
  uint32_t off; /* into frames */
  uint16_t n;
  uint8_t truncated;
  uint8_t used;
};

#define STACKS_MIN 1024 /* initial and smallest stack table (32 KiB) */
#define SIDX_MIN 1024   /* initial and smallest string index (4 KiB) */

struct py_agg {
  uint32_t session;
  struct stack *stacks; /* open addressing, power of two */
  size_t scap, sused, smax, scap_max;
  struct triple *frames;
  size_t fused, fmax;
  char *strs; /* arena of NUL-terminated strings; a sid is offset + 1 */
  size_t bused, bmax;
  uint32_t *sidx; /* open-addressing index of the arena */
  size_t icap, iused, icap_max;
  struct triple *scratch;
  size_t scratch_cap;
  uint64_t dropped;
};

static size_t pow2(size_t n) {
  size_t c = 16;
  while (c < n)
    c *= 2;
  return c;
}

struct py_agg *python_agg_new(size_t max_stacks, size_t max_frames, size_t max_string_bytes) {
  struct py_agg *a = calloc(1, sizeof(*a));
  if (!a) return NULL;
  a->session = 1;
  a->smax = max_stacks;
  a->scap_max = pow2(max_stacks + max_stacks / 3);
  a->scap = a->scap_max < STACKS_MIN ? a->scap_max : STACKS_MIN;
  a->fmax = max_frames;
  a->bmax = max_string_bytes;
  a->icap_max = pow2(max_string_bytes / 16 + 64);
  a->icap = a->icap_max < SIDX_MIN ? a->icap_max : SIDX_MIN;
  a->stacks = calloc(a->scap, sizeof(*a->stacks));
  a->frames = malloc(a->fmax * sizeof(*a->frames));
  a->strs = malloc(a->bmax);
  a->sidx = calloc(a->icap, sizeof(*a->sidx));
  a->scratch_cap = PY_MAX_DEPTH_LIMIT + 1;
  a->scratch = malloc(a->scratch_cap * sizeof(*a->scratch));
  if (!a->stacks || !a->frames || !a->strs || !a->sidx || !a->scratch) {
    python_agg_free(a);
    return NULL;
  }
  return a;
}

void python_agg_free(struct py_agg *a) {
  if (!a) return;
  free(a->stacks);
  free(a->frames);
  free(a->strs);
  free(a->sidx);
  free(a->scratch);
  free(a);
}

uint64_t python_agg_dropped(struct py_agg *a) {
  uint64_t d = a->dropped;
  a->dropped = 0;
  return d;
}

static uint64_t fnv(const void *p, size_t n, uint64_t h) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* Doubles the string index (rehashing every string); false if at its cap
 * or out of memory, and the index stays as it was. */
static bool grow_sidx(struct py_agg *a) {
  if (a->icap >= a->icap_max) return false;
  size_t ncap = a->icap * 2;
  uint32_t *n = calloc(ncap, sizeof(*n));
  if (!n) return false;
  for (size_t i = 0; i < a->icap; i++) {
    uint32_t sid = a->sidx[i];
    if (!sid) continue;
    const char *str = a->strs + sid - 1;
    size_t pos = fnv(str, strlen(str), 1469598103934665603ull) & (ncap - 1);
    while (n[pos])
      pos = (pos + 1) & (ncap - 1);
    n[pos] = sid;
  }
  free(a->sidx);
  a->sidx = n;
  a->icap = ncap;
  return true;
}

/* Same for the stack table (entries keep their hash). */
static bool grow_stacks(struct py_agg *a) {
  if (a->scap >= a->scap_max) return false;
  size_t ncap = a->scap * 2;
  struct stack *n = calloc(ncap, sizeof(*n));
  if (!n) return false;
  for (size_t i = 0; i < a->scap; i++) {
    if (!a->stacks[i].used) continue;
    size_t pos = a->stacks[i].hash & (ncap - 1);
    while (n[pos].used)
      pos = (pos + 1) & (ncap - 1);
    n[pos] = a->stacks[i];
  }
  free(a->stacks);
  a->stacks = n;
  a->scap = ncap;
  return true;
}

/* sid of s (0 when the arena is full). */
static uint32_t intern(struct py_agg *a, const char *s) {
  size_t len = strlen(s);
  uint64_t h = fnv(s, len, 1469598103934665603ull);
  if (a->iused + 1 > a->icap / 4 * 3) grow_sidx(a);
  size_t mask = a->icap - 1;
  for (size_t pos = h & mask, probes = 0; probes < a->icap; pos = (pos + 1) & mask, probes++) {
    uint32_t sid = a->sidx[pos];
    if (!sid) {
      if (a->bused + len + 1 > a->bmax || a->iused + 1 > a->icap / 4 * 3) return 0;
      memcpy(a->strs + a->bused, s, len + 1);
      a->sidx[pos] = (uint32_t)a->bused + 1;
      a->bused += len + 1;
      a->iused++;
      return a->sidx[pos];
    }
    if (strcmp(a->strs + sid - 1, s) == 0) return sid;
  }
  return 0;
}

bool python_agg_add(struct py_agg *a, uint32_t pid, const struct py_frame_ref *frames, uint32_t n,
                    bool truncated) {
  if (n == 0 || n > a->scratch_cap || n > UINT16_MAX) {
    a->dropped++;
    return false;
  }
  for (uint32_t i = 0; i < n; i++) {
    struct py_code *e = frames[i].code;
    if (e->sid_session != a->session) {
      e->name_sid = intern(a, e->name);
      e->file_sid = intern(a, e->file);
      if (!e->name_sid || !e->file_sid) {
        a->dropped++;
        return false;
      }
      e->sid_session = a->session;
    }
    a->scratch[i] = (struct triple){e->name_sid, e->file_sid, (uint32_t)frames[i].line};
  }
  uint64_t h = fnv(a->scratch, n * sizeof(struct triple), 1469598103934665603ull ^ pid);
  h = (h ^ truncated) * 1099511628211ull;
  if (a->sused + 1 > a->scap / 4 * 3) grow_stacks(a);
  size_t mask = a->scap - 1;
  for (size_t pos = h & mask, probes = 0; probes < a->scap; pos = (pos + 1) & mask, probes++) {
    struct stack *s = &a->stacks[pos];
    if (!s->used) {
      if (a->sused >= a->smax || a->fused + n > a->fmax) break;
      *s = (struct stack){.hash = h,
                          .count = 1,
                          .pid = pid,
                          .off = (uint32_t)a->fused,
                          .n = (uint16_t)n,
                          .truncated = truncated,
                          .used = 1};
      memcpy(a->frames + a->fused, a->scratch, n * sizeof(struct triple));
      a->fused += n;
      a->sused++;
      return true;
    }
    if (s->hash == h && s->pid == pid && s->n == n && s->truncated == truncated &&
        memcmp(a->frames + s->off, a->scratch, n * sizeof(struct triple)) == 0) {
      s->count++;
      return true;
    }
  }
  a->dropped++;
  return false;
}

/* Gives back the pages of an arena past what a typical session needs. */
static void release_tail(void *base, size_t used, size_t keep) {
  long pg = sysconf(_SC_PAGESIZE);
  if (pg <= 0 || used <= keep) return;
  uintptr_t from = ((uintptr_t)base + keep + (size_t)pg - 1) & ~((uintptr_t)pg - 1);
  uintptr_t to = ((uintptr_t)base + used) & ~((uintptr_t)pg - 1);
  if (to > from) madvise((void *)from, to - from, MADV_DONTNEED);
}

/* Empties the tables for the next session; one that this session filled to
 * less than an eighth is replaced by a smaller one (not below the minimum),
 * so a single busy session does not keep its memory forever. */
static void shrink_or_clear(struct py_agg *a) {
  size_t want = pow2(a->sused * 2 > STACKS_MIN ? a->sused * 2 : STACKS_MIN);
  struct stack *ns = want < a->scap / 4 ? calloc(want, sizeof(*ns)) : NULL;
  if (ns) {
    free(a->stacks);
    a->stacks = ns;
    a->scap = want;
  } else {
    memset(a->stacks, 0, a->scap * sizeof(*a->stacks));
  }
  want = pow2(a->iused * 2 > SIDX_MIN ? a->iused * 2 : SIDX_MIN);
  uint32_t *ni = want < a->icap / 4 ? calloc(want, sizeof(*ni)) : NULL;
  if (ni) {
    free(a->sidx);
    a->sidx = ni;
    a->icap = want;
  } else {
    memset(a->sidx, 0, a->icap * sizeof(*a->sidx));
  }
  /* malloc serves these sizes with their own mappings: the pages past the
   * first 256 KiB go back to the kernel and come back zeroed on demand */
  release_tail(a->frames, a->fused * sizeof(*a->frames), 256u << 10);
  release_tail(a->strs, a->bused, 256u << 10);
}

void python_agg_emit(struct py_agg *a, const struct pp_host *h, struct pp_sink *sink) {
  struct pp_frame *out = malloc((PY_MAX_DEPTH_LIMIT + 2) * sizeof(*out));
  for (size_t i = 0; out && i < a->scap; i++) {
    struct stack *s = &a->stacks[i];
    if (!s->used) continue;
    uint32_t n = 0;
    for (uint32_t k = 0; k < s->n; k++) {
      const struct triple *t = &a->frames[s->off + k];
      out[n++] = (struct pp_frame){.name = a->strs + t->name - 1,
                                   .file = a->strs + t->file - 1,
                                   .line = t->line,
                                   .kind = PP_FRAME_PYTHON};
    }
    /* the root side was cut off: say so, as PyPerf does */
    if (s->truncated)
      out[n++] = (struct pp_frame){.name = "[Truncated Stack]", .kind = PP_FRAME_PYTHON_ERROR};
    struct pp_sample smp = {
        .pid = s->pid, .tid = 0, .comm = NULL, .frames = out, .nframes = n, .count = s->count};
    h->emit(sink, &smp);
  }
  free(out);
  shrink_or_clear(a);
  a->sused = a->fused = a->bused = a->iused = 0;
  a->session++;
  if (a->session == 0) a->session = 1;
}
