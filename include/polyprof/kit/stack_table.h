/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The stack table: (pid, tid, comm, frames) -> count, for everything a
 * plugin samples between two snapshots, emitted to the sink in one call.
 *
 * Strings (frame names, files, thread names) are interned per session:
 * each distinct string is stored once however many samples repeat it, and
 * the caller's buffers need only live for the add() call. Memory is
 * bounded by the limits given at creation; what does not fit is counted as
 * dropped (reported as the counter "dropped_stacks"), never allocated. The
 * tables grow by doubling up to their limit, so after the first sessions
 * an add() allocates nothing.
 */
#ifndef POLYPROF_KIT_STACK_TABLE_H
#define POLYPROF_KIT_STACK_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "polyprof/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

struct pp_stack_table_limits {
  size_t max_stacks;       /* distinct stacks per session (0: 65536) */
  size_t max_string_bytes; /* interned text per session (0: 16 MiB) */
  size_t max_frame_refs;   /* frames summed over distinct stacks (0: 4 Mi) */
  uint32_t max_depth;      /* frames kept per stack, leaf side (0: 1024); deeper: truncated */
};

struct pp_stack_table;

struct pp_stack_table *pp_stack_table_new(const struct pp_stack_table_limits *limits);
void pp_stack_table_free(struct pp_stack_table *t);

/* Counts one stack (frames[0] is the leaf). comm NULL: the process's comm.
 * Returns 0, or -ENOSPC when a limit is reached (counted as dropped). A
 * stack deeper than max_depth keeps its leaf-side frames and is counted as
 * truncated ("truncated_stacks"). */
int pp_stack_table_add(struct pp_stack_table *t, uint32_t pid, uint32_t tid, const char *comm,
                       const struct pp_frame *frames, uint32_t nframes, uint64_t count);
/* The same for a sample of profile type `type` (enum pp_profile_type):
 * the same stack of two types is two entries, each emitted with its type.
 * pp_stack_table_add is this with PP_PROFILE_CPU. */
int pp_stack_table_add_typed(struct pp_stack_table *t, uint32_t type, uint32_t pid, uint32_t tid,
                             const char *comm, const struct pp_frame *frames, uint32_t nframes,
                             uint64_t count);

/* Emits every stack to the sink, adds the counters, and empties the table
 * for the next session (its memory is kept). Returns the number emitted. */
size_t pp_stack_table_emit(struct pp_stack_table *t, const struct pp_host *host,
                           struct pp_sink *sink);

/* Empties the table without emitting (a session thrown away). */
void pp_stack_table_clear(struct pp_stack_table *t);

size_t pp_stack_table_count(const struct pp_stack_table *t);     /* distinct stacks now */
uint64_t pp_stack_table_samples(const struct pp_stack_table *t); /* sum of counts now */
uint64_t pp_stack_table_dropped(const struct pp_stack_table *t); /* this session */
size_t pp_stack_table_bytes(const struct pp_stack_table *t);     /* memory held */

#ifdef __cplusplus
}
#endif

#endif
