/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Finding named symbols and sections in an ELF file a target maps (open it
 * with pp_target_open_mapped or pp_find_module first). The file is
 * untrusted: every offset, count and size is checked against the file.
 */
#ifndef POLYPROF_KIT_ELF_LOOKUP_H
#define POLYPROF_KIT_ELF_LOOKUP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Flags of pp_elf_lookup_symbols. */
#define PP_ELF_EXPORTED_ONLY 1u /* only what .dynsym exports: never walk .symtab */

/* Looks up defined symbols by exact name: values[i] gets st_value (0: not
 * found), sizes[i] (sizes may be NULL) st_size. It asks the GNU hash table
 * of .dynsym first (a few preads: nothing is mapped, which matters for a
 * 100 MB executable such as node), and only for names not found there (or
 * a file without that table) walks .symtab then .dynsym, unless
 * PP_ELF_EXPORTED_ONLY (then only .dynsym). Returns how many names were
 * found, or -ENOEXEC (not ELF), -EINVAL (corrupt), -errno. fd stays open. */
int pp_elf_lookup_symbols(int fd, const char *const *names, size_t n, unsigned flags,
                          uint64_t *values, uint64_t *sizes);

/* vaddr and size of a named section (e.g. ".PyRuntime"). 0, -ENOENT, or
 * -errno for an unreadable or malformed file. */
int pp_elf_find_section(int fd, const char *name, uint64_t *vaddr, uint64_t *size);

/* The runtime load bias of a file mapped at `map_start` (the start of its
 * mapping at file offset 0): runtime address = ELF vaddr + bias; 0 for an
 * ET_EXEC file. 0 or -errno. */
int pp_elf_load_bias(int fd, uint64_t map_start, uint64_t *bias);

#ifdef __cplusplus
}
#endif

#endif
