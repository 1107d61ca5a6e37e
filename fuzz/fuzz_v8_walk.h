/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The header of a v8_walk memory image (fuzz_memimage.h): the V8 layout
 * attaching read from the process's post-mortem metadata, and the
 * registers of the sample. The copied stack follows it as one segment
 * (u64 stack pointer, u32 length, the bytes); the segments after that are
 * the heap.
 */
#ifndef PP_FUZZ_V8_WALK_H
#define PP_FUZZ_V8_WALK_H

#include <stdint.h>

#include "v8_layout.h"

struct v8_image_hdr {
  struct v8_layout L;
  uint64_t bp, ip;
};

#endif
