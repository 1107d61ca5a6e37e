/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The facts behind the .col header's "metadata" object: system facts
 * computed once at start (kernel, CPUs, memory, hostname, OS, libc, agent
 * version, spawn time...) and host metrics cpu_avg / mem_avg. Key names
 * follow gProfiler's (docs/formats.md); the header itself, with the
 * per-session fields, is built by output/col_header.h.
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
