/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Struct offsets per PHP minor version (x86_64), from phpspy's
 * gdb-generated struct headers (one per PHP version). Only 8.2 was checked
 * against a live process here (Debian 12's php8.2); the others are taken
 * from those headers as data and flagged untested.
 *
 * op_array.last / opcodes are not in those headers (phpspy never reads them):
 * they follow from the zend_op_array declaration of each series (7.0 has
 * this_var before last; 7.1-7.2 put last before opcodes; 7.3-8.1 have
 * cache_size, last_var, T, last, opcodes after the common part; 8.2+ moved
 * T (and 8.2 run_time_cache) into the common part), and each derivation is
 * consistent with the headers' last_var and vars offsets.
 * tests/unit/test_php_offsets.c pins every number.
 */
#include "php.h"

#include <stddef.h>

/* zend_execute_data is copied up to and including prev_execute_data */
#define ED_SIZE 72

/* clang-format off */
static const struct php_layout layouts[] = {
    /* M  m  EG.ced  ed: opline func prev size  op: last opcodes filename line_start size  tested */
    {7, 0, 480, 0, 24, 56, ED_SIZE, 60,  64, 120, 128, 136, 0},
    {7, 1, 480, 0, 24, 48, ED_SIZE, 56,  64, 120, 128, 136, 0},
    {7, 2, 480, 0, 24, 48, ED_SIZE, 56,  64, 120, 128, 136, 0},
    {7, 3, 488, 0, 24, 48, ED_SIZE, 60,  64, 128, 136, 144, 0},
    {7, 4, 488, 0, 24, 48, ED_SIZE, 60,  64, 136, 144, 152, 0},
    {8, 0, 488, 0, 24, 48, ED_SIZE, 68,  72, 144, 152, 160, 0},
    {8, 1, 488, 0, 24, 48, ED_SIZE, 68,  72, 144, 152, 160, 0},
    {8, 2, 488, 0, 24, 48, ED_SIZE, 80,  88, 152, 160, 168, 1},
    {8, 3, 488, 0, 24, 48, ED_SIZE, 76,  80, 144, 152, 160, 0},
    {8, 4, 488, 0, 24, 48, ED_SIZE, 96, 104, 168, 176, 184, 0},
    {8, 5, 512, 0, 24, 48, ED_SIZE, 96, 104, 168, 176, 184, 0},
};
/* clang-format on */

const struct php_layout *php_layout_find(int major, int minor) {
  for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
    if (layouts[i].major == major && layouts[i].minor == minor) return &layouts[i];
  return NULL;
}

const char *php_layout_versions(void) {
  return "7.0-7.4, 8.0-8.5";
}
