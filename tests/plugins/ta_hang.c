/* SPDX-License-Identifier: Apache-2.0 */
/* Agent isolation test plugin: covers `tail` processes; fault: HANG. */
#define TA_NAME "ta_hang"
#define TA_EXE "tail"
#include "ta_common.h"

static int snapshot(void *state, struct pp_sink *sink) {
  return ta_snapshot_impl(state, sink, TA_FAULT_HANG);
}

TA_DESCRIPTOR(snapshot)
