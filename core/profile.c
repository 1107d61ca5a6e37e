/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pp_profile implementation: three intern tables (strings, frames, stacks)
 * with open-addressing hash indexes, plus pid records and counters.
 *
 * Everything is stored in growable flat arrays addressed by 32-bit ids, so
 * adding a sample that was seen before costs one hash probe and no
 * allocation, and clear() keeps the capacity for the next session.
 */
#include "profile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define EMPTY UINT32_MAX

struct index {
  uint32_t *slots; /* id or EMPTY */
  uint32_t cap;    /* power of two, 0 when unallocated */
  uint32_t used;
};

struct str_ref {
  uint32_t off;
  uint32_t len;
};

struct pp_profile {
  /* strings */
  char *arena;
  size_t arena_len, arena_cap;
  struct str_ref *strs;
  uint32_t nstrs, strs_cap;
  uint32_t *str_hash; /* cached hash per string, for rehashing */
  struct index str_idx;

  /* frames */
  struct pp_frame_rec *frames;
  uint32_t nframes, frames_cap;
  struct index frame_idx;

  /* stacks */
  struct pp_stack_rec *stacks;
  uint32_t nstacks, stacks_cap;
  uint32_t *stack_hash;
  uint32_t *pool; /* frame ids of all stacks */
  size_t pool_len, pool_cap;
  struct index stack_idx;

  /* pids */
  struct pp_pid_rec *pids;
  uint32_t npids, pids_cap;
  struct index pid_idx;

  struct pp_counter_rec *counters;
  uint32_t ncounters, counters_cap;

  uint64_t total;
};

/* --- hashing ------------------------------------------------------------ */

static inline uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

static uint32_t hash_bytes(const void *data, size_t len) {
  const unsigned char *p = data;
  uint64_t h = 0x9e3779b97f4a7c15ull ^ len;
  while (len >= 8) {
    uint64_t v;
    memcpy(&v, p, 8);
    h = (h ^ mix64(v)) * 0x100000001b3ull;
    p += 8;
    len -= 8;
  }
  uint64_t tail = 0;
  memcpy(&tail, p, len);
  h ^= mix64(tail ^ (len << 56));
  return (uint32_t)mix64(h);
}

static uint32_t hash_u32s(uint32_t seed, const uint32_t *v, size_t n) {
  uint64_t h = 0x243f6a8885a308d3ull ^ seed;
  size_t i = 0;
  for (; i + 1 < n; i += 2) {
    uint64_t pair = ((uint64_t)v[i] << 32) | v[i + 1];
    h = (h ^ mix64(pair)) * 0x100000001b3ull;
  }
  if (i < n) h = (h ^ mix64(v[i] | (1ull << 40))) * 0x100000001b3ull;
  return (uint32_t)mix64(h ^ n);
}

/* --- growable arrays ---------------------------------------------------- */

static int grow(void **arr, uint32_t *cap, uint32_t need, size_t elem) {
  if (need <= *cap) return 0;
  uint64_t ncap = *cap ? (uint64_t)*cap * 2 : 64;
  while (ncap < need)
    ncap *= 2;
  if (ncap > UINT32_MAX - 1) return -ENOMEM;
  void *n = realloc(*arr, (size_t)ncap * elem);
  if (!n) return -ENOMEM;
  *arr = n;
  *cap = (uint32_t)ncap;
  return 0;
}

static int grow_size(void **arr, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t ncap = *cap ? *cap * 2 : 256;
  while (ncap < need)
    ncap *= 2;
  void *n = realloc(*arr, ncap * elem);
  if (!n) return -ENOMEM;
  *arr = n;
  *cap = ncap;
  return 0;
}

/* --- open-addressing index ---------------------------------------------- */

/* Rebuild the index at double size; hash_of(id) gives each entry's hash. */
static int index_rehash(struct index *ix, uint32_t count,
                        uint32_t (*hash_of)(const struct pp_profile *, uint32_t),
                        const struct pp_profile *p) {
  uint32_t ncap = ix->cap ? ix->cap * 2 : 256;
  while (ncap / 2 < count + 1)
    ncap *= 2;
  uint32_t *slots = malloc((size_t)ncap * sizeof(uint32_t));
  if (!slots) return -ENOMEM;
  memset(slots, 0xff, (size_t)ncap * sizeof(uint32_t));
  for (uint32_t id = 0; id < count; id++) {
    uint32_t pos = hash_of(p, id) & (ncap - 1);
    while (slots[pos] != EMPTY)
      pos = (pos + 1) & (ncap - 1);
    slots[pos] = id;
  }
  free(ix->slots);
  ix->slots = slots;
  ix->cap = ncap;
  ix->used = count;
  return 0;
}

static inline int index_needs_grow(const struct index *ix) {
  return ix->cap == 0 || (ix->used + 1) * 2 > ix->cap;
}

static uint32_t str_hash_of(const struct pp_profile *p, uint32_t id) {
  return p->str_hash[id];
}

static uint32_t frame_hash_of_rec(const struct pp_frame_rec *f) {
  uint32_t v[4] = {f->name, f->file, f->line, f->kind};
  return hash_u32s(0xf4a3, v, 4);
}

static uint32_t frame_hash_of(const struct pp_profile *p, uint32_t id) {
  return frame_hash_of_rec(&p->frames[id]);
}

static uint32_t stack_hash_of(const struct pp_profile *p, uint32_t id) {
  return p->stack_hash[id];
}

static uint32_t pid_hash_of(const struct pp_profile *p, uint32_t id) {
  return (uint32_t)mix64(p->pids[id].pid);
}

/* --- lifecycle ---------------------------------------------------------- */

struct pp_profile *pp_profile_new(void) {
  return calloc(1, sizeof(struct pp_profile));
}

void pp_profile_free(struct pp_profile *p) {
  if (!p) return;
  free(p->arena);
  free(p->strs);
  free(p->str_hash);
  free(p->str_idx.slots);
  free(p->frames);
  free(p->frame_idx.slots);
  free(p->stacks);
  free(p->stack_hash);
  free(p->pool);
  free(p->stack_idx.slots);
  free(p->pids);
  free(p->pid_idx.slots);
  free(p->counters);
  free(p);
}

static void index_clear(struct index *ix) {
  if (ix->slots) memset(ix->slots, 0xff, (size_t)ix->cap * sizeof(uint32_t));
  ix->used = 0;
}

void pp_profile_clear(struct pp_profile *p) {
  p->arena_len = 0;
  p->nstrs = 0;
  p->nframes = 0;
  p->nstacks = 0;
  p->pool_len = 0;
  p->npids = 0;
  p->ncounters = 0;
  p->total = 0;
  index_clear(&p->str_idx);
  index_clear(&p->frame_idx);
  index_clear(&p->stack_idx);
  index_clear(&p->pid_idx);
}

/* --- strings ------------------------------------------------------------ */

uint32_t pp_profile_intern(struct pp_profile *p, const char *s, size_t len) {
  if (!s) return PP_NO_STR;
  if (len > UINT32_MAX / 2) return PP_NO_STR;
  uint32_t h = hash_bytes(s, len);
  if (p->str_idx.cap) {
    uint32_t mask = p->str_idx.cap - 1;
    for (uint32_t pos = h & mask;; pos = (pos + 1) & mask) {
      uint32_t id = p->str_idx.slots[pos];
      if (id == EMPTY) break;
      if (p->str_hash[id] == h && p->strs[id].len == len &&
          memcmp(p->arena + p->strs[id].off, s, len) == 0)
        return id;
    }
  }
  if (p->nstrs >= PP_NO_STR - 1) return PP_NO_STR;
  if (p->nstrs + 1 > p->strs_cap) {
    if (grow((void **)&p->strs, &p->strs_cap, p->nstrs + 1, sizeof(*p->strs)) < 0) return PP_NO_STR;
    /* str_hash follows strs' capacity */
    uint32_t *nh = realloc(p->str_hash, (size_t)p->strs_cap * sizeof(uint32_t));
    if (!nh) return PP_NO_STR;
    p->str_hash = nh;
  }
  if (grow_size((void **)&p->arena, &p->arena_cap, p->arena_len + len + 1, 1) < 0) return PP_NO_STR;
  if (p->arena_len + len + 1 > UINT32_MAX) return PP_NO_STR;
  uint32_t id = p->nstrs;
  memcpy(p->arena + p->arena_len, s, len);
  p->arena[p->arena_len + len] = '\0';
  p->strs[id].off = (uint32_t)p->arena_len;
  p->strs[id].len = (uint32_t)len;
  p->str_hash[id] = h;
  p->arena_len += len + 1;
  p->nstrs++;
  if (index_needs_grow(&p->str_idx)) {
    if (index_rehash(&p->str_idx, p->nstrs, str_hash_of, p) < 0) {
      p->nstrs--;
      return PP_NO_STR;
    }
  } else {
    uint32_t mask = p->str_idx.cap - 1;
    uint32_t pos = h & mask;
    while (p->str_idx.slots[pos] != EMPTY)
      pos = (pos + 1) & mask;
    p->str_idx.slots[pos] = id;
    p->str_idx.used++;
  }
  return id;
}

uint32_t pp_profile_intern_cstr(struct pp_profile *p, const char *s) {
  return s ? pp_profile_intern(p, s, strlen(s)) : PP_NO_STR;
}

const char *pp_profile_str(const struct pp_profile *p, uint32_t id) {
  if (id >= p->nstrs) return "";
  return p->arena + p->strs[id].off;
}

uint32_t pp_profile_str_len(const struct pp_profile *p, uint32_t id) {
  return id < p->nstrs ? p->strs[id].len : 0;
}

size_t pp_profile_str_count(const struct pp_profile *p) {
  return p->nstrs;
}

uint32_t pp_profile_import_str(struct pp_profile *dst, const struct pp_profile *src, uint32_t id) {
  if (id >= src->nstrs) return PP_NO_STR;
  return pp_profile_intern(dst, src->arena + src->strs[id].off, src->strs[id].len);
}

/* --- frames ------------------------------------------------------------- */

uint32_t pp_profile_intern_frame(struct pp_profile *p, uint32_t name, uint32_t file, uint32_t line,
                                 uint32_t kind) {
  struct pp_frame_rec key = {name, file, line, kind};
  uint32_t h = frame_hash_of_rec(&key);
  if (p->frame_idx.cap) {
    uint32_t mask = p->frame_idx.cap - 1;
    for (uint32_t pos = h & mask;; pos = (pos + 1) & mask) {
      uint32_t id = p->frame_idx.slots[pos];
      if (id == EMPTY) break;
      const struct pp_frame_rec *f = &p->frames[id];
      if (f->name == name && f->file == file && f->line == line && f->kind == kind) return id;
    }
  }
  if (p->nframes >= UINT32_MAX - 1) return UINT32_MAX;
  if (grow((void **)&p->frames, &p->frames_cap, p->nframes + 1, sizeof(*p->frames)) < 0)
    return UINT32_MAX;
  uint32_t id = p->nframes++;
  p->frames[id] = key;
  if (index_needs_grow(&p->frame_idx)) {
    if (index_rehash(&p->frame_idx, p->nframes, frame_hash_of, p) < 0) {
      p->nframes--;
      return UINT32_MAX;
    }
  } else {
    uint32_t mask = p->frame_idx.cap - 1;
    uint32_t pos = h & mask;
    while (p->frame_idx.slots[pos] != EMPTY)
      pos = (pos + 1) & mask;
    p->frame_idx.slots[pos] = id;
    p->frame_idx.used++;
  }
  return id;
}

const struct pp_frame_rec *pp_profile_frame(const struct pp_profile *p, uint32_t id) {
  return id < p->nframes ? &p->frames[id] : NULL;
}

size_t pp_profile_frame_count(const struct pp_profile *p) {
  return p->nframes;
}

/* --- pids --------------------------------------------------------------- */

struct pp_pid_rec *pp_profile_pid(const struct pp_profile *p, uint32_t pid) {
  if (!p->pid_idx.cap) return NULL;
  uint32_t mask = p->pid_idx.cap - 1;
  for (uint32_t pos = (uint32_t)mix64(pid) & mask;; pos = (pos + 1) & mask) {
    uint32_t id = p->pid_idx.slots[pos];
    if (id == EMPTY) return NULL;
    if (p->pids[id].pid == pid) return &p->pids[id];
  }
}

struct pp_pid_rec *pp_profile_pid_upsert(struct pp_profile *p, uint32_t pid) {
  struct pp_pid_rec *r = pp_profile_pid(p, pid);
  if (r) return r;
  if (grow((void **)&p->pids, &p->pids_cap, p->npids + 1, sizeof(*p->pids)) < 0) return NULL;
  uint32_t id = p->npids++;
  r = &p->pids[id];
  memset(r, 0, sizeof(*r));
  r->pid = pid;
  r->comm = r->appid = r->app_meta = r->container = r->reason = PP_NO_STR;
  r->status = PP_PID_OK;
  if (index_needs_grow(&p->pid_idx)) {
    if (index_rehash(&p->pid_idx, p->npids, pid_hash_of, p) < 0) {
      p->npids--;
      return NULL;
    }
  } else {
    uint32_t mask = p->pid_idx.cap - 1;
    uint32_t pos = (uint32_t)mix64(pid) & mask;
    while (p->pid_idx.slots[pos] != EMPTY)
      pos = (pos + 1) & mask;
    p->pid_idx.slots[pos] = id;
    p->pid_idx.used++;
  }
  return &p->pids[id];
}

size_t pp_profile_pid_count(const struct pp_profile *p) {
  return p->npids;
}

struct pp_pid_rec *pp_profile_pid_at(const struct pp_profile *p, size_t i) {
  return i < p->npids ? &p->pids[i] : NULL;
}

/* --- stacks ------------------------------------------------------------- */

int pp_profile_add_stack(struct pp_profile *p, uint32_t pid, uint32_t comm, const uint32_t *frames,
                         uint32_t n, uint64_t count) {
  if (n > PP_MAX_FRAMES) {
    /* keep the leaf side: that is where the time is spent */
    frames += n - PP_MAX_FRAMES;
    n = PP_MAX_FRAMES;
  }
  uint32_t seed = (uint32_t)mix64(((uint64_t)pid << 32) | comm);
  uint32_t h = hash_u32s(seed, frames, n);
  if (p->stack_idx.cap) {
    uint32_t mask = p->stack_idx.cap - 1;
    for (uint32_t pos = h & mask;; pos = (pos + 1) & mask) {
      uint32_t id = p->stack_idx.slots[pos];
      if (id == EMPTY) break;
      struct pp_stack_rec *s = &p->stacks[id];
      if (p->stack_hash[id] == h && s->pid == pid && s->comm == comm && s->nframes == n &&
          memcmp(p->pool + s->first, frames, (size_t)n * sizeof(uint32_t)) == 0) {
        s->count += count;
        p->total += count;
        struct pp_pid_rec *r = pp_profile_pid(p, pid);
        if (r) r->total += count;
        return 0;
      }
    }
  }
  struct pp_pid_rec *r = pp_profile_pid_upsert(p, pid);
  if (!r) return -ENOMEM;
  if (p->pool_len + n > UINT32_MAX) return -ENOMEM;
  if (p->nstacks + 1 > p->stacks_cap) {
    if (grow((void **)&p->stacks, &p->stacks_cap, p->nstacks + 1, sizeof(*p->stacks)) < 0)
      return -ENOMEM;
    /* stack_hash follows stacks' capacity */
    uint32_t *nh = realloc(p->stack_hash, (size_t)p->stacks_cap * sizeof(uint32_t));
    if (!nh) return -ENOMEM;
    p->stack_hash = nh;
  }
  if (grow_size((void **)&p->pool, &p->pool_cap, p->pool_len + n + 1, sizeof(uint32_t)) < 0)
    return -ENOMEM;
  uint32_t id = p->nstacks;
  struct pp_stack_rec *s = &p->stacks[id];
  s->pid = pid;
  s->comm = comm;
  s->first = (uint32_t)p->pool_len;
  s->nframes = n;
  s->count = count;
  if (n) memcpy(p->pool + p->pool_len, frames, (size_t)n * sizeof(uint32_t));
  p->pool_len += n;
  p->stack_hash[id] = h;
  p->nstacks++;
  if (index_needs_grow(&p->stack_idx)) {
    if (index_rehash(&p->stack_idx, p->nstacks, stack_hash_of, p) < 0) {
      p->nstacks--;
      p->pool_len -= n;
      return -ENOMEM;
    }
  } else {
    uint32_t mask = p->stack_idx.cap - 1;
    uint32_t pos = h & mask;
    while (p->stack_idx.slots[pos] != EMPTY)
      pos = (pos + 1) & mask;
    p->stack_idx.slots[pos] = id;
    p->stack_idx.used++;
  }
  r->total += count;
  p->total += count;
  return 0;
}

int pp_profile_add_sample(struct pp_profile *p, const struct pp_sample *s) {
  uint32_t ids[PP_MAX_FRAMES];
  uint32_t n = s->nframes;
  const struct pp_frame *frames = s->frames;
  if (n > PP_MAX_FRAMES) n = PP_MAX_FRAMES; /* frames[0..n) are the leaf side */
  if (n && !frames) return -EINVAL;
  for (uint32_t i = 0; i < n; i++) {
    const struct pp_frame *f = &frames[i];
    uint32_t name = pp_profile_intern_cstr(p, f->name ? f->name : "[unknown]");
    uint32_t file = pp_profile_intern_cstr(p, f->file);
    uint32_t kind = f->kind < PP_FRAME_KIND_COUNT ? f->kind : PP_FRAME_NATIVE;
    if (name == PP_NO_STR) return -ENOMEM;
    uint32_t fid = pp_profile_intern_frame(p, name, file, f->line, kind);
    if (fid == UINT32_MAX) return -ENOMEM;
    ids[n - 1 - i] = fid; /* root first */
  }
  uint32_t comm = pp_profile_intern_cstr(p, s->comm);
  return pp_profile_add_stack(p, s->pid, comm, ids, n, s->count);
}

size_t pp_profile_stack_count(const struct pp_profile *p) {
  return p->nstacks;
}

const struct pp_stack_rec *pp_profile_stack(const struct pp_profile *p, size_t i) {
  return i < p->nstacks ? &p->stacks[i] : NULL;
}

const uint32_t *pp_profile_stack_frames(const struct pp_profile *p, const struct pp_stack_rec *s) {
  return p->pool + s->first;
}

uint64_t pp_profile_total(const struct pp_profile *p) {
  return p->total;
}

/* --- counters ----------------------------------------------------------- */

int pp_profile_add_counter(struct pp_profile *p, const char *name, uint64_t delta) {
  uint32_t sid = pp_profile_intern_cstr(p, name);
  if (sid == PP_NO_STR) return -ENOMEM;
  for (uint32_t i = 0; i < p->ncounters; i++) {
    if (p->counters[i].name == sid) {
      p->counters[i].value += delta;
      return 0;
    }
  }
  if (grow((void **)&p->counters, &p->counters_cap, p->ncounters + 1, sizeof(*p->counters)) < 0)
    return -ENOMEM;
  p->counters[p->ncounters].name = sid;
  p->counters[p->ncounters].value = delta;
  p->ncounters++;
  return 0;
}

size_t pp_profile_counter_count(const struct pp_profile *p) {
  return p->ncounters;
}

const struct pp_counter_rec *pp_profile_counter_at(const struct pp_profile *p, size_t i) {
  return i < p->ncounters ? &p->counters[i] : NULL;
}

size_t pp_profile_memory(const struct pp_profile *p) {
  return sizeof(*p) + p->arena_cap + (size_t)p->strs_cap * (sizeof(struct str_ref) + 4) +
         (size_t)p->str_idx.cap * 4 + (size_t)p->frames_cap * sizeof(struct pp_frame_rec) +
         (size_t)p->frame_idx.cap * 4 + (size_t)p->stacks_cap * (sizeof(struct pp_stack_rec) + 4) +
         p->pool_cap * 4 + (size_t)p->stack_idx.cap * 4 +
         (size_t)p->pids_cap * sizeof(struct pp_pid_rec) + (size_t)p->pid_idx.cap * 4 +
         (size_t)p->counters_cap * sizeof(struct pp_counter_rec);
}
