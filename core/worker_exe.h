/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where the plugin worker executable (polyprof-worker) is.
 *
 * Order: the configured path (plugins.worker_path) if one is set, and only
 * that; else next to the agent's own executable (the build tree); else at
 * the install layout's place relative to the agent (a relocated install:
 * sbin/../lib/<arch>/polyprof/); else the compiled-in install path.
 */
#ifndef PP_WORKER_EXE_H
#define PP_WORKER_EXE_H

#include <stddef.h>

#define PP_WORKER_EXE_NAME "polyprof-worker"
#define PP_WORKER_EXE_MAX 4096

/* 0 and the absolute path in out, or -ENOENT (or the configured path's
 * error) with err naming every path tried and how to fix it. */
int pp_worker_exe_find(const char *configured, char *out, size_t cap, char *err, size_t errlen);

#endif
