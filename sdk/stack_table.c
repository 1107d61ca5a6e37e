/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The stack table (see stack_table.h). Three interning layers, each an
 * append-only array plus an open-addressing index of ids: strings (offsets
 * into one text arena), frames (name, file, line, kind as string ids) and
 * stacks (pid, tid, comm and a run of frame ids in one pool). Ids, not
 * pointers, so every array can grow by realloc.
 */
#include "polyprof/kit/stack_table.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define NONE 0xffffffffu

struct str_slot {
  uint32_t off_plus1; /* 0: empty */
  uint32_t hash;
};

struct frame_rec {
  uint32_t name, file, line, kind; /* file: NONE if absent */
  uint32_t hash;
};

struct stack_rec {
  uint32_t pid, tid, comm; /* comm: NONE for the process comm */
  uint32_t type;           /* enum pp_profile_type */
  uint32_t first, n;       /* frame ids in pool[first, first + n) */
  uint32_t hash;
  uint64_t count;
};

/* id+1 per slot, 0 empty; the hash lives in the record */
struct index {
  uint32_t *slot;
  size_t cap; /* power of two, 0 before the first use */
};

struct pp_stack_table {
  struct pp_stack_table_limits lim;
  char *text;
  size_t tlen, tcap;
  struct str_slot *strs;
  size_t scap, nstrs;
  struct frame_rec *frames;
  size_t nframes, fcap;
  struct index fidx;
  struct stack_rec *stacks;
  size_t nstacks, stcap;
  struct index stidx;
  uint32_t *pool;
  size_t plen, pcap;
  uint32_t *scratch;    /* max_depth frame ids of the stack being added */
  struct pp_frame *out; /* max_depth frames of the stack being emitted */
  uint64_t samples, dropped, truncated;
};

static uint32_t mix(uint32_t h, uint32_t v) {
  h ^= v;
  h *= 0x01000193u;
  return h ^ (h >> 15);
}

static uint32_t hash_str(const char *s, size_t *len) {
  uint32_t h = 0x811c9dc5u;
  const char *p = s;
  for (; *p; p++)
    h = (h ^ (unsigned char)*p) * 0x01000193u;
  *len = (size_t)(p - s);
  return h ? h : 1;
}

/* Grows *arr (elem bytes each) to hold `need` elements, doubling, never
 * past `limit`. */
static bool reserve(void **arr, size_t *cap, size_t need, size_t elem, size_t limit) {
  if (need <= *cap) return true;
  if (need > limit) return false;
  size_t ncap = *cap ? *cap : 64;
  while (ncap < need)
    ncap *= 2;
  if (ncap > limit) ncap = limit;
  void *n = realloc(*arr, ncap * elem);
  if (!n) return false;
  *arr = n;
  *cap = ncap;
  return true;
}

struct pp_stack_table *pp_stack_table_new(const struct pp_stack_table_limits *limits) {
  struct pp_stack_table *t = calloc(1, sizeof(*t));
  if (!t) return NULL;
  if (limits) t->lim = *limits;
  if (!t->lim.max_stacks) t->lim.max_stacks = 65536;
  if (!t->lim.max_string_bytes) t->lim.max_string_bytes = 16u << 20;
  if (!t->lim.max_frame_refs) t->lim.max_frame_refs = 4u << 20;
  if (!t->lim.max_depth) t->lim.max_depth = 1024;
  /* ids are 32-bit */
  if (t->lim.max_string_bytes > 0x7fffffffu) t->lim.max_string_bytes = 0x7fffffffu;
  if (t->lim.max_frame_refs > 0x7fffffffu) t->lim.max_frame_refs = 0x7fffffffu;
  if (t->lim.max_stacks > 0x7fffffffu) t->lim.max_stacks = 0x7fffffffu;
  t->scratch = malloc(t->lim.max_depth * sizeof(*t->scratch));
  t->out = malloc(t->lim.max_depth * sizeof(*t->out));
  if (!t->scratch || !t->out) {
    pp_stack_table_free(t);
    return NULL;
  }
  return t;
}

void pp_stack_table_free(struct pp_stack_table *t) {
  if (!t) return;
  free(t->text);
  free(t->strs);
  free(t->frames);
  free(t->fidx.slot);
  free(t->stacks);
  free(t->stidx.slot);
  free(t->pool);
  free(t->scratch);
  free(t->out);
  free(t);
}

/* --- strings --------------------------------------------------------- */

static bool strs_grow(struct pp_stack_table *t) {
  size_t ncap = t->scap ? t->scap * 2 : 1024;
  struct str_slot *n = calloc(ncap, sizeof(*n));
  if (!n) return false;
  for (size_t i = 0; i < t->scap; i++) {
    if (!t->strs[i].off_plus1) continue;
    size_t s = t->strs[i].hash & (ncap - 1);
    while (n[s].off_plus1)
      s = (s + 1) & (ncap - 1);
    n[s] = t->strs[i];
  }
  free(t->strs);
  t->strs = n;
  t->scap = ncap;
  return true;
}

static uint32_t intern(struct pp_stack_table *t, const char *s) {
  size_t len;
  uint32_t h = hash_str(s, &len);
  if ((t->nstrs + 1) * 2 > t->scap && !strs_grow(t)) return NONE;
  size_t mask = t->scap - 1, i = h & mask;
  for (; t->strs[i].off_plus1; i = (i + 1) & mask)
    if (t->strs[i].hash == h && strcmp(t->text + t->strs[i].off_plus1 - 1, s) == 0)
      return t->strs[i].off_plus1 - 1;
  void *text = t->text;
  if (!reserve(&text, &t->tcap, t->tlen + len + 1, 1, t->lim.max_string_bytes)) return NONE;
  t->text = text;
  uint32_t off = (uint32_t)t->tlen;
  memcpy(t->text + off, s, len + 1);
  t->tlen += len + 1;
  t->strs[i] = (struct str_slot){off + 1, h};
  t->nstrs++;
  return off;
}

/* --- id indexes ------------------------------------------------------ */

/* Doubles an index of ids over records whose hash is at `hash_at` bytes
 * into each `stride`-byte record. */
static bool index_grow(struct index *ix, const void *recs, size_t n, size_t stride,
                       size_t hash_at) {
  size_t ncap = ix->cap ? ix->cap * 2 : 1024;
  uint32_t *slot = calloc(ncap, sizeof(*slot));
  if (!slot) return false;
  for (size_t id = 0; id < n; id++) {
    uint32_t h;
    memcpy(&h, (const char *)recs + id * stride + hash_at, sizeof(h));
    size_t s = h & (ncap - 1);
    while (slot[s])
      s = (s + 1) & (ncap - 1);
    slot[s] = (uint32_t)id + 1;
  }
  free(ix->slot);
  ix->slot = slot;
  ix->cap = ncap;
  return true;
}

/* --- frames ---------------------------------------------------------- */

static uint32_t frame_id(struct pp_stack_table *t, const struct pp_frame *f) {
  uint32_t name = intern(t, f->name ? f->name : "");
  uint32_t file = f->file ? intern(t, f->file) : NONE;
  if (name == NONE || (f->file && file == NONE)) return NONE;
  uint32_t h = mix(mix(mix(mix(0x9e3779b9u, name), file), f->line), f->kind);
  struct frame_rec r = {name, file, f->line, f->kind, h};
  if ((t->nframes + 1) * 2 > t->fidx.cap &&
      !index_grow(&t->fidx, t->frames, t->nframes, sizeof(r), offsetof(struct frame_rec, hash)))
    return NONE;
  size_t mask = t->fidx.cap - 1, i = h & mask;
  for (; t->fidx.slot[i]; i = (i + 1) & mask) {
    uint32_t id = t->fidx.slot[i] - 1;
    if (!memcmp(&t->frames[id], &r, sizeof(r))) return id;
  }
  void *fr = t->frames;
  if (!reserve(&fr, &t->fcap, t->nframes + 1, sizeof(r), t->lim.max_frame_refs)) return NONE;
  t->frames = fr;
  t->frames[t->nframes] = r;
  t->fidx.slot[i] = (uint32_t)++t->nframes;
  return (uint32_t)(t->nframes - 1);
}

/* --- stacks ---------------------------------------------------------- */

int pp_stack_table_add(struct pp_stack_table *t, uint32_t pid, uint32_t tid, const char *comm,
                       const struct pp_frame *frames, uint32_t nframes, uint64_t count) {
  return pp_stack_table_add_typed(t, PP_PROFILE_CPU, pid, tid, comm, frames, nframes, count);
}

int pp_stack_table_add_typed(struct pp_stack_table *t, uint32_t type, uint32_t pid, uint32_t tid,
                             const char *comm, const struct pp_frame *frames, uint32_t nframes,
                             uint64_t count) {
  uint32_t n = nframes;
  if (n > t->lim.max_depth) {
    n = t->lim.max_depth;
    t->truncated += count;
  }
  uint32_t c = comm ? intern(t, comm) : NONE;
  if (comm && c == NONE) goto full;
  uint32_t h = mix(mix(mix(mix(mix(0x85ebca6bu, pid), tid), c), n), type);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t id = frame_id(t, &frames[i]);
    if (id == NONE) goto full;
    t->scratch[i] = id;
    h = mix(h, id);
  }
  if ((t->nstacks + 1) * 2 > t->stidx.cap &&
      !index_grow(&t->stidx, t->stacks, t->nstacks, sizeof(struct stack_rec),
                  offsetof(struct stack_rec, hash)))
    goto full;
  size_t mask = t->stidx.cap - 1, i = h & mask;
  for (; t->stidx.slot[i]; i = (i + 1) & mask) {
    struct stack_rec *s = &t->stacks[t->stidx.slot[i] - 1];
    if (s->hash == h && s->pid == pid && s->tid == tid && s->comm == c && s->n == n &&
        s->type == type && !memcmp(t->pool + s->first, t->scratch, n * sizeof(uint32_t))) {
      s->count += count;
      t->samples += count;
      return 0;
    }
  }
  void *st = t->stacks, *pool = t->pool;
  if (!reserve(&st, &t->stcap, t->nstacks + 1, sizeof(struct stack_rec), t->lim.max_stacks))
    goto full;
  t->stacks = st;
  if (!reserve(&pool, &t->pcap, t->plen + n, sizeof(uint32_t), t->lim.max_frame_refs)) goto full;
  t->pool = pool;
  memcpy(t->pool + t->plen, t->scratch, n * sizeof(uint32_t));
  t->stacks[t->nstacks] = (struct stack_rec){pid, tid, c, type, (uint32_t)t->plen, n, h, count};
  t->plen += n;
  t->stidx.slot[i] = (uint32_t)++t->nstacks;
  t->samples += count;
  return 0;
full:
  t->dropped += count;
  return -ENOSPC;
}

void pp_stack_table_clear(struct pp_stack_table *t) {
  t->tlen = t->nstrs = t->nframes = t->nstacks = t->plen = 0;
  if (t->strs) memset(t->strs, 0, t->scap * sizeof(*t->strs));
  if (t->fidx.slot) memset(t->fidx.slot, 0, t->fidx.cap * sizeof(uint32_t));
  if (t->stidx.slot) memset(t->stidx.slot, 0, t->stidx.cap * sizeof(uint32_t));
  t->samples = t->dropped = t->truncated = 0;
}

size_t pp_stack_table_emit(struct pp_stack_table *t, const struct pp_host *host,
                           struct pp_sink *sink) {
  for (size_t k = 0; k < t->nstacks; k++) {
    const struct stack_rec *s = &t->stacks[k];
    for (uint32_t i = 0; i < s->n; i++) {
      const struct frame_rec *f = &t->frames[t->pool[s->first + i]];
      t->out[i] = (struct pp_frame){.name = t->text + f->name,
                                    .file = f->file == NONE ? NULL : t->text + f->file,
                                    .line = f->line,
                                    .kind = f->kind};
    }
    struct pp_sample smp = {.pid = s->pid,
                            .tid = s->tid,
                            .comm = s->comm == NONE ? NULL : t->text + s->comm,
                            .frames = t->out,
                            .nframes = s->n,
                            .type = s->type,
                            .count = s->count};
    host->emit(sink, &smp);
  }
  size_t n = t->nstacks;
  if (t->dropped) host->add_counter(sink, "dropped_stacks", t->dropped);
  if (t->truncated) host->add_counter(sink, "truncated_stacks", t->truncated);
  pp_stack_table_clear(t);
  return n;
}

size_t pp_stack_table_count(const struct pp_stack_table *t) {
  return t->nstacks;
}

uint64_t pp_stack_table_samples(const struct pp_stack_table *t) {
  return t->samples;
}

uint64_t pp_stack_table_dropped(const struct pp_stack_table *t) {
  return t->dropped;
}

size_t pp_stack_table_bytes(const struct pp_stack_table *t) {
  return sizeof(*t) + t->tcap + t->scap * sizeof(*t->strs) + t->fcap * sizeof(*t->frames) +
         t->fidx.cap * sizeof(uint32_t) + t->stcap * sizeof(*t->stacks) +
         t->stidx.cap * sizeof(uint32_t) + t->pcap * sizeof(uint32_t) +
         t->lim.max_depth * (sizeof(*t->scratch) + sizeof(*t->out));
}
