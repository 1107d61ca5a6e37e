/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where to put the allocation uprobes of one process: the allocator
 * libraries it maps (the C library, jemalloc, tcmalloc, mimalloc) and the
 * file offsets of their allocation functions.
 *
 * The files are the target's: each is opened through the kit's safe
 * access (inside the target's root, the very inode its maps name) and the
 * descriptor is kept, so the kernel is handed "/proc/self/fd/N" for the
 * probe and never resolves a path the target controls. Symbol tables are
 * untrusted; an offset outside every executable segment is refused.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "perf.h"
#include "polyprof/kit/elf_lookup.h"
#include "polyprof/kit/maps.h"
#include "polyprof/kit/target_files.h"

#ifndef PF_X
#define PF_X 1
#endif

/* The allocation entry points and where their byte count is: argument
 * registers by index (x86-64 SysV: rdi, rsi, rdx). reallocarray is left
 * out: glibc's calls realloc itself, which is probed. */
static const struct {
  const char *name;
  uint8_t size_arg, count_arg; /* count_arg: calloc's element count, or ALLOC_NO_ARG */
} alloc_functions[] = {
    {"malloc", 0, ALLOC_NO_ARG},        {"calloc", 1, 0},
    {"realloc", 1, ALLOC_NO_ARG},       {"posix_memalign", 2, ALLOC_NO_ARG},
    {"aligned_alloc", 1, ALLOC_NO_ARG}, {"memalign", 1, ALLOC_NO_ARG},
    {"valloc", 0, ALLOC_NO_ARG},        {"pvalloc", 0, ALLOC_NO_ARG},
};
#define NFUNCTIONS (sizeof(alloc_functions) / sizeof(alloc_functions[0]))

/* Libraries that define the process's malloc. */
static bool is_allocator(const char *path) {
  static const char *const prefixes[] = {"libc.so.",    "libc-2.",     "libjemalloc.so",
                                         "libtcmalloc", "libmimalloc", "ld-musl-"};
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
    if (!strncmp(base, prefixes[i], strlen(prefixes[i]))) return true;
  return false;
}

/* File offset of ELF address vaddr inside an executable PT_LOAD. */
static int file_offset(const struct pp_elf_info *info, uint64_t vaddr, uint64_t *off) {
  for (unsigned i = 0; i < info->nloads && i < PP_ELF_MAX_LOADS; i++) {
    const struct pp_elf_load *l = &info->loads[i];
    if (!(l->flags & PF_X) || vaddr < l->vaddr || vaddr - l->vaddr >= l->filesz) continue;
    *off = l->offset + (vaddr - l->vaddr);
    return 0;
  }
  return -ENOENT;
}

/* Probes of one file: the functions it defines, one per distinct offset
 * (glibc's aligned_alloc is memalign). Returns how many were added. */
static size_t probes_of(int fd, struct alloc_file *f) {
  struct pp_elf_info info;
  if (pp_elf_load(fd, 0, &info, NULL) < 0) return 0;
  const char *names[NFUNCTIONS];
  uint64_t values[NFUNCTIONS];
  for (size_t i = 0; i < NFUNCTIONS; i++)
    names[i] = alloc_functions[i].name;
  if (pp_elf_lookup_symbols(fd, names, NFUNCTIONS, PP_ELF_EXPORTED_ONLY, values, NULL) <= 0)
    return 0;
  f->nprobes = 0;
  for (size_t i = 0; i < NFUNCTIONS && f->nprobes < ALLOC_MAX_PROBES; i++) {
    uint64_t off;
    if (!values[i] || file_offset(&info, values[i], &off) < 0) continue;
    bool dup = false;
    for (size_t k = 0; k < f->nprobes; k++)
      dup |= f->probes[k].offset == off;
    if (dup) continue;
    f->probes[f->nprobes++] = (struct alloc_probe){.offset = off,
                                                   .name = alloc_functions[i].name,
                                                   .size_arg = alloc_functions[i].size_arg,
                                                   .count_arg = alloc_functions[i].count_arg};
  }
  return f->nprobes;
}

int perf_alloc_find_probes(uint32_t pid, struct alloc_file *files, size_t cap, size_t *n, char *why,
                           size_t whylen) {
  struct pp_map *maps = NULL;
  size_t nmaps = 0;
  *n = 0;
  int rc = pp_maps_read(pid, 1, 65536, &maps, &nmaps);
  if (rc < 0) {
    snprintf(why, whylen, "its maps cannot be read (%s)", strerror(-rc));
    return rc;
  }
  why[0] = '\0';
  bool loader = false; /* a dynamic loader still mapping the libraries */
  for (size_t i = 0; i < nmaps && *n < cap; i++) {
    const struct pp_map *m = &maps[i];
    const char *base = m->path ? strrchr(m->path, '/') : NULL;
    if (base && !strncmp(base + 1, "ld-linux", 8)) loader = true;
    if (!m->path || m->path[0] != '/' || !m->inode || !is_allocator(m->path)) continue;
    bool seen = false;
    for (size_t k = 0; k < *n; k++)
      seen |= files[k].inode == m->inode && files[k].dev_major == m->dev_major &&
              files[k].dev_minor == m->dev_minor;
    if (seen) continue;
    struct pp_file_id id = {
        .dev_major = m->dev_major, .dev_minor = m->dev_minor, .inode = m->inode};
    char reason[256] = "";
    int fd = pp_target_open_mapped(pid, m->path, &id, m->start, m->end, reason, sizeof(reason));
    if (fd < 0) {
      snprintf(why, whylen, "%s cannot be opened safely: %s", m->path,
               reason[0] ? reason : strerror(-fd));
      continue;
    }
    struct alloc_file *f = &files[*n];
    memset(f, 0, sizeof(*f));
    if (probes_of(fd, f) == 0) {
      close(fd);
      continue;
    }
    f->fd = fd;
    f->dev_major = m->dev_major;
    f->dev_minor = m->dev_minor;
    f->inode = m->inode;
    snprintf(f->path, sizeof(f->path), "%s", m->path);
    (*n)++;
  }
  pp_maps_free(maps, nmaps);
  if (*n) return 0;
  if (!why[0])
    snprintf(why, whylen,
             "it maps no allocator library (C library, jemalloc, tcmalloc, mimalloc): a "
             "statically linked program's malloc cannot be found");
  /* a program just started: its loader has not mapped the C library yet */
  return loader ? -EAGAIN : -ENOENT;
}
