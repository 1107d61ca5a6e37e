/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pp_profile: the in-memory form of a set of stacks.
 *
 * Strings, frames and stacks are interned: each distinct string, frame
 * (name, file, line, kind) and stack (pid, comm, frames) is stored once and
 * referred to by a 32-bit id; adding an already-known stack only bumps its
 * count. Plugins' sinks, the IPC decoder, the merge stage and every writer
 * work on this one type, so a sample is never turned into text and back.
 *
 * Stacks are stored root-first (the order every output format wants).
 * Ids are dense and stable for the life of the profile (until clear()).
 */
#ifndef PP_PROFILE_H
#define PP_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "polyprof/plugin.h"

#define PP_NO_STR UINT32_MAX /* "no string" id */
#define PP_MAX_FRAMES 4096   /* deeper stacks are truncated at the root side */

struct pp_frame_rec {
  uint32_t name; /* string id */
  uint32_t file; /* string id or PP_NO_STR */
  uint32_t line;
  uint32_t kind; /* enum pp_frame_kind */
};

struct pp_stack_rec {
  uint32_t pid;
  uint32_t comm;  /* string id or PP_NO_STR (= the pid's comm) */
  uint32_t first; /* index into the frame-id pool (pp_profile_stack_frames) */
  uint32_t nframes;
  uint64_t count;
};

/* Facts about one pid in this profile. */
struct pp_pid_rec {
  uint32_t pid;
  uint32_t comm;           /* process comm, string id or PP_NO_STR */
  uint32_t appid;          /* string id or PP_NO_STR */
  uint32_t app_meta;       /* string id of a JSON object text, or PP_NO_STR */
  uint32_t container;      /* string id or PP_NO_STR */
  uint32_t status;         /* enum pp_pid_status */
  uint32_t reason;         /* string id or PP_NO_STR (status != OK) */
  uint32_t app_meta_index; /* filled by enrichment: index in the header table, 0 = none */
  uint64_t start_time;     /* /proc start time, 0 if unknown */
  uint64_t total;          /* sum of this pid's stack counts (maintained) */
};

struct pp_counter_rec {
  uint32_t name; /* string id */
  uint64_t value;
};

struct pp_profile;

struct pp_profile *pp_profile_new(void);
void pp_profile_free(struct pp_profile *p);
/* Forget everything but keep the allocated capacity. */
void pp_profile_clear(struct pp_profile *p);

/* Interning. Return the id, or PP_NO_STR / UINT32_MAX when out of memory. */
uint32_t pp_profile_intern(struct pp_profile *p, const char *s, size_t len);
uint32_t pp_profile_intern_cstr(struct pp_profile *p, const char *s); /* NULL -> PP_NO_STR */
uint32_t pp_profile_intern_frame(struct pp_profile *p, uint32_t name, uint32_t file, uint32_t line,
                                 uint32_t kind);

/* Add `count` to the stack (pid, comm, frames[0..n) root-first). Returns 0 or
 * -ENOMEM. Also creates the pid record if missing. */
int pp_profile_add_stack(struct pp_profile *p, uint32_t pid, uint32_t comm, const uint32_t *frames,
                         uint32_t n, uint64_t count);
/* Add a plugin sample (leaf-first frames with strings). */
int pp_profile_add_sample(struct pp_profile *p, const struct pp_sample *s);

/* Pid records. get() returns NULL if absent; upsert() creates one. Pointers
 * are invalidated by the next upsert/add. */
struct pp_pid_rec *pp_profile_pid(const struct pp_profile *p, uint32_t pid);
struct pp_pid_rec *pp_profile_pid_upsert(struct pp_profile *p, uint32_t pid);

/* Plugin-wide counters (added up). */
int pp_profile_add_counter(struct pp_profile *p, const char *name, uint64_t delta);

/* Read access. */
const char *pp_profile_str(const struct pp_profile *p, uint32_t id); /* "" for PP_NO_STR */
uint32_t pp_profile_str_len(const struct pp_profile *p, uint32_t id);
size_t pp_profile_str_count(const struct pp_profile *p);
const struct pp_frame_rec *pp_profile_frame(const struct pp_profile *p, uint32_t id);
size_t pp_profile_frame_count(const struct pp_profile *p);
size_t pp_profile_stack_count(const struct pp_profile *p);
const struct pp_stack_rec *pp_profile_stack(const struct pp_profile *p, size_t i);
const uint32_t *pp_profile_stack_frames(const struct pp_profile *p, const struct pp_stack_rec *s);
size_t pp_profile_pid_count(const struct pp_profile *p);
struct pp_pid_rec *pp_profile_pid_at(const struct pp_profile *p, size_t i); /* insertion order */
size_t pp_profile_counter_count(const struct pp_profile *p);
const struct pp_counter_rec *pp_profile_counter_at(const struct pp_profile *p, size_t i);
uint64_t pp_profile_total(const struct pp_profile *p); /* sum of all stack counts */

/* Approximate heap bytes held, for budgets and logs. */
size_t pp_profile_memory(const struct pp_profile *p);

/* Copy string `id` of `src` into `dst`, returning dst's id (PP_NO_STR stays). */
uint32_t pp_profile_import_str(struct pp_profile *dst, const struct pp_profile *src, uint32_t id);

#endif /* PP_PROFILE_H */
