/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pyroscope push: each session goes to <pyroscope-url>/ingest as
 * application name "<service>.<type>" (service name, else "polyprof";
 * type cpu, wall, off_cpu or alloc_space, which Pyroscope makes __name__) with
 * labels {hostname, container, runtime}. Folded format (default) sends one
 * request per (container, runtime) group so each carries its own labels;
 * pprof format sends the whole session once with the hostname label.
 * Delivery goes through the uploader thread (retries, no spool).
 */
#ifndef PP_UPLOAD_PYROSCOPE_H
#define PP_UPLOAD_PYROSCOPE_H

#include <time.h>

#include "config.h"
#include "profile.h"

struct pp_uploader;

void pp_pyroscope_push(const struct pp_config *cfg, struct pp_uploader *u,
                       const struct pp_profile *p, time_t start, time_t end, unsigned type);

/* Runtime of a pid's stacks for the "runtime" label: "python", "java",
 * "ruby", "php", "dotnet", "nodejs" or "native". */
const char *pp_pyroscope_runtime(unsigned frame_kind);

#endif
