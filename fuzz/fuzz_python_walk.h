/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The header of a python_walk memory image (fuzz_memimage.h): what
 * locating CPython found in the process the image was recorded from.
 */
#ifndef PP_FUZZ_PYTHON_WALK_H
#define PP_FUZZ_PYTHON_WALK_H

#include <stdint.h>

struct py_image_hdr {
  uint8_t major, minor, micro, pad[5];
  uint64_t runtime, interp_head, tstate_cur, pycode_type, map_lo, map_hi;
};

#endif
