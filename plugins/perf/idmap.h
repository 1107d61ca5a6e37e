/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small open-addressing hash map from a 64-bit key to a pointer, used for
 * pid -> process, tid -> thread and (dev, inode) -> object tables. Linear
 * probing with backward-shift deletion (no tombstones), so a long run with
 * many short-lived processes does not degrade it.
 */
#ifndef PERF_IDMAP_H
#define PERF_IDMAP_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "polyprof/kit/hash.h"

struct perf_idmap_slot {
  uint64_t key;
  void *val; /* NULL: empty */
};

struct perf_idmap {
  struct perf_idmap_slot *slots;
  size_t cap; /* power of two */
  size_t n;
};

static inline void *perf_idmap_get(const struct perf_idmap *m, uint64_t key) {
  if (!m->cap) return NULL;
  size_t mask = m->cap - 1;
  for (size_t i = pp_hash_u64(key) & mask;; i = (i + 1) & mask) {
    if (!m->slots[i].val) return NULL;
    if (m->slots[i].key == key) return m->slots[i].val;
  }
}

static inline int perf_idmap_grow(struct perf_idmap *m) {
  size_t ncap = m->cap ? m->cap * 2 : 64;
  struct perf_idmap_slot *ns = calloc(ncap, sizeof(*ns));
  if (!ns) return -ENOMEM;
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->slots[i].val) continue;
    size_t j = pp_hash_u64(m->slots[i].key) & (ncap - 1);
    while (ns[j].val)
      j = (j + 1) & (ncap - 1);
    ns[j] = m->slots[i];
  }
  free(m->slots);
  m->slots = ns;
  m->cap = ncap;
  return 0;
}

/* Inserts or replaces. val must not be NULL. */
static inline int perf_idmap_put(struct perf_idmap *m, uint64_t key, void *val) {
  if ((m->n + 1) * 4 > m->cap * 3 && perf_idmap_grow(m) < 0) return -ENOMEM;
  size_t mask = m->cap - 1;
  for (size_t i = pp_hash_u64(key) & mask;; i = (i + 1) & mask) {
    if (!m->slots[i].val) {
      m->slots[i].key = key;
      m->slots[i].val = val;
      m->n++;
      return 0;
    }
    if (m->slots[i].key == key) {
      m->slots[i].val = val;
      return 0;
    }
  }
}

static inline void *perf_idmap_del(struct perf_idmap *m, uint64_t key) {
  if (!m->cap) return NULL;
  size_t mask = m->cap - 1, i = pp_hash_u64(key) & mask;
  for (;; i = (i + 1) & mask) {
    if (!m->slots[i].val) return NULL;
    if (m->slots[i].key == key) break;
  }
  void *val = m->slots[i].val;
  /* backward-shift: move later members of the probe run into the hole */
  size_t hole = i;
  for (size_t j = (i + 1) & mask; m->slots[j].val; j = (j + 1) & mask) {
    size_t home = pp_hash_u64(m->slots[j].key) & mask;
    /* j may move into hole if its home is not in (hole, j] cyclically */
    int in_range = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
    if (!in_range) {
      m->slots[hole] = m->slots[j];
      hole = j;
    }
  }
  m->slots[hole].val = NULL;
  m->slots[hole].key = 0;
  m->n--;
  return val;
}

static inline void perf_idmap_free(struct perf_idmap *m) {
  free(m->slots);
  m->slots = NULL;
  m->cap = m->n = 0;
}

#endif
