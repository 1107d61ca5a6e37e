/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the /proc/kallsyms loader (the file comes from the kernel,
 * but the parser is also pointed at copies and must hold on any text), with
 * lookups at addresses taken from the input.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "polyprof/kit/kallsyms.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[64];
  if (pp_fuzz_memfd(data, size, path, sizeof(path)) < 0) abort();
  struct pp_kallsyms *k = NULL;
  if (pp_kallsyms_load(path, &k) == 0 && k) {
    uint64_t start;
    const char *module;
    (void)pp_kallsyms_lookup(k, 0, &start, &module);
    (void)pp_kallsyms_lookup(k, UINT64_MAX, &start, &module);
    for (size_t i = 0; i + 8 <= size && i < 256; i += 8) {
      uint64_t a;
      memcpy(&a, data + i, 8);
      const char *name = pp_kallsyms_lookup(k, a, &start, &module);
      if (name) (void)strlen(name);
      if (module) (void)strlen(module);
    }
    (void)pp_kallsyms_count(k);
    (void)pp_kallsyms_bytes(k);
    pp_kallsyms_free(k);
  }
  return 0;
}
