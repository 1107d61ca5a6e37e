/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the ruby plugin's walk of an execution context
 * (plugins/ruby: ruby_walk.c, ruby_iseq.c, ruby_objects.c, the frame
 * caches) over a memory image (fuzz_memimage.h) standing for a Ruby
 * process: the EC, its control frames, C frames' method entries through
 * their envs, iseqs (labels, paths, line tables), strings and symbols, all
 * read from the target. Walked twice, the second time from the caches the
 * first filled. Every frame id handed back must name a frame. Seeds are
 * images recorded from a real Ruby process (seed_ruby_image).
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "fuzz_memimage.h"
#include "fuzz_ruby_walk.h"

static uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct ruby_image_hdr h;
  if (!pp_fuzz_image_load(data, size, sizeof(h))) return 0;
  memcpy(&h, data, sizeof(h));
  h.version[sizeof(h.version) - 1] = '\0';
  int patch_ok;
  const struct ruby_layout *L = ruby_layout_for(h.version, &patch_ok);
  struct ruby_state *st = L ? fuzz_ruby_state_new() : NULL;
  if (st) {
    struct ruby_target t = {.pid = 4242, .ns_pid = 4242, .L = L, .pthread_tid_off = -1};
    t.global_symbols = h.global_symbols;
    snprintf(t.version, sizeof(t.version), "%s", h.version);
    for (int i = 0; i < 2; i++) {
      bool truncated;
      int n = ruby_walk(st, &t, h.ec, &truncated);
      if (n > FUZZ_RUBY_DEPTH + 1) abort();
      for (int k = 0; k < n; k++) {
        if (st->ids[k] >= st->frames.n) abort();
        const struct ruby_frame *f = &st->frames.v[st->ids[k]];
        sink += strlen(ruby_strings_get(&st->strings, f->name));
        if (f->file != RUBY_NO_ID) sink += strlen(ruby_strings_get(&st->strings, f->file));
      }
    }
    fuzz_ruby_state_free(st);
  }
  pp_fuzz_image_unload();
  return 0;
}
