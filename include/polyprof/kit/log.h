/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Logging through the host, and the clock. The host prefixes every line
 * with the plugin's name and filters by level; a plugin never writes to
 * stderr itself (its worker's stderr is not the agent's log).
 */
#ifndef POLYPROF_KIT_LOG_H
#define POLYPROF_KIT_LOG_H

#include <stdint.h>

#include "polyprof/plugin.h"

#define PP_LOG(host, level, ...) ((host)->log((host), (level), __VA_ARGS__))
#define PP_DEBUG(host, ...) PP_LOG((host), PP_LOG_DEBUG, __VA_ARGS__)
#define PP_INFO(host, ...) PP_LOG((host), PP_LOG_INFO, __VA_ARGS__)
#define PP_WARNING(host, ...) PP_LOG((host), PP_LOG_WARNING, __VA_ARGS__)
#define PP_ERROR(host, ...) PP_LOG((host), PP_LOG_ERROR, __VA_ARGS__)

/* CLOCK_MONOTONIC in ns: the same clock as host->monotonic_ns, without a
 * call through the host (so code without a host, such as a sampler thread
 * or a benchmark, reads the same time). vDSO, async-signal-safe. */
uint64_t pp_clock_ns(void);

/* CLOCK_REALTIME in ns (wall-clock time for timestamps in metadata). */
uint64_t pp_clock_realtime_ns(void);

#endif
