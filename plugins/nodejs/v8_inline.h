/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The JavaScript functions that V8's optimizing compilers (TurboFan,
 * Maglev) inlined into an optimized frame, at the instruction it was
 * executing: the frame walk gives one physical frame per optimized
 * function, and the functions inlined into it would otherwise vanish from
 * the profile (their time shown as the caller's own).
 *
 * From the frame's JSFunction: its Code; if that is optimized code whose
 * instructions hold the pc, the Code's source position table maps the pc
 * offset to a source position whose inlining id indexes the
 * DeoptimizationData's inlining positions, each naming an inlined
 * function (a SharedFunctionInfo in the deoptimization literals) and the
 * position it was inlined at, whose own inlining id leads outwards.
 *
 * The tables of the last few Code objects are cached, keyed by process,
 * Code address, instruction start and size (all re-read from the Code with
 * each sample, so a Code that moved or was replaced is read again).
 */
#ifndef POLYPROF_NODEJS_V8_INLINE_H
#define POLYPROF_NODEJS_V8_INLINE_H

#include <stddef.h>
#include <stdint.h>

#include "v8_layout.h"

#define V8_MAX_INLINED 32 /* inlined functions per optimized frame */

/* What kind of heap code a frame runs. */
enum v8_tier {
  V8_TIER_UNKNOWN = 0, /* no Code holds the pc (or its header did not read) */
  V8_TIER_BASELINE,    /* Sparkplug */
  V8_TIER_OPTIMIZED,   /* Maglev or TurboFan */
  V8_TIER_OTHER,       /* another kind (a builtin, regexp code...) */
};

/* The SharedFunctionInfos (tagged) of the functions inlined at pc in the
 * frame whose function's code is code (tagged), innermost first, the
 * frame's own function not included, and in *tier the kind of the Code
 * whose instructions hold pc (the function's, or one found by address).
 * is_return: pc is a return address (the call is the instruction before).
 * Returns their count: 0 when the code is not optimized, does not hold pc
 * or inlined nothing there (or its tables did not check out). The Codes
 * found are cached, interpreted and baseline ones too. */
int v8_inlined_at(uint32_t pid, const struct v8_layout *L, uint64_t code, uint64_t pc,
                  int is_return, uint64_t *sfis, int max, int *tier);

/* The tier of Code code (tagged), e.g. a function's current code. */
int v8_code_tier(uint32_t pid, const struct v8_layout *L, uint64_t code);

/* The source position recorded for code offset `off` in a V8 source
 * position table (zigzag VLQ pairs of code and position deltas), or -1 if
 * the table is malformed before it gets there. Exposed for the fuzzer. */
int64_t v8_position_at(const uint8_t *table, size_t len, uint64_t off);

/* Forgets what is cached about process pid (it exited). */
void v8_inline_forget(uint32_t pid);

#endif
