/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Firefox Profiler writer: the profiler's processed format (the one it
 * stores and loads without a symbolication step), written straight from
 * pp_profile.
 *
 * One thread per (pid, comm of the stack), as the flame graph groups them;
 * the process is named after the pid's comm. Every frame kind maps to a
 * category per runtime (Native, Kernel, Python, Java with its compilation
 * tiers as subcategories, Ruby, PHP, .NET, JavaScript) plus GC for frames
 * known to be a runtime's collector. A profile is aggregated counts, not a
 * timeline: each distinct stack is one sample weighted by its count, laid
 * out back to back at the sampling interval, and the GC stacks of a thread
 * come last under one "GC" interval marker spanning them.
 */
#ifndef PP_OUTPUT_GECKO_H
#define PP_OUTPUT_GECKO_H

#include <stdio.h>
#include <time.h>

#include "profile.h"

struct pp_gecko_info {
  time_t start;        /* session start, 0 if unknown */
  int frequency;       /* Hz the samples were taken at, 0 if unknown */
  const char *product; /* shown as the profile's product, e.g. the input name */
};

/* 0 or -errno. */
int pp_gecko_write(FILE *f, const struct pp_profile *p, const struct pp_gecko_info *info);

#endif
