/* SPDX-License-Identifier: Apache-2.0 */
/* Agent isolation test plugin: covers `sleep` processes; fault: CRASH. */
#define TA_NAME "ta_crash"
#define TA_EXE "sleep"
#include "ta_common.h"

static int snapshot(void *state, struct pp_sink *sink) {
  return ta_snapshot_impl(state, sink, TA_FAULT_CRASH);
}

TA_DESCRIPTOR(snapshot)
