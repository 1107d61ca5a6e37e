/*
 * Bounded tables of the ruby plugin: interned strings, distinct frames, the
 * frame cache (which saves re-reading iseqs every sample) and the stack
 * aggregation of one session. All are sized once at init from the config and
 * never grow: a full table drops (and counts) instead of allocating.
 */
#ifndef POLYPROF_RUBY_TABLES_H
#define POLYPROF_RUBY_TABLES_H

#include <stddef.h>
#include <stdint.h>

#define RUBY_NO_ID UINT32_MAX

/* Interned strings, referenced by 32-bit ids (offsets into one arena). */
struct ruby_strings {
  char *arena;
  size_t arena_cap, arena_used;
  uint32_t *slots; /* hash -> offset+1 (0 = empty) */
  size_t nslots, used;
};

struct ruby_frame {
  uint32_t name, file; /* string ids; file RUBY_NO_ID if none */
  uint32_t line;
  uint32_t kind;
};

/* Distinct frames, deduplicated, referenced by index. */
struct ruby_frames {
  struct ruby_frame *v;
  size_t cap, n;
  uint32_t *slots; /* hash -> index+1 */
  size_t nslots;
};

/* (pid, key1, key2) -> frame id: iseq+pc for Ruby frames, method entry for
 * C frames, ID for C function names. Cleared wholesale when full: cheaper
 * than LRU bookkeeping on the hot path, and it refills in a few samples. */
struct ruby_cache_ent {
  uint64_t k1, k2;
  uint32_t pid, val; /* val RUBY_NO_ID = empty */
};
struct ruby_cache {
  struct ruby_cache_ent *v;
  size_t cap, used;
  uint64_t clears;
};

/* Aggregated stacks of the current session: v[0..used) in the order first
 * seen, found through a small index of slots (entry + 1, 0 = empty). A new
 * stack touches the next entry, not a random one of a large table: the
 * first session's samples would otherwise each fault in a fresh page. */
struct ruby_stack {
  uint64_t hash, count;
  uint32_t pid, off, n;
};
struct ruby_stacks {
  struct ruby_stack *v;
  size_t cap, used;
  uint32_t *slots;
  size_t nslots;
  uint32_t *ids; /* frame ids of all stacks, leaf first */
  size_t ids_cap, ids_used;
};

int ruby_strings_init(struct ruby_strings *s, size_t arena_bytes);
void ruby_strings_free(struct ruby_strings *s);
void ruby_strings_clear(struct ruby_strings *s);
/* Interns len bytes; RUBY_NO_ID if the arena is full. */
uint32_t ruby_strings_intern(struct ruby_strings *s, const char *str, size_t len);
const char *ruby_strings_get(const struct ruby_strings *s, uint32_t id);

int ruby_frames_init(struct ruby_frames *f, size_t cap);
void ruby_frames_free(struct ruby_frames *f);
void ruby_frames_clear(struct ruby_frames *f);
uint32_t ruby_frames_add(struct ruby_frames *f, const struct ruby_frame *fr);

int ruby_cache_init(struct ruby_cache *c, size_t cap);
void ruby_cache_free(struct ruby_cache *c);
void ruby_cache_clear(struct ruby_cache *c);
uint32_t ruby_cache_get(const struct ruby_cache *c, uint32_t pid, uint64_t k1, uint64_t k2);
void ruby_cache_put(struct ruby_cache *c, uint32_t pid, uint64_t k1, uint64_t k2, uint32_t val);
/* Forgets every entry of a pid (the process is gone or was reused). */
void ruby_cache_forget_pid(struct ruby_cache *c, uint32_t pid);

int ruby_stacks_init(struct ruby_stacks *st, size_t cap, size_t ids_cap);
void ruby_stacks_free(struct ruby_stacks *st);
void ruby_stacks_clear(struct ruby_stacks *st);
/* Counts one observation; -ENOSPC if full. */
int ruby_stacks_add(struct ruby_stacks *st, uint32_t pid, const uint32_t *ids, uint32_t n,
                    uint64_t count);

#endif
