/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Session files that could not be written (output directory read-only,
 * disk full, quota, directory removed...): kept in memory, bounded, and
 * written at a later session once the directory takes them again.
 *
 * Why memory and not a spool on disk: the usual causes (a read-only or full
 * filesystem) hit any spool on the same disk too, and a profile is
 * telemetry whose value fades within hours; a bounded in-memory backlog
 * covers the common "disk full for a few minutes" case and the cap keeps
 * the agent's memory a known quantity. Oldest sessions are dropped first,
 * with a warning naming them. The upload path has its own on-disk spool
 * (core/upload/spool.c) and is not affected by the local directory.
 *
 * Each kept file is its rendered bytes plus the names it must get
 * (profile_<time><ext> and the last_* link). Writing them back goes through
 * pp_output_publish(), so they land atomically, in session order, and the
 * last_* links end up on the newest session.
 */
#ifndef PP_OUTPUT_PENDING_H
#define PP_OUTPUT_PENDING_H

#include <stdbool.h>
#include <stddef.h>

#include "output/files.h"

struct pp_pending;

/* cap_bytes: most bytes kept (0 keeps nothing: failed files are dropped). */
struct pp_pending *pp_pending_new(size_t cap_bytes);
/* A new cap (config reload); applies from the next file kept. */
void pp_pending_set_cap(struct pp_pending *p, size_t cap_bytes);
/* Drops whatever is still pending (the caller logs it first). */
void pp_pending_free(struct pp_pending *p);

size_t pp_pending_count(const struct pp_pending *p);
size_t pp_pending_bytes(const struct pp_pending *p);
size_t pp_pending_sessions(const struct pp_pending *p); /* distinct stems */

/* Write <dir>/<stem><ext> (and its link) like pp_output_publish; if that
 * fails, render it into memory and keep it, dropping the oldest kept files
 * when over the cap. Files are also kept, without a write attempt, while
 * older ones are pending, so the directory receives sessions in order.
 * Returns 0 written, 1 kept for later, or -errno (not written, not kept:
 * over the cap on its own, or out of memory); err says why (directory and
 * cause) and *dropped counts older files pushed out to make room. */
int pp_pending_publish(struct pp_pending *p, const char *dir, const char *stem, const char *ext,
                       const char *link_name, bool rotating, pp_output_write_fn fn, void *ctx,
                       size_t *dropped, char *err, size_t errlen);

/* Write the kept files, oldest first, stopping at the first failure.
 * Returns how many were written (>= 0) or -errno of the failure when none
 * could be (err says why). */
int pp_pending_flush(struct pp_pending *p, const char *dir, bool rotating, char *err,
                     size_t errlen);

#endif
