/* SPDX-License-Identifier: Apache-2.0 */
/*
 * JIT symbol maps in the perf convention: /tmp/perf-<pid>.map, one line per
 * compiled code blob, "START SIZE name" with START and SIZE in hex. Written
 * by Node (--perf-basic-prof), the JVM agents, LuaJIT, .NET... The file
 * belongs to the profiled process, so it is size-capped and parsed strictly.
 */
#ifndef POLYPROF_KIT_PERFMAP_H
#define POLYPROF_KIT_PERFMAP_H

#include <stddef.h>
#include <stdint.h>

struct pp_perfmap;

/* Loads a map file. At most max_bytes of the file are read and at most
 * max_entries entries kept (0: no limit). When entries overlap, the one
 * written last wins (JIT code is recompiled into reused memory). */
int pp_perfmap_load(const char *path, size_t max_bytes, size_t max_entries,
                    struct pp_perfmap **out);
/* Same from a file already open (the caller opened it safely, e.g. with
 * pp_target_open); the fd stays the caller's. */
int pp_perfmap_load_fd(int fd, size_t max_bytes, size_t max_entries, struct pp_perfmap **out);
/* Same from a buffer (tests). */
int pp_perfmap_parse(const char *text, size_t len, size_t max_entries, struct pp_perfmap **out);
void pp_perfmap_free(struct pp_perfmap *m);

/* Name of the blob containing addr, or NULL. *start (optional) gets its start. */
const char *pp_perfmap_lookup(const struct pp_perfmap *m, uint64_t addr, uint64_t *start);
size_t pp_perfmap_count(const struct pp_perfmap *m);
size_t pp_perfmap_bytes(const struct pp_perfmap *m);

/* Building a map entry by entry, in the order the runtime wrote them (the
 * jitdump reader): later entries win where they overlap, as later lines of a
 * file do. Lookups see entries added since the last pp_perfmap_seal only
 * after the next one. The caller bounds and sanitises names.
 * pp_perfmap_add returns a reference to the stored name (>= 0), which
 * pp_perfmap_add_ref reuses for code that moved, or a negative errno. Only
 * for maps made by pp_perfmap_new. */
struct pp_perfmap *pp_perfmap_new(void);
int64_t pp_perfmap_add(struct pp_perfmap *m, uint64_t start, uint64_t size, const char *name,
                       size_t nlen);
int pp_perfmap_add_ref(struct pp_perfmap *m, uint64_t start, uint64_t size, uint32_t name_ref);
void pp_perfmap_seal(struct pp_perfmap *m);

#endif
