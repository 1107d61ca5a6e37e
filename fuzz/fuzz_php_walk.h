/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The header of a php_walk memory image (fuzz_memimage.h): what
 * attaching found in the process the image was recorded from.
 */
#ifndef PP_FUZZ_PHP_WALK_H
#define PP_FUZZ_PHP_WALK_H

#include <stdint.h>

struct php_image_hdr {
  uint8_t major, minor, pad[6];
  uint64_t eg_addr; /* executor_globals */
};

#endif
