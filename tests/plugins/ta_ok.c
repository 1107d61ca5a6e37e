/* SPDX-License-Identifier: Apache-2.0 */
/* Agent isolation test plugin: covers `cat` processes; fault: NONE. */
#define TA_NAME "ta_ok"
#define TA_EXE "cat"
#include "ta_common.h"

static int snapshot(void *state, struct pp_sink *sink) {
  return ta_snapshot_impl(state, sink, TA_FAULT_NONE);
}

TA_DESCRIPTOR(snapshot)
