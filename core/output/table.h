/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Text outputs of the one-program commands (run -- CMD, attach):
 *
 * - table: one row per function (name, file and runtime), like Python's
 *   pstats: self and total samples with their shares of all samples and the
 *   time they stand for at the sampling rate, sorted, limited, then the hot
 *   spots in one line. A row's time is its share of the session (all
 *   samples stand for the whole of it, however they were scaled); counts
 *   of another unit (bytes of an allocation profile, microseconds off the
 *   CPU) are named by it and have no time column of shares. Rows are "SELF SELF% TOTAL TOTAL%
 * SECONDS  FUNCTION" so a script can split the first five columns off.
 * - collapsed: "comm;root;...;leaf count" lines, nothing else (no header, no
 *   index, container or appid prefix), for flamegraph.pl and speedscope.
 */
#ifndef PP_OUTPUT_TABLE_H
#define PP_OUTPUT_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "profile.h"

enum pp_table_sort { PP_TABLE_SORT_SELF, PP_TABLE_SORT_TOTAL, PP_TABLE_SORT_NAME };

struct pp_table_opts {
  enum pp_table_sort sort;
  size_t limit;      /* rows; 0: all */
  double duration_s; /* the time column: a row's share of it; 0: no times */
  const char *unit;  /* what the counts are (the profile type's unit); NULL: "samples" */
};

/* "self", "total", "name" -> 0 and *out; -1 for anything else. */
int pp_table_sort_parse(const char *s, enum pp_table_sort *out);

/* only_pid: that process's stacks alone (0: all). 0 or -errno (-ENOMEM, or
 * the stream's error). */
int pp_table_write(FILE *f, const struct pp_profile *p, const struct pp_table_opts *o,
                   uint32_t only_pid);
int pp_collapsed_write(FILE *f, const struct pp_profile *p, uint32_t only_pid);

#endif
