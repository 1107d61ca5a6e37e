/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small bounded LRU cache: keys are byte strings (a struct such as
 * {pid, start_time} or a C string), values are opaque pointers owned by the
 * cache once stored (freed with the destructor given at creation, on
 * eviction, replacement, removal, clear and free). Every cache in the agent
 * must be bounded, so the capacity is fixed at creation and a put() beyond it
 * evicts the least recently used entry.
 *
 * Not thread-safe: each owner uses its own cache from one thread.
 */
#ifndef PP_LRU_H
#define PP_LRU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pp_lru;

typedef void (*pp_lru_free_fn)(void *value);

/* capacity >= 1 (0 is treated as 1). free_value may be NULL. NULL on OOM. */
struct pp_lru *pp_lru_new(size_t capacity, pp_lru_free_fn free_value);
void pp_lru_free(struct pp_lru *c);

/* Look a key up and mark it most recently used. Returns true if present and
 * stores the value (which may legitimately be NULL, e.g. a cached "unknown")
 * in *value when value is not NULL. */
bool pp_lru_lookup(struct pp_lru *c, const void *key, size_t key_len, void **value);
/* Same, returning the value or NULL (absent or stored NULL). */
void *pp_lru_get(struct pp_lru *c, const void *key, size_t key_len);

/* Insert or replace; the cache takes ownership of value (also on failure,
 * when it is freed at once). 0 or -ENOMEM. */
int pp_lru_put(struct pp_lru *c, const void *key, size_t key_len, void *value);

/* Remove a key (freeing its value). True if it was present. */
bool pp_lru_remove(struct pp_lru *c, const void *key, size_t key_len);

/* Remove every entry for which drop(key, key_len, value, ctx) is true
 * (freeing its value), oldest first; the others keep their recency.
 * Returns how many were removed. drop must not touch the cache. */
typedef bool (*pp_lru_drop_fn)(const void *key, size_t key_len, void *value, void *ctx);
size_t pp_lru_remove_if(struct pp_lru *c, pp_lru_drop_fn drop, void *ctx);
void pp_lru_clear(struct pp_lru *c);

size_t pp_lru_count(const struct pp_lru *c);
size_t pp_lru_capacity(const struct pp_lru *c);

/* Convenience for C-string keys (the terminating NUL is not part of the key). */
bool pp_lru_lookup_str(struct pp_lru *c, const char *key, void **value);
int pp_lru_put_str(struct pp_lru *c, const char *key, void *value);

/* The usual process key: a pid alone is reused, (pid, start time) is not. */
struct pp_lru_pid_key {
  uint64_t start_time;
  uint32_t pid;
  uint32_t pad; /* zero: keys are compared as bytes */
};
static inline struct pp_lru_pid_key pp_lru_pid_key(uint32_t pid, uint64_t start_time) {
  struct pp_lru_pid_key k = {.start_time = start_time, .pid = pid, .pad = 0};
  return k;
}

#endif /* PP_LRU_H */
