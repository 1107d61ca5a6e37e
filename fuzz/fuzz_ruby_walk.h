/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ruby_walk memory image header (fuzz_memimage.h), and the part of the
 * plugin's state a walk uses, set up as ruby.c's init and start do (the
 * seed recorder and the fuzz target share it).
 */
#ifndef PP_FUZZ_RUBY_WALK_H
#define PP_FUZZ_RUBY_WALK_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ruby.h"

struct ruby_image_hdr {
  char version[24];        /* "3.1.2": picks the layout */
  uint64_t ec;             /* the execution context walked */
  uint64_t global_symbols; /* rb_symbols_t*, 0: C functions unnamed */
};

#define FUZZ_RUBY_DEPTH 64
#define FUZZ_RUBY_CACHE 256

static inline void fuzz_ruby_state_free(struct ruby_state *st) {
  free(st->cfp_buf);
  free(st->ids);
  free(st->eps);
  free(st->misses);
  free(st->out);
  ruby_iseqs_free(&st->iseqs);
  ruby_strings_free(&st->strings);
  ruby_frames_free(&st->frames);
  ruby_cache_free(&st->iseq_cache);
  ruby_cache_free(&st->cfunc_cache);
  free(st);
}

static inline struct ruby_state *fuzz_ruby_state_new(void) {
  struct ruby_state *st = calloc(1, sizeof(*st));
  if (!st) return NULL;
  st->max_depth = FUZZ_RUBY_DEPTH;
  st->cfunc_names = true;
  size_t cache = FUZZ_RUBY_CACHE, depth = FUZZ_RUBY_DEPTH;
  int rc = 0;
  rc |= ruby_strings_init(&st->strings, cache * 96);
  rc |= ruby_frames_init(&st->frames, cache * 2);
  rc |= ruby_cache_init(&st->iseq_cache, cache);
  rc |= ruby_cache_init(&st->cfunc_cache, cache / 4 + 64);
  rc |= ruby_iseqs_init(&st->iseqs, cache / 4 + 64);
  st->cfp_buf = malloc(depth * 64);
  st->ids = malloc((depth + 1) * sizeof(*st->ids));
  st->eps = malloc((depth + 1) * sizeof(*st->eps));
  st->misses = malloc((depth + 1) * sizeof(*st->misses));
  st->out = malloc((depth + 1) * sizeof(*st->out));
  if (rc || !st->cfp_buf || !st->ids || !st->eps || !st->misses || !st->out) {
    fuzz_ruby_state_free(st);
    return NULL;
  }
  const char *n = RUBY_CFUNC_UNKNOWN;
  struct ruby_frame fr = {.name = ruby_strings_intern(&st->strings, n, strlen(n)),
                          .file = RUBY_NO_ID,
                          .kind = PP_FRAME_NATIVE};
  st->unknown_cfunc_id = ruby_frames_add(&st->frames, &fr);
  return st;
}

#endif
