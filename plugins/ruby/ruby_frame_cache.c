/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the ruby plugin remembers between samples so a frame seen before
 * costs no read of the target: interned strings, distinct frames, and the
 * (pid, iseq, pc) / method-entry caches that map to them (see ruby.h).
 * Open addressing with linear probing, kept at most 3/4 full so probes stay
 * short; sized once at init, nothing here allocates afterwards.
 */
#include "polyprof/kit/hash.h"
#include "ruby.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint64_t fnv(const void *p, size_t n, uint64_t h) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 1099511628211ull;
  return h;
}
#define FNV0 1469598103934665603ull

static size_t pow2_at_least(size_t n) {
  size_t c = 16;
  while (c < n)
    c *= 2;
  return c;
}

/* ---- strings ---- */

int ruby_strings_init(struct ruby_strings *s, size_t arena_bytes) {
  memset(s, 0, sizeof(*s));
  s->arena_cap = arena_bytes;
  s->nslots = pow2_at_least(arena_bytes / 16);
  s->arena = malloc(s->arena_cap);
  s->slots = calloc(s->nslots, sizeof(*s->slots));
  if (!s->arena || !s->slots) {
    ruby_strings_free(s);
    return -ENOMEM;
  }
  return 0;
}

void ruby_strings_free(struct ruby_strings *s) {
  free(s->arena);
  free(s->slots);
  memset(s, 0, sizeof(*s));
}

void ruby_strings_clear(struct ruby_strings *s) {
  s->arena_used = 0;
  s->used = 0;
  memset(s->slots, 0, s->nslots * sizeof(*s->slots));
}

uint32_t ruby_strings_intern(struct ruby_strings *s, const char *str, size_t len) {
  size_t mask = s->nslots - 1;
  for (size_t pos = fnv(str, len, FNV0) & mask, probes = 0; probes < s->nslots;
       pos = (pos + 1) & mask, probes++) {
    uint32_t v = s->slots[pos];
    if (v == 0) {
      if (s->used + 1 > s->nslots / 4 * 3 || s->arena_used + len + 1 > s->arena_cap ||
          s->arena_used + len + 1 > UINT32_MAX - 1)
        return RUBY_NO_ID;
      uint32_t off = (uint32_t)s->arena_used;
      memcpy(s->arena + off, str, len);
      s->arena[off + len] = '\0';
      s->arena_used += len + 1;
      s->slots[pos] = off + 1;
      s->used++;
      return off;
    }
    const char *have = s->arena + (v - 1);
    if (strncmp(have, str, len) == 0 && have[len] == '\0') return v - 1;
  }
  return RUBY_NO_ID;
}

const char *ruby_strings_get(const struct ruby_strings *s, uint32_t id) {
  return id < s->arena_used ? s->arena + id : NULL;
}

/* ---- frames ---- */

int ruby_frames_init(struct ruby_frames *f, size_t cap) {
  memset(f, 0, sizeof(*f));
  f->cap = cap;
  f->nslots = pow2_at_least(cap + cap / 3 + 1);
  f->v = calloc(cap, sizeof(*f->v));
  f->slots = calloc(f->nslots, sizeof(*f->slots));
  if (!f->v || !f->slots) {
    ruby_frames_free(f);
    return -ENOMEM;
  }
  return 0;
}

void ruby_frames_free(struct ruby_frames *f) {
  free(f->v);
  free(f->slots);
  memset(f, 0, sizeof(*f));
}

void ruby_frames_clear(struct ruby_frames *f) {
  f->n = 0;
  memset(f->slots, 0, f->nslots * sizeof(*f->slots));
}

uint32_t ruby_frames_add(struct ruby_frames *f, const struct ruby_frame *fr) {
  size_t mask = f->nslots - 1;
  for (size_t pos = fnv(fr, sizeof(*fr), FNV0) & mask, probes = 0; probes < f->nslots;
       pos = (pos + 1) & mask, probes++) {
    uint32_t v = f->slots[pos];
    if (v == 0) {
      if (f->n >= f->cap) return RUBY_NO_ID;
      f->v[f->n] = *fr;
      f->slots[pos] = (uint32_t)f->n + 1;
      return (uint32_t)f->n++;
    }
    const struct ruby_frame *h = &f->v[v - 1];
    if (h->name == fr->name && h->file == fr->file && h->line == fr->line && h->kind == fr->kind)
      return v - 1;
  }
  return RUBY_NO_ID;
}

/* ---- cache ---- */

int ruby_cache_init(struct ruby_cache *c, size_t cap) {
  memset(c, 0, sizeof(*c));
  c->cap = pow2_at_least(cap);
  c->v = malloc(c->cap * sizeof(*c->v));
  if (!c->v) return -ENOMEM;
  ruby_cache_clear(c);
  c->clears = 0;
  return 0;
}

void ruby_cache_free(struct ruby_cache *c) {
  free(c->v);
  memset(c, 0, sizeof(*c));
}

void ruby_cache_clear(struct ruby_cache *c) {
  for (size_t i = 0; i < c->cap; i++)
    c->v[i].val = RUBY_NO_ID;
  c->used = 0;
  c->clears++;
}

static size_t cache_pos(const struct ruby_cache *c, uint32_t pid, uint64_t k1, uint64_t k2) {
  return pp_hash_u64(k1 ^ pp_hash_u64(k2 ^ ((uint64_t)pid << 32))) & (c->cap - 1);
}

uint32_t ruby_cache_get(const struct ruby_cache *c, uint32_t pid, uint64_t k1, uint64_t k2) {
  size_t mask = c->cap - 1;
  for (size_t pos = cache_pos(c, pid, k1, k2), probes = 0; probes < c->cap;
       pos = (pos + 1) & mask, probes++) {
    const struct ruby_cache_ent *e = &c->v[pos];
    if (e->val == RUBY_NO_ID) return RUBY_NO_ID;
    if (e->pid == pid && e->k1 == k1 && e->k2 == k2) return e->val;
  }
  return RUBY_NO_ID;
}

void ruby_cache_put(struct ruby_cache *c, uint32_t pid, uint64_t k1, uint64_t k2, uint32_t val) {
  if (c->used + 1 > c->cap / 4 * 3) ruby_cache_clear(c);
  size_t mask = c->cap - 1;
  for (size_t pos = cache_pos(c, pid, k1, k2), probes = 0; probes < c->cap;
       pos = (pos + 1) & mask, probes++) {
    struct ruby_cache_ent *e = &c->v[pos];
    if (e->val == RUBY_NO_ID) {
      *e = (struct ruby_cache_ent){.k1 = k1, .k2 = k2, .pid = pid, .val = val};
      c->used++;
      return;
    }
    if (e->pid == pid && e->k1 == k1 && e->k2 == k2) {
      e->val = val;
      return;
    }
  }
}

void ruby_cache_forget_pid(struct ruby_cache *c, uint32_t pid) {
  /* linear probing has no cheap delete: rebuild without the pid (rare) */
  size_t n = 0;
  for (size_t i = 0; i < c->cap; i++)
    if (c->v[i].val != RUBY_NO_ID && c->v[i].pid == pid) n++;
  if (n) ruby_cache_clear(c);
}
