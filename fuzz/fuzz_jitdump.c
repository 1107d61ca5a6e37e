/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: jitdump files (jit-PID.dump), written by the profiled
 * process and so hostile. Parses the input in one go, then again in two
 * pieces split at a point the input picks (the file as seen while the
 * runtime is still appending), and through a file in chunks (records bigger
 * than a chunk); all three must consume the same bytes and the split read
 * must find the same symbols. Lookups at addresses taken from the input.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "polyprof/kit/jitdump.h"

static void probe(const struct pp_jitdump *j, const uint8_t *data, size_t size) {
  const struct pp_perfmap *m = pp_jitdump_map(j);
  uint64_t start;
  (void)pp_perfmap_lookup(m, 0, &start);
  (void)pp_perfmap_lookup(m, UINT64_MAX, &start);
  for (size_t i = 0; i + 8 <= size && i < 512; i += 8) {
    uint64_t a;
    memcpy(&a, data + i, 8);
    const char *name = pp_perfmap_lookup(m, a, &start);
    if (name && strlen(name) > PP_JITDUMP_NAME_MAX) abort(); /* names are bounded */
  }
  (void)pp_perfmap_bytes(m);
}

static struct pp_jitdump *fresh(size_t max_bytes) {
  struct pp_jitdump *j = NULL;
  if (pp_jitdump_new(max_bytes, &j) < 0) abort();
  return j;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* a byte budget the input picks, often none */
  size_t budget = size && data[size - 1] < 64 ? (size_t)data[size - 1] * 97 : 0;
  struct pp_jitdump *whole = fresh(budget);
  int rc_whole = pp_jitdump_parse(whole, data, size);
  probe(whole, data, size);

  struct pp_jitdump *split = fresh(budget);
  size_t cut = size ? (size_t)data[0] * 131 % (size + 1) : 0;
  int a = pp_jitdump_parse(split, data, cut);
  uint64_t off = pp_jitdump_offset(split);
  if (off > cut) abort();
  int b = pp_jitdump_parse(split, data + off, size - off);
  if (pp_jitdump_offset(split) != pp_jitdump_offset(whole)) abort();
  if ((b < 0) != (rc_whole < 0)) abort();
  if (a >= 0 && b >= 0 && a + b != rc_whole) abort();
  if (pp_perfmap_count(pp_jitdump_map(split)) != pp_perfmap_count(pp_jitdump_map(whole))) abort();
  pp_jitdump_free(split);

  char path[64];
  int fd = pp_fuzz_memfd(data, size, path, sizeof(path));
  if (fd < 0) abort();
  struct pp_jitdump *file = fresh(budget);
  (void)pp_jitdump_read_fd(file, fd, 0);
  if (pp_jitdump_offset(file) != pp_jitdump_offset(whole)) abort();
  probe(file, data, size);
  pp_jitdump_free(file);
  pp_jitdump_free(whole);
  return 0;
}
