/* SPDX-License-Identifier: Apache-2.0 */
/*
 * V8 cpuprofile (CDP Profiler.Profile) -> aggregated JS stacks.
 */
#ifndef POLYPROF_NODEJS_CPUPROFILE_H
#define POLYPROF_NODEJS_CPUPROFILE_H

#include <jansson.h>
#include <stdint.h>

#include "polyprof/plugin.h"

struct nodejs_collapse_opts {
  uint32_t max_depth; /* frames kept per stack (leaf side) */
  uint32_t max_nodes; /* larger profiles are refused */
  int include_idle;   /* keep "(idle)" samples */
};

struct nodejs_collapse_stats {
  uint64_t samples;   /* samples turned into stacks */
  uint64_t dropped;   /* samples naming no known node, or idle */
  uint64_t truncated; /* stacks cut at max_depth */
  uint32_t nodes;
};

/* Called once per distinct call-tree node that has samples: frames[0] is
 * the leaf; strings live until the callback returns. */
typedef void (*nodejs_stack_fn)(void *ctx, const struct pp_frame *frames, uint32_t nframes,
                                uint64_t count);

/* Walks profile.nodes / profile.samples and calls fn per stack. Returns 0,
 * or -EPROTO (with a reason in err) when the profile is malformed, -E2BIG
 * when it has more than max_nodes nodes. Counts are samples, not time. */
int nodejs_cpuprofile_collapse(const json_t *profile, const struct nodejs_collapse_opts *opts,
                               nodejs_stack_fn fn, void *ctx, struct nodejs_collapse_stats *stats,
                               char *err, size_t errlen);

#endif
