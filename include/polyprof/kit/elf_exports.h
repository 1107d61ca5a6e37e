/*
 * Exported-symbol checks through an ELF file's GNU hash table (a few
 * preads per name, nothing mapped).
 */
#ifndef PP_SUPPORT_ELF_EXPORTS_H
#define PP_SUPPORT_ELF_EXPORTS_H

#include <stddef.h>

/* Sets bit i of *found when names[i] (i < 32) is a defined symbol of fd's
 * .dynsym. 0, or -ENOTSUP (not a 64-bit little-endian ELF file or no
 * .gnu.hash: the caller walks the symbols another way), -ENOEXEC (not
 * ELF), -EINVAL (a corrupt table) or another -errno. */
int pp_elf_exports(int fd, const char *const *names, size_t n, unsigned *found);

#endif
