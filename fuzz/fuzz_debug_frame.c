/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: a .debug_frame section (sdk/debug_frame.c), read
 * from the object files of profiled processes, converted into the
 * .eh_frame_hdr-style table and .eh_frame records the remote unwinder
 * searches. The output is then checked as libunwind will read it: a
 * sorted table whose every FDE offset lands inside the output, on a
 * record whose length and CIE pointer stay inside it too.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "polyprof/kit/debug_frame.h"

static uint32_t u32_at(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

static void check(const struct pp_debug_frame *d, uint64_t base) {
  if (d->vaddr != base || d->nentries == 0 || d->nentries * 8 > d->size) abort();
  int64_t prev = INT64_MIN;
  for (size_t i = 0; i < d->nentries; i++) {
    int32_t pair[2];
    memcpy(pair, d->data + i * 8, 8);
    if ((int64_t)pair[0] < prev) abort(); /* libunwind's search is a binary one */
    prev = pair[0];
    if (pair[1] < 0 || (size_t)pair[1] < d->nentries * 8 || (size_t)pair[1] + 12 > d->size) abort();
    size_t fde = (size_t)pair[1];
    uint32_t len = u32_at(d->data + fde);
    if (len < 8 || len > d->size - fde - 4) abort();
    uint32_t back = u32_at(d->data + fde + 4); /* to its CIE, from this field */
    if (back == 0 || back > fde + 4 - d->nentries * 8) abort();
    size_t cie = fde + 4 - back;
    if (cie + 8 > d->size || u32_at(d->data + cie + 4) != 0) abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* just past a small executable's last PT_LOAD, and far from its code
   * (every entry then out of 32-bit reach) */
  static const uint64_t bases[] = {0x10000, 0x400000, 0x7f0000000000ull};
  for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
    struct pp_debug_frame d;
    int rc = pp_debug_frame_convert(data, size, bases[i], &d);
    if (rc == 0) {
      check(&d, bases[i]);
      free(d.data);
    } else if (rc != -ENOENT && rc != -ENOMEM) {
      abort();
    } else if (d.data) {
      abort();
    }
  }
  return 0;
}
