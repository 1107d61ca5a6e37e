/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the ReadyToRun reader (sdk/pe_r2r.c with the PE, ECMA-335
 * metadata, NativeFormat and R2R signature decoders under it), which the
 * perf plugin runs on every .NET image a profiled process maps. Reads the
 * input as a file (fd, as perf's dso loader does), then looks up RVAs and
 * file offsets taken from the input and a sweep of the first code pages.
 * A refusal must say why; a table must be consistent.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "polyprof/kit/pe_r2r.h"

static void probe(const struct pp_r2r *t, const uint8_t *data, size_t size) {
  if (pp_r2r_count(t) > pp_r2r_blocks(t)) abort();
  (void)pp_r2r_bytes(t);
  (void)pp_r2r_skipped(t);
  for (size_t i = 0; i + 4 <= size && i < 2048; i += 4) {
    uint32_t v, rva = 0, start = 0;
    memcpy(&v, data + i, 4);
    const char *name = pp_r2r_lookup(t, v, &start);
    if (name && (strlen(name) == 0 || start > v)) abort();
    if (pp_r2r_offset_to_rva(t, v, &rva) == 0) {
      name = pp_r2r_lookup(t, rva, NULL);
      if (name) (void)strlen(name);
    }
  }
  for (uint32_t rva = 0; rva < (1u << 18); rva += 7) {
    uint32_t start = 0;
    const char *name = pp_r2r_lookup(t, rva, &start);
    if (name && (strlen(name) == 0 || start > rva)) abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[64];
  int fd = pp_fuzz_memfd(data, size, path, sizeof(path));
  if (fd < 0) abort();
  (void)pp_r2r_probe(fd);
  struct pp_r2r *t = NULL;
  char why[256];
  int rc = pp_r2r_load(fd, 64u << 20, &t, why, sizeof(why));
  if (rc == 0) {
    if (!t) abort();
    probe(t, data, size);
    pp_r2r_free(t);
  } else {
    if (t) abort();
    /* a refusal names its reason */
    if ((rc == -ENOEXEC || rc == -ENOTSUP || rc == -EFBIG) && !why[0]) abort();
  }
  return 0;
}
