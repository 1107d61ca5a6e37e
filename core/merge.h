/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The merge stage (gProfiler's rule; docs/gprofiler-compat.md):
 * perf (system-wide) stacks are the base; for each pid a runtime plugin
 * covered, its stacks replace perf's, scaled so the pid's total equals perf's
 * sample count for it (largest-remainder rounding: deterministic, exact
 * totals); where perf has no samples for the pid, runtime stacks are kept
 * unscaled. A pid whose runtime status is error/skipped keeps perf's stacks
 * with a "[Profiling error: ...]" frame inserted right after the comm frame
 * (dropped if perf has none). Without a base (perf-less) the runtime profiles
 * are concatenated unscaled and error pids become "comm;[Profiling ...] 1".
 */
#ifndef PP_MERGE_H
#define PP_MERGE_H

#include <stddef.h>

#include "profile.h"

struct pp_merge_source {
  const char *plugin;               /* plugin name, for logs */
  const struct pp_profile *profile; /* that plugin's snapshot */
};

/* `out` is cleared first. `base` may be NULL (perf-less mode). Pid records
 * (comm, appid, app metadata, container, status) are carried over; the
 * runtime's record wins over perf's except for an empty container. Counters
 * are not merged. 0 or -ENOMEM. */
int pp_merge(struct pp_profile *out, const struct pp_profile *base,
             const struct pp_merge_source *runtimes, size_t n);

/* Scale counts so they sum to `target` using largest remainder. `counts`
 * sums to `total` (> 0). Exposed for tests and smart perf mode. */
void pp_scale_counts(uint64_t *counts, size_t n, uint64_t total, uint64_t target);

#endif
