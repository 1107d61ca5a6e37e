/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kit's clock (log.h): out of line, so the public header needs no POSIX
 * feature macros from the plugin that includes it.
 */
#include <time.h>

#include "polyprof/kit/log.h"

uint64_t pp_clock_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t pp_clock_realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
