/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jitdump files (tools/perf/Documentation/jitdump-specification.txt): the
 * binary JIT symbol log that Node/V8 writes with --perf-prof (./jit-<pid>.dump
 * in the process's working directory) and .NET with DOTNET_PerfMapEnabled=1
 * or 2 (/tmp/jit-<pid>.dump). The runtime mmaps the file with exec
 * permission so that it shows in /proc/PID/maps, and keeps appending to it.
 *
 * The records are turned into the lookup structure of perf maps (perfmap.h),
 * so one lookup path serves both. The file belongs to the profiled process:
 * every size in it is checked, names are bounded and control characters
 * replaced, and the bytes read over the reader's lifetime are capped. A
 * record still being written is left for the next update, which reads from
 * where the previous one stopped.
 */
#ifndef POLYPROF_KIT_JITDUMP_H
#define POLYPROF_KIT_JITDUMP_H

#include <stddef.h>
#include <stdint.h>

#include "polyprof/kit/perfmap.h"

struct pp_jitdump;

/* Names longer than this are cut (V8 names carry the script path). */
#define PP_JITDUMP_NAME_MAX 1024
/* The smallest read: a code load's fixed part and the longest name. */
#define PP_JITDUMP_CHUNK_MIN (56 + PP_JITDUMP_NAME_MAX + 1)

/* A reader that consumes at most max_bytes of the file over its lifetime
 * (0: no limit). */
int pp_jitdump_new(size_t max_bytes, struct pp_jitdump **out);
void pp_jitdump_free(struct pp_jitdump *d);

/* Consumes buf, the file's bytes from the first one not yet consumed up to
 * its current end: the header (first call) and every complete record.
 * Returns the number of new symbols, or a negative errno: -EPROTO for a file
 * that is not a jitdump (wrong magic, other endianness, unknown version) or
 * whose framing is broken, -EFBIG once max_bytes is reached. After an error
 * the reader keeps what it has and consumes nothing more. */
int pp_jitdump_parse(struct pp_jitdump *d, const uint8_t *buf, size_t len);

/* Same from an open file, read with pread in chunks of chunk bytes (at
 * least PP_JITDUMP_CHUNK_MIN; records bigger than a chunk are skipped by
 * size once complete, their name taken from the first chunk). */
int pp_jitdump_read_fd(struct pp_jitdump *d, int fd, size_t chunk);

/* Opens `path` as process `pid` sees it (under /proc/PID/root, without
 * following any symbolic link, a regular file only) and reads what was
 * appended since the last call. A file replaced by another one (new inode)
 * is read from its start. A file last written before the process started
 * is left by an earlier process with the same pid: -ESTALE. Returns as
 * pp_jitdump_parse, or -errno of the open. */
int pp_jitdump_update(struct pp_jitdump *d, uint32_t pid, const char *path);

/* The symbols read so far (never NULL), for pp_perfmap_lookup. */
const struct pp_perfmap *pp_jitdump_map(const struct pp_jitdump *d);
/* File bytes consumed so far. */
uint64_t pp_jitdump_offset(const struct pp_jitdump *d);

#endif
