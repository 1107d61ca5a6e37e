/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Agent fault test plugin: covers `tee` processes and hangs inside tick(),
 * i.e. in the middle of a session while no request is outstanding, which
 * only the supervisor's idle PING can notice. It hangs twice (after
 * HANG_AFTER_TICKS ticks of a worker's life), recorded by the marker files
 * <fault_file>.1 and <fault_file>.2, so a test sees two restarts with
 * growing backoff, then a worker that behaves and delivers data.
 */
#define TA_NAME "ta_tickhang"
#define TA_EXE "tee"
#define TA_TICK_FN ta_tickhang_tick
#include <stdint.h>
static int ta_tickhang_tick(void *state, uint64_t now);
#include "ta_common.h"

#define HANG_AFTER_TICKS 10 /* 0.5 s at the 50 ms tick of ta_common.h */

/* Creates the first missing marker of the two; true if one was created. */
static int ta_tickhang_claim(const struct ta_state *s) {
  char path[4096];
  for (int i = 1; i <= 2; i++) {
    if (ta_fault_path(s, i == 1 ? ".1" : ".2", path, sizeof(path)) < 0) return 0;
    int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0600);
    if (fd >= 0) {
      close(fd);
      return 1;
    }
  }
  return 0;
}

static int ta_tickhang_tick(void *state, uint64_t now) {
  static uint64_t lifetime_ticks;
  struct ta_state *s = state;
  if (++lifetime_ticks == HANG_AFTER_TICKS && s->fault_file && ta_tickhang_claim(s)) {
    for (;;)
      pause();
  }
  return ta_tick(state, now);
}

static int snapshot(void *state, struct pp_sink *sink) {
  return ta_snapshot_impl(state, sink, TA_FAULT_NONE);
}

TA_DESCRIPTOR(snapshot)
