/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: ELF facts and symbol tables (sdk/elf_symbols.c), the
 * code that opens every object a profiled process maps. Reads the input both
 * as a file (fd, as perf's dso loader does) and from memory (as the vDSO is),
 * then looks up addresses and file offsets taken from the input, and looks
 * names up (sdk/elf_lookup.c: the GNU hash table, then the symbol walk), as
 * the runtime plugins find an interpreter's globals.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "polyprof/kit/elf_lookup.h"
#include "polyprof/kit/elf_symbols.h"

static void probe(const struct pp_elf_info *info, const struct pp_elf_symtab *t,
                  const uint8_t *data, size_t size) {
  char hex[2 * PP_ELF_BUILD_ID_MAX + 1];
  pp_elf_build_id_hex(info, hex, sizeof(hex));
  char tiny[3];
  pp_elf_build_id_hex(info, tiny, sizeof(tiny));
  if (strnlen(info->debuglink, sizeof(info->debuglink)) == sizeof(info->debuglink)) abort();
  if (strnlen(info->go_version, sizeof(info->go_version)) == sizeof(info->go_version)) abort();
  if (info->nloads > PP_ELF_MAX_LOADS || info->build_id_len > PP_ELF_BUILD_ID_MAX) abort();
  uint64_t start, vaddr;
  char name_buf[128];
  for (unsigned i = 0; i < info->nloads; i++) {
    pp_elf_offset_to_vaddr(info, info->loads[i].offset, &vaddr);
    if (t) pp_elf_symtab_lookup(t, info->loads[i].vaddr, &start, name_buf, sizeof(name_buf));
  }
  for (size_t i = 0; i + 8 <= size && i < 512; i += 8) {
    uint64_t a;
    memcpy(&a, data + i, 8);
    pp_elf_offset_to_vaddr(info, a, &vaddr);
    if (t) {
      const char *name = pp_elf_symtab_lookup(t, a, &start, name_buf, sizeof(name_buf));
      if (name) (void)strlen(name);
    }
  }
  if (t) {
    (void)pp_elf_symtab_count(t);
    (void)pp_elf_symtab_bytes(t);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct pp_elf_info info;
  struct pp_elf_symtab *t = NULL;
  char path[64];
  int fd = pp_fuzz_memfd(data, size, path, sizeof(path));
  if (fd < 0) abort();
  /* names read back from the file, as the perf plugin keeps them */
  if (pp_elf_load(fd, PP_ELF_WANT_SYMTAB | PP_ELF_WANT_DYNSYM | PP_ELF_NAMES_IN_FILE, &info, &t) ==
      0) {
    probe(&info, t, data, size);
    pp_elf_symtab_free(t);
  }
  t = NULL;
  if (pp_elf_load(fd, 0, &info, NULL) == 0) probe(&info, NULL, data, size);
  static const char *const exported[] = {"napi_module_register", "_ZN2v87Isolate10GetCurrentEv",
                                         "malloc", ""};
  uint64_t values[4], sizes[4];
  int n = pp_elf_lookup_symbols(fd, exported, 4, PP_ELF_EXPORTED_ONLY, values, sizes);
  if (n > 4) abort();
  n = pp_elf_lookup_symbols(fd, exported, 4, 0, values, NULL);
  if (n > 4) abort();
  uint64_t sv, ss;
  pp_elf_find_section(fd, ".data", &sv, &ss);
  pp_elf_load_bias(fd, 0x400000, &sv);
  /* from memory: libelf wants a writable, suitably aligned image */
  void *copy = malloc(size ? size : 1);
  if (!copy) abort();
  memcpy(copy, data, size);
  if (pp_elf_load_memory(copy, size, PP_ELF_WANT_DYNSYM, &info, &t) == 0) {
    probe(&info, t, data, size);
    pp_elf_symtab_free(t);
  }
  free(copy);
  return 0;
}
