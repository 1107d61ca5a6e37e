/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: JIT perf-map files (/tmp/perf-PID.map), written by the
 * profiled process and so hostile. Parses with and without an entry cap and
 * looks up addresses taken from the input itself, around every entry.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "polyprof/kit/perfmap.h"

static void probe(const struct pp_perfmap *m, const uint8_t *data, size_t size) {
  uint64_t start;
  (void)pp_perfmap_lookup(m, 0, &start);
  (void)pp_perfmap_lookup(m, UINT64_MAX, &start);
  for (size_t i = 0; i + 8 <= size && i < 256; i += 8) {
    uint64_t a;
    memcpy(&a, data + i, 8);
    const char *name = pp_perfmap_lookup(m, a, &start);
    if (name) (void)strlen(name);
  }
  (void)pp_perfmap_count(m);
  (void)pp_perfmap_bytes(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct pp_perfmap *m = NULL;
  if (pp_perfmap_parse((const char *)data, size, 0, &m) == 0 && m) {
    probe(m, data, size);
    pp_perfmap_free(m);
  }
  m = NULL;
  if (pp_perfmap_parse((const char *)data, size, 3, &m) == 0 && m) {
    if (pp_perfmap_count(m) > 3) abort(); /* the cap is a memory bound */
    probe(m, data, size);
    pp_perfmap_free(m);
  }
  /* the file path: size cap and read loop */
  char path[64];
  if (pp_fuzz_memfd(data, size, path, sizeof(path)) < 0) abort();
  m = NULL;
  if (pp_perfmap_load(path, 4096, 0, &m) == 0 && m) pp_perfmap_free(m);
  return 0;
}
