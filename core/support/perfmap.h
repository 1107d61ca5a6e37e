/*
 * JIT symbol maps in the perf convention: /tmp/perf-<pid>.map, one line per
 * compiled code blob, "START SIZE name" with START and SIZE in hex. Written
 * by Node (--perf-basic-prof), the JVM agents, LuaJIT, .NET... The file
 * belongs to the profiled process, so it is size-capped and parsed strictly.
 */
#ifndef PP_SUPPORT_PERFMAP_H
#define PP_SUPPORT_PERFMAP_H

#include <stddef.h>
#include <stdint.h>

struct pp_perfmap;

/* Loads a map file. At most max_bytes of the file are read and at most
 * max_entries entries kept (0: no limit). When entries overlap, the one
 * written last wins (JIT code is recompiled into reused memory). */
int pp_perfmap_load(const char *path, size_t max_bytes, size_t max_entries,
                    struct pp_perfmap **out);
/* Same from a buffer (tests). */
int pp_perfmap_parse(const char *text, size_t len, size_t max_entries, struct pp_perfmap **out);
void pp_perfmap_free(struct pp_perfmap *m);

/* Name of the blob containing addr, or NULL. *start (optional) gets its start. */
const char *pp_perfmap_lookup(const struct pp_perfmap *m, uint64_t addr, uint64_t *start);
size_t pp_perfmap_count(const struct pp_perfmap *m);
size_t pp_perfmap_bytes(const struct pp_perfmap *m);

#endif
