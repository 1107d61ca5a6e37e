/*
 * Struct offsets per PHP minor version (x86_64), from the table in
 * reference/php-ruby-remote.md §2.3 (phpspy's gdb-generated headers). Only
 * 8.2 was checked against a live process here (Debian 12's php8.2); the
 * others are taken from the table as data and flagged untested.
 */
#include "php.h"

#include <stddef.h>

/* zend_execute_data is copied up to and including prev_execute_data */
#define ED_SIZE 72

static const struct php_layout layouts[] = {
    {7, 0, 480, 0, 24, 56, ED_SIZE, 120, 128, 136, 0},
    {7, 1, 480, 0, 24, 48, ED_SIZE, 120, 128, 136, 0},
    {7, 2, 480, 0, 24, 48, ED_SIZE, 120, 128, 136, 0},
    {7, 3, 488, 0, 24, 48, ED_SIZE, 128, 136, 144, 0},
    {7, 4, 488, 0, 24, 48, ED_SIZE, 136, 144, 152, 0},
    {8, 0, 488, 0, 24, 48, ED_SIZE, 144, 152, 160, 0},
    {8, 1, 488, 0, 24, 48, ED_SIZE, 144, 152, 160, 0},
    {8, 2, 488, 0, 24, 48, ED_SIZE, 152, 160, 168, 1},
    {8, 3, 488, 0, 24, 48, ED_SIZE, 144, 152, 160, 0},
    {8, 4, 488, 0, 24, 48, ED_SIZE, 168, 176, 184, 0},
    {8, 5, 512, 0, 24, 48, ED_SIZE, 168, 176, 184, 0},
};

const struct php_layout *php_layout_find(int major, int minor) {
  for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
    if (layouts[i].major == major && layouts[i].minor == minor) return &layouts[i];
  return NULL;
}

const char *php_layout_versions(void) {
  return "7.0-7.4, 8.0-8.5";
}
