/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ELF facts a profiler needs from a mapped object, read with libelf:
 * function symbols (.symtab, else .dynsym) as a sorted table, the build-id,
 * .gnu_debuglink, PT_LOAD segments (to turn file offsets into ELF virtual
 * addresses), the location of unwind tables and, for Go binaries, the Go
 * version from .go.buildinfo.
 *
 * Input files are hostile: libelf bounds-checks section data and every
 * offset and length read here is checked against it. A malformed file is
 * refused, never a crash.
 */
#ifndef POLYPROF_KIT_ELF_SYMBOLS_H
#define POLYPROF_KIT_ELF_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>

#define PP_ELF_MAX_LOADS 16
#define PP_ELF_BUILD_ID_MAX 64

struct pp_elf_load {
  uint64_t vaddr, memsz, offset, filesz;
  uint32_t flags; /* PF_X, PF_W, PF_R */
};

/* Small per-file facts, kept for as long as the object is known. */
struct pp_elf_info {
  uint16_t type;    /* ET_EXEC, ET_DYN... */
  uint16_t machine; /* EM_X86_64... */
  uint8_t build_id_len;
  uint8_t build_id[PP_ELF_BUILD_ID_MAX];
  struct pp_elf_load loads[PP_ELF_MAX_LOADS];
  unsigned nloads;
  char debuglink[256]; /* "" if none */
  uint32_t debuglink_crc;
  int has_symtab; /* a .symtab with function symbols */
  int has_dynsym;
  int has_interp; /* PT_INTERP: dynamically linked */
  int is_go;
  char go_version[32]; /* "go1.19.8", "" if unknown */
  /* Unwind tables (0 size: absent). *_vaddr are ELF virtual addresses. */
  uint64_t eh_frame_hdr_vaddr, eh_frame_hdr_offset, eh_frame_hdr_size;
  uint64_t eh_frame_vaddr, eh_frame_offset, eh_frame_size;
  uint64_t debug_frame_offset, debug_frame_size;
};

/* Function symbols of one file, sorted by address. */
struct pp_elf_symtab;

/* Flags for pp_elf_load. */
#define PP_ELF_WANT_SYMTAB 1u /* load .symtab (functions) if present */
#define PP_ELF_WANT_DYNSYM 2u /* load .dynsym if no .symtab was loaded */
/* Leave the names in the file: the table keeps a duplicate of fd and reads
 * a name when it is looked up, instead of a heap copy of every name. */
#define PP_ELF_NAMES_IN_FILE 4u

/* Reads the info of the ELF file open at fd and, if flags ask and symtab is
 * not NULL, its symbol table (*symtab is NULL when the file has none).
 * 0, -ENOEXEC (not ELF / malformed), -ENOMEM. The fd stays open and owned
 * by the caller (with PP_ELF_NAMES_IN_FILE the table holds a duplicate). */
int pp_elf_load(int fd, unsigned flags, struct pp_elf_info *info, struct pp_elf_symtab **symtab);

/* Same for an ELF image in memory (the vDSO). */
int pp_elf_load_memory(const void *image, size_t size, unsigned flags, struct pp_elf_info *info,
                       struct pp_elf_symtab **symtab);

void pp_elf_symtab_free(struct pp_elf_symtab *t);

/* Name of the function containing vaddr, or NULL. A symbol covers
 * [addr, addr+size); a symbol of size 0 extends to the next symbol. *start
 * (optional) gets the symbol address. The name points into the table, or,
 * for a table whose names stay in the file, into buf (cap bytes; a longer
 * name is cut); NULL also when the file no longer holds a valid name. */
const char *pp_elf_symtab_lookup(const struct pp_elf_symtab *t, uint64_t vaddr, uint64_t *start,
                                 char *buf, size_t cap);
/* Whether a symbol covers vaddr (and its address into *start), without
 * reading its name: the per-sample question. */
int pp_elf_symtab_find(const struct pp_elf_symtab *t, uint64_t vaddr, uint64_t *start);
/* The table reads its names from a file it holds open. */
int pp_elf_symtab_has_file(const struct pp_elf_symtab *t);
size_t pp_elf_symtab_count(const struct pp_elf_symtab *t);
size_t pp_elf_symtab_bytes(const struct pp_elf_symtab *t);

/* ELF virtual address of a file offset, through the PT_LOAD covering it.
 * 0 or -ENOENT. */
int pp_elf_offset_to_vaddr(const struct pp_elf_info *info, uint64_t offset, uint64_t *vaddr);

/* Lowercase hex build-id into buf ("" if none). Returns buf. */
char *pp_elf_build_id_hex(const struct pp_elf_info *info, char *buf, size_t cap);

/* Finds a separate debug file for the object seen at `path` by a process
 * whose root is `root` (e.g. "/proc/123/root"; NULL or "" for the host):
 * /usr/lib/debug/.build-id/xx/yyyy.debug, then the .gnu_debuglink name next
 * to the object, in its .debug/ folder and under /usr/lib/debug/<dir>/; each
 * under root first, then on the host. A debuglink candidate must carry the
 * same build-id when both have one. Writes the path (openable by us) into
 * out. 0 or -ENOENT. */
int pp_elf_find_debug_file(const char *root, const char *path, const struct pp_elf_info *info,
                           char *out, size_t cap);

/* The same search for an object that process `pid` maps at `path` (as it
 * sees it), safe against the process: a candidate in its root is opened
 * through pp_target_open(PP_TF_READABLE) (resolved inside that root, a
 * regular file the process may read itself, checked before it is opened),
 * then the host's /usr/lib/debug candidates (the build-id one, and <dir> +
 * a debuglink name without '/'). A debug file must carry the object's
 * build-id when the object has one. Returns an fd open for reading, or
 * -ENOENT. */
int pp_elf_open_debug_file(uint32_t pid, const char *path, const struct pp_elf_info *info);

#endif
