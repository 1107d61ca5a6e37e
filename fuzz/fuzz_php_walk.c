/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the php plugin's stack walk (plugins/php/php_walk.c) over
 * a memory image (fuzz_memimage.h) standing for a PHP process: from
 * executor_globals, the chain of execute_data frames, their functions,
 * class and function names, files, opcodes and lines, all read from the
 * target. Walked twice: the second walk reads the VM stack window around
 * the first walk's leaf in one go, as sampling does. Seeds are images
 * recorded from a real PHP 8.2 CLI process (seed_php_image).
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "fuzz_memimage.h"
#include "fuzz_php_walk.h"
#include "php.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct php_image_hdr h;
  if (!pp_fuzz_image_load(data, size, sizeof(h))) return 0;
  memcpy(&h, data, sizeof(h));
  const struct php_layout *l = php_layout_find(h.major, h.minor);
  if (l) {
    struct php_attach a = {.eg_addr = h.eg_addr, .layout = l, .major = h.major, .minor = h.minor};
    struct php_walker *w = php_walker_new(64, 32);
    if (!w) abort();
    for (int i = 0; i < 2; i++) {
      const struct pp_frame *frames;
      uint32_t n = 0;
      int rc = php_walk(w, 4242, &a, &frames, &n);
      if (rc != PHP_WALK_OK && rc != PHP_WALK_TRUNCATED) continue;
      if (n > 32) abort();
      for (uint32_t k = 0; k < n; k++) {
        if (!frames[k].name) abort();
        (void)strlen(frames[k].name);
        if (frames[k].file) (void)strlen(frames[k].file);
      }
    }
    (void)php_walker_take_stale_lines(w);
    php_walker_free(w);
  }
  pp_fuzz_image_unload();
  return 0;
}
