/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the IPC profile codec (core/profile_codec.c). Plugin workers
 * are untrusted (a plugin may be buggy or its process taken over), so the
 * core decodes whatever a worker sends. A decoded profile goes on to the
 * merge and the writers, so it is re-encoded, decoded again (must succeed
 * and give the same totals) and written as .col.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "ipc.h"
#include "output/col.h"
#include "profile.h"
#include "profile_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct pp_profile *p = pp_profile_new(), *q = pp_profile_new();
  if (!p || !q) abort();
  if (pp_profile_decode(p, data, size) == 0) {
    struct pp_wbuf b;
    pp_wbuf_init(&b);
    if (pp_profile_encode(p, &b) == 0) {
      if (pp_profile_decode(q, b.data, b.len) != 0) abort(); /* our own encoding must decode */
      if (pp_profile_total(q) != pp_profile_total(p) ||
          pp_profile_stack_count(q) != pp_profile_stack_count(p))
        abort();
    }
    pp_wbuf_free(&b);
    pp_col_write(pp_fuzz_devnull(), p, "{}", NULL);
  }
  pp_profile_free(q);
  pp_profile_free(p);
  return 0;
}
