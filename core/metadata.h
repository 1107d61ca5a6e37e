/*
 * The .col header (line 0 JSON) and its "metadata" object: system facts
 * computed once at start (kernel, CPUs, memory, hostname, OS, libc, agent
 * version, spawn time...) plus per-session fields; host metrics cpu_avg /
 * mem_avg. Key order and names follow gprofiler-internals.md §2.2-2.3.
 */
#ifndef PP_METADATA_H
#define PP_METADATA_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include <jansson.h>

#include "config.h"

/* Static system metadata, computed once. Never contains the upload token. */
json_t *pp_metadata_system(const struct pp_config *cfg, time_t spawn_time);

struct pp_metrics;
struct pp_metrics *pp_metrics_new(void);
void pp_metrics_free(struct pp_metrics *m);
/* Call every few seconds during a session (memory samples). */
void pp_metrics_sample(struct pp_metrics *m);
/* Averages since the last call (cpu % of all CPUs, mem % used); resets. */
void pp_metrics_session(struct pp_metrics *m, double *cpu_avg, double *mem_avg);

struct pp_header_args {
  const struct pp_config *cfg;
  json_t *system_metadata; /* from pp_metadata_system (borrowed) */
  json_t *containers;      /* borrowed */
  json_t *app_meta_list;   /* borrowed */
  double cpu_avg, mem_avg; /* < 0: null */
  time_t start_time, end_time;
  json_t *plugin_stats; /* polyprof extension, borrowed, may be NULL */
};

/* Build the header object in gProfiler's key order; caller owns it. */
json_t *pp_col_header(const struct pp_header_args *a);
/* json_dumps in Python json.dumps style (", " / ": ", ASCII-escaped). */
char *pp_json_dumps_python(const json_t *j);
/* "2026-11-22T03:50:00" */
void pp_iso_time(time_t t, char *buf, size_t len);

/* polyprof additions (enrich branch): */
/* Python's repr() of a float ("12.5", "1e-05", "3.0") into buf; NULL on OOM. */
char *pp_json_real_repr(double d, char *buf, size_t len);
/* A JSON string from bytes another process controls: invalid UTF-8 bytes
 * become U+FFFD so every JSON writer accepts the value. */
json_t *pp_json_string_lossy(const char *s, size_t len);

#endif
