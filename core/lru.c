/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bounded LRU cache: a chained hash table for lookups plus a doubly linked
 * recency list (head = most recent) for O(1) eviction.
 */
#include "lru.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct lru_entry {
  struct lru_entry *hnext;       /* bucket chain */
  struct lru_entry *prev, *next; /* recency list */
  uint64_t hash;
  void *value;
  size_t key_len;
  unsigned char key[];
};

struct pp_lru {
  struct lru_entry **buckets;
  size_t nbuckets; /* power of two */
  struct lru_entry *head, *tail;
  size_t count, capacity;
  pp_lru_free_fn free_value;
};

static uint64_t hash_bytes(const void *key, size_t len) {
  /* FNV-1a: keys are short, and a bad distribution only costs time. */
  const unsigned char *p = key;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h ^ (h >> 29);
}

struct pp_lru *pp_lru_new(size_t capacity, pp_lru_free_fn free_value) {
  if (capacity == 0) capacity = 1;
  struct pp_lru *c = calloc(1, sizeof(*c));
  if (!c) return NULL;
  /* Load factor <= 1 at full capacity; the table never grows because the
   * entry count never exceeds the capacity. */
  size_t n = 16;
  while (n < capacity && n < ((size_t)1 << 24))
    n <<= 1;
  c->buckets = calloc(n, sizeof(*c->buckets));
  if (!c->buckets) {
    free(c);
    return NULL;
  }
  c->nbuckets = n;
  c->capacity = capacity;
  c->free_value = free_value;
  return c;
}

static void list_unlink(struct pp_lru *c, struct lru_entry *e) {
  if (e->prev)
    e->prev->next = e->next;
  else
    c->head = e->next;
  if (e->next)
    e->next->prev = e->prev;
  else
    c->tail = e->prev;
  e->prev = e->next = NULL;
}

static void list_push_front(struct pp_lru *c, struct lru_entry *e) {
  e->prev = NULL;
  e->next = c->head;
  if (c->head) c->head->prev = e;
  c->head = e;
  if (!c->tail) c->tail = e;
}

static struct lru_entry **find_slot(struct pp_lru *c, const void *key, size_t len, uint64_t h) {
  struct lru_entry **pp = &c->buckets[h & (c->nbuckets - 1)];
  while (*pp) {
    struct lru_entry *e = *pp;
    if (e->hash == h && e->key_len == len && memcmp(e->key, key, len) == 0) return pp;
    pp = &e->hnext;
  }
  return pp;
}

static void destroy_entry(struct pp_lru *c, struct lru_entry *e) {
  if (c->free_value && e->value) c->free_value(e->value);
  free(e);
}

/* Unlink e from both structures and free it. */
static void drop_entry(struct pp_lru *c, struct lru_entry *e) {
  struct lru_entry **pp = find_slot(c, e->key, e->key_len, e->hash);
  if (*pp == e) *pp = e->hnext;
  list_unlink(c, e);
  c->count--;
  destroy_entry(c, e);
}

bool pp_lru_lookup(struct pp_lru *c, const void *key, size_t key_len, void **value) {
  if (!c || (!key && key_len)) return false;
  uint64_t h = hash_bytes(key, key_len);
  struct lru_entry *e = *find_slot(c, key, key_len, h);
  if (!e) return false;
  if (c->head != e) {
    list_unlink(c, e);
    list_push_front(c, e);
  }
  if (value) *value = e->value;
  return true;
}

void *pp_lru_get(struct pp_lru *c, const void *key, size_t key_len) {
  void *v = NULL;
  return pp_lru_lookup(c, key, key_len, &v) ? v : NULL;
}

int pp_lru_put(struct pp_lru *c, const void *key, size_t key_len, void *value) {
  if (!c || (!key && key_len)) return -EINVAL;
  uint64_t h = hash_bytes(key, key_len);
  struct lru_entry **slot = find_slot(c, key, key_len, h);
  if (*slot) {
    struct lru_entry *e = *slot;
    if (e->value != value && c->free_value && e->value) c->free_value(e->value);
    e->value = value;
    if (c->head != e) {
      list_unlink(c, e);
      list_push_front(c, e);
    }
    return 0;
  }
  struct lru_entry *e = malloc(sizeof(*e) + key_len);
  if (!e) {
    if (c->free_value && value) c->free_value(value);
    return -ENOMEM;
  }
  if (c->count >= c->capacity && c->tail) {
    drop_entry(c, c->tail);
    slot = find_slot(c, key, key_len, h); /* the chain may have changed */
  }
  e->hash = h;
  e->value = value;
  e->key_len = key_len;
  if (key_len) memcpy(e->key, key, key_len);
  e->hnext = NULL;
  *slot = e;
  list_push_front(c, e);
  c->count++;
  return 0;
}

bool pp_lru_remove(struct pp_lru *c, const void *key, size_t key_len) {
  if (!c || (!key && key_len)) return false;
  struct lru_entry *e = *find_slot(c, key, key_len, hash_bytes(key, key_len));
  if (!e) return false;
  drop_entry(c, e);
  return true;
}

size_t pp_lru_remove_if(struct pp_lru *c, pp_lru_drop_fn drop, void *ctx) {
  if (!c || !drop) return 0;
  size_t n = 0;
  struct lru_entry *e = c->tail;
  while (e) {
    struct lru_entry *prev = e->prev;
    if (drop(e->key, e->key_len, e->value, ctx)) {
      drop_entry(c, e);
      n++;
    }
    e = prev;
  }
  return n;
}

void pp_lru_clear(struct pp_lru *c) {
  if (!c) return;
  struct lru_entry *e = c->head;
  while (e) {
    struct lru_entry *next = e->next;
    destroy_entry(c, e);
    e = next;
  }
  memset(c->buckets, 0, c->nbuckets * sizeof(*c->buckets));
  c->head = c->tail = NULL;
  c->count = 0;
}

void pp_lru_free(struct pp_lru *c) {
  if (!c) return;
  pp_lru_clear(c);
  free(c->buckets);
  free(c);
}

size_t pp_lru_count(const struct pp_lru *c) {
  return c ? c->count : 0;
}

size_t pp_lru_capacity(const struct pp_lru *c) {
  return c ? c->capacity : 0;
}

bool pp_lru_lookup_str(struct pp_lru *c, const char *key, void **value) {
  return key ? pp_lru_lookup(c, key, strlen(key), value) : false;
}

int pp_lru_put_str(struct pp_lru *c, const char *key, void *value) {
  if (!key) {
    if (c && c->free_value && value) c->free_value(value);
    return -EINVAL;
  }
  return pp_lru_put(c, key, strlen(key), value);
}
