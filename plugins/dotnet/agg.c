/* Stack aggregation table (see agg.h). */
#include "agg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct slot {
  uint64_t hash;
  uint64_t count; /* 0: empty */
  uint32_t tid, off, n, pad;
};

struct dotnet_agg {
  struct slot *t;
  size_t cap, used, max_used;
  size_t max_cap; /* cap once max_used entries fit at load <= 1/2 */
  uint64_t *ips;
  size_t ips_used, ips_cap;
  uint64_t dropped, total;
};

#define AGG_INITIAL_CAP 512

struct dotnet_agg *dotnet_agg_new(uint32_t max_stacks, uint32_t max_ips) {
  struct dotnet_agg *a = calloc(1, sizeof(*a));
  if (!a) return NULL;
  a->max_cap = 64;
  while (a->max_cap < (size_t)max_stacks * 2)
    a->max_cap *= 2; /* load <= 1/2 */
  /* The table starts small and doubles as stacks come: a .NET process has
   * a few hundred distinct stacks per session, and a table sized for the
   * limit (1 MiB at 16384) and wiped at every session is all resident. */
  a->cap = a->max_cap < AGG_INITIAL_CAP ? a->max_cap : AGG_INITIAL_CAP;
  a->max_used = max_stacks;
  a->ips_cap = max_ips < 1024 ? 1024 : max_ips;
  a->t = calloc(a->cap, sizeof(*a->t));
  a->ips = malloc(a->ips_cap * sizeof(*a->ips));
  if (!a->t || !a->ips) {
    dotnet_agg_free(a);
    return NULL;
  }
  return a;
}

void dotnet_agg_free(struct dotnet_agg *a) {
  if (!a) return;
  free(a->t);
  free(a->ips);
  free(a);
}

void dotnet_agg_clear(struct dotnet_agg *a) {
  if (a->used) memset(a->t, 0, a->cap * sizeof(*a->t));
  a->used = a->ips_used = 0;
  a->dropped = a->total = 0;
}

static uint64_t hash_stack(uint32_t tid, const uint64_t *ips, uint32_t n) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ tid ^ ((uint64_t)n << 32);
  for (uint32_t i = 0; i < n; i++) {
    h ^= ips[i];
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
  }
  return h | 1;
}

/* Doubles the table (at most log2(max_cap / AGG_INITIAL_CAP) times in the
 * agg's life: the size is kept across sessions). -ENOMEM leaves it as is. */
static int grow(struct dotnet_agg *a) {
  size_t ncap = a->cap * 2;
  struct slot *t = calloc(ncap, sizeof(*t));
  if (!t) return -ENOMEM;
  for (size_t i = 0; i < a->cap; i++) {
    const struct slot *s = &a->t[i];
    if (!s->count) continue;
    size_t pos = s->hash & (ncap - 1);
    while (t[pos].count)
      pos = (pos + 1) & (ncap - 1);
    t[pos] = *s;
  }
  free(a->t);
  a->t = t;
  a->cap = ncap;
  return 0;
}

int dotnet_agg_add(struct dotnet_agg *a, uint32_t tid, const uint64_t *ips, uint32_t n,
                   uint64_t count) {
  uint64_t h = hash_stack(tid, ips, n);
  /* keep load <= 1/2 so probes stay short and an empty slot always exists */
  if (a->used + 1 > a->cap / 2 && (a->cap >= a->max_cap || grow(a) < 0) && a->used + 1 >= a->cap) {
    a->dropped += count;
    return -ENOSPC;
  }
  size_t mask = a->cap - 1;
  for (size_t pos = h & mask;; pos = (pos + 1) & mask) {
    struct slot *s = &a->t[pos];
    if (!s->count) {
      if (a->used >= a->max_used || a->ips_cap - a->ips_used < n) {
        a->dropped += count;
        return -ENOSPC;
      }
      memcpy(a->ips + a->ips_used, ips, (size_t)n * sizeof(*ips));
      *s = (struct slot){
          .hash = h, .count = count, .tid = tid, .off = (uint32_t)a->ips_used, .n = n};
      a->ips_used += n;
      a->used++;
      a->total += count;
      return 0;
    }
    if (s->hash == h && s->tid == tid && s->n == n &&
        memcmp(a->ips + s->off, ips, (size_t)n * sizeof(*ips)) == 0) {
      s->count += count;
      a->total += count;
      return 0;
    }
  }
}

int dotnet_agg_next(const struct dotnet_agg *a, size_t *pos, struct dotnet_agg_entry *out) {
  for (; *pos < a->cap; (*pos)++) {
    const struct slot *s = &a->t[*pos];
    if (!s->count) continue;
    *out = (struct dotnet_agg_entry){s->tid, s->n, a->ips + s->off, s->count};
    (*pos)++;
    return 1;
  }
  return 0;
}

uint64_t dotnet_agg_dropped(const struct dotnet_agg *a) {
  return a->dropped;
}
uint64_t dotnet_agg_total(const struct dotnet_agg *a) {
  return a->total;
}
