/* SPDX-License-Identifier: Apache-2.0 */
/*
 * /proc/PID/maps parsing. The file comes from the kernel but describes a
 * process we do not control (paths are whatever it mapped, including
 * newlines in file names), so lines are length-capped and parsed strictly.
 */
#ifndef POLYPROF_KIT_MAPS_H
#define POLYPROF_KIT_MAPS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PP_MAP_READ 1u
#define PP_MAP_WRITE 2u
#define PP_MAP_EXEC 4u
#define PP_MAP_SHARED 8u

struct pp_map {
  uint64_t start, end; /* [start, end) */
  uint64_t offset;     /* file offset of start */
  uint64_t inode;
  uint32_t dev_major, dev_minor;
  uint32_t prot; /* PP_MAP_* */
  char *path;    /* NULL for anonymous mappings; "[vdso]", "/usr/lib/x.so (deleted)"... */
};

/* Parses one line (without or with its trailing newline). The path, if any,
 * is copied into path_buf (truncated to path_cap-1) and m->path points to it,
 * or is NULL. 0 or -EINVAL. */
/* Parses 1 to 16 hexadecimal digits (no prefix) at *p, advancing *p past
 * them: the address fields of maps and perf maps. -EINVAL for no digit or
 * more than 64 bits. */
int pp_parse_hex_u64(const char **p, uint64_t *out);

int pp_maps_parse_line(const char *line, struct pp_map *m, char *path_buf, size_t path_cap);

/* Reads /proc/<pid>/maps. only_exec: keep executable mappings only (what
 * symbolization needs; a fraction of the lines). At most max_entries are
 * kept (0: no limit). The array and its paths are freed with pp_maps_free. */
int pp_maps_read(uint32_t pid, int only_exec, size_t max_entries, struct pp_map **out,
                 size_t *count);
/* Same from an open stream of maps text (what pp_maps_read does after the
 * open; the fuzz target feeds it hostile text). f stays open. */
int pp_maps_read_stream(FILE *f, int only_exec, size_t max_entries, struct pp_map **out,
                        size_t *count);
void pp_maps_free(struct pp_map *maps, size_t count);

/* Index of the mapping containing addr in a sorted array, or -1. */
long pp_maps_find(const struct pp_map *maps, size_t count, uint64_t addr);

#endif
