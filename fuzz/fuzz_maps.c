/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: /proc/PID/maps text. Paths are whatever the process mapped,
 * newlines included. Runs the same stream reader pp_maps_read uses (long
 * lines, truncation, sorting) and the single-line parser with a tiny path
 * buffer, then lookups.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "polyprof/kit/maps.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* single line parser on a NUL-terminated copy, with a 4-byte path buffer */
  char *line = malloc(size + 1);
  if (!line) abort();
  memcpy(line, data, size);
  line[size] = '\0';
  struct pp_map m;
  char small[4];
  if (pp_maps_parse_line(line, &m, small, sizeof(small)) == 0 && m.path &&
      strlen(m.path) >= sizeof(small))
    abort();
  free(line);

  for (int only_exec = 0; only_exec <= 1; only_exec++) {
    FILE *f = fmemopen((void *)data, size ? size : 1, "r");
    if (!f) abort();
    if (!size) fseek(f, 1, SEEK_SET); /* fmemopen needs a non-empty buffer */
    struct pp_map *maps = NULL;
    size_t n = 0;
    if (pp_maps_read_stream(f, only_exec, only_exec ? 4 : 0, &maps, &n) == 0) {
      for (size_t i = 0; i < n; i++) {
        /* hostile maps may overlap: a lookup may miss, never read astray */
        long at = pp_maps_find(maps, n, maps[i].start);
        if (at >= (long)n) abort();
        if (maps[i].path) (void)strlen(maps[i].path);
      }
      (void)pp_maps_find(maps, n, 0);
      (void)pp_maps_find(maps, n, UINT64_MAX);
      pp_maps_free(maps, n);
    }
    fclose(f);
  }
  return 0;
}
