/* SPDX-License-Identifier: Apache-2.0 */
/* Agent isolation test plugin: covers `sleep` processes; fault: a system
 * call outside its allow-list in the first snapshot (its worker must be
 * stopped with a log line naming the call, and restarted). */
#define TA_NAME "ta_syscall"
#define TA_EXE "sleep"
#include "ta_common.h"

static int snapshot(void *state, struct pp_sink *sink) {
  return ta_snapshot_impl(state, sink, TA_FAULT_SYSCALL);
}

TA_DESCRIPTOR(snapshot)
