/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The .col header (line 0, "# " + JSON): gProfiler's keys in gProfiler's
 * order, then polyprof's additions (start_time, end_time, per-plugin stats).
 * The facts it carries are collected elsewhere (metadata.h, enrich.h); this
 * is where they are put in place.
 */
#ifndef PP_OUTPUT_COL_HEADER_H
#define PP_OUTPUT_COL_HEADER_H

#include <time.h>

#include <jansson.h>

#include "config.h"

struct pp_header_args {
  const struct pp_config *cfg;
  json_t *system_metadata; /* from pp_metadata_system (borrowed) */
  json_t *containers;      /* borrowed */
  json_t *app_meta_list;   /* borrowed */
  double cpu_avg, mem_avg; /* < 0: null */
  time_t start_time, end_time;
  json_t *plugin_stats; /* polyprof extension, borrowed, may be NULL */
};

/* The header object; caller owns it. NULL if a is NULL or out of memory. */
json_t *pp_col_header(const struct pp_header_args *a);
/* The header as the .col writer takes it: JSON text without "# ", in
 * Python's json.dumps style. malloc'd; NULL if out of memory. */
char *pp_col_header_text(const struct pp_header_args *a);

#endif
