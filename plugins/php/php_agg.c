/*
 * Aggregation of identical (pid, stack) samples between two snapshots.
 *
 * A stack is serialised into a preallocated arena (name NUL file NUL line)
 * and found again through an open-addressing table, so sampling allocates
 * nothing; both are sized from the config and a full table or arena drops
 * (and counts) the sample instead of growing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "php.h"

struct slot {
  uint64_t hash;
  uint64_t count;
  uint32_t pid;
  uint32_t nframes;
  uint32_t off, len; /* key bytes in the arena; len 0: empty slot */
  char comm[16];
};

struct php_agg {
  struct slot *slots;
  size_t cap, used;
  char *arena;
  size_t arena_cap, arena_used;
  uint32_t max_depth;
  char *scratch;            /* serialisation of the sample being added */
  struct pp_frame *pframes; /* snapshot: frames handed to the host */
};

struct php_agg *php_agg_new(size_t max_stacks, size_t arena_bytes, uint32_t max_depth) {
  struct php_agg *g = calloc(1, sizeof(*g));
  if (!g) return NULL;
  g->cap = 16;
  while (g->cap < max_stacks)
    g->cap *= 2;
  g->slots = calloc(g->cap, sizeof(*g->slots));
  g->arena = malloc(arena_bytes);
  g->arena_cap = arena_bytes;
  g->max_depth = max_depth;
  g->scratch = malloc((size_t)max_depth * (PHP_NAME_MAX + PHP_STR_MAX + 8));
  g->pframes = calloc(max_depth, sizeof(*g->pframes));
  if (!g->slots || !g->arena || !g->scratch || !g->pframes) {
    php_agg_free(g);
    return NULL;
  }
  return g;
}

void php_agg_free(struct php_agg *g) {
  if (!g) return;
  free(g->slots);
  free(g->arena);
  free(g->scratch);
  free(g->pframes);
  free(g);
}

int php_agg_add(struct php_agg *g, uint32_t pid, const char *comm, const struct php_frame *f,
                uint32_t n) {
  if (n == 0) return 0; /* nothing to attribute */
  if (n > g->max_depth) n = g->max_depth;
  size_t len = 0;
  for (uint32_t i = 0; i < n; i++) {
    size_t a = strlen(f[i].name) + 1, b = strlen(f[i].file) + 1;
    memcpy(g->scratch + len, f[i].name, a);
    len += a;
    memcpy(g->scratch + len, f[i].file, b);
    len += b;
    memcpy(g->scratch + len, &f[i].line, 4);
    len += 4;
  }
  uint64_t h = 1469598103934665603ull ^ pid;
  for (size_t i = 0; i < len; i++)
    h = (h ^ (unsigned char)g->scratch[i]) * 1099511628211ull;
  size_t mask = g->cap - 1;
  for (size_t pos = h & mask, probes = 0; probes < g->cap; pos = (pos + 1) & mask, probes++) {
    struct slot *s = &g->slots[pos];
    if (!s->len && !s->nframes) {
      /* keep the table at most 3/4 full so probes stay short */
      if (g->used + 1 > g->cap / 4 * 3 || g->arena_used + len > g->arena_cap) return -ENOSPC;
      memcpy(g->arena + g->arena_used, g->scratch, len);
      *s = (struct slot){.hash = h,
                         .count = 1,
                         .pid = pid,
                         .nframes = n,
                         .off = (uint32_t)g->arena_used,
                         .len = (uint32_t)len};
      snprintf(s->comm, sizeof(s->comm), "%s", comm ? comm : "");
      g->arena_used += len;
      g->used++;
      return 0;
    }
    if (s->hash == h && s->pid == pid && s->nframes == n && s->len == len &&
        memcmp(g->arena + s->off, g->scratch, len) == 0) {
      s->count++;
      return 0;
    }
  }
  return -ENOSPC;
}

void php_agg_flush(struct php_agg *g, const struct pp_host *h, struct pp_sink *sink) {
  for (size_t i = 0; i < g->cap; i++) {
    struct slot *s = &g->slots[i];
    if (!s->len && !s->nframes) continue;
    const char *p = g->arena + s->off;
    for (uint32_t k = 0; k < s->nframes; k++) {
      struct pp_frame *pf = &g->pframes[k];
      pf->name = p;
      p += strlen(p) + 1;
      pf->file = p;
      p += strlen(p) + 1;
      memcpy(&pf->line, p, 4);
      p += 4;
      pf->kind = PP_FRAME_PHP;
    }
    struct pp_sample smp = {.pid = s->pid,
                            .comm = s->comm[0] ? s->comm : NULL,
                            .tid = s->pid,
                            .frames = g->pframes,
                            .nframes = s->nframes,
                            .count = s->count};
    h->emit(sink, &smp);
  }
  memset(g->slots, 0, g->cap * sizeof(*g->slots));
  g->used = 0;
  g->arena_used = 0;
}
