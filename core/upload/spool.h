/* SPDX-License-Identifier: Apache-2.0 */
/*
 * On-disk spool of profiles whose upload failed, resent when the server is
 * back (also by the next agent run). One file per profile holding the exact
 * gzipped request body, named "<end time>-<seq>-<id>.json.gz" so name order
 * is age order and the id survives for deduplication. The directory is
 * created 0700 and must belong to the agent's user; files are written to a
 * temp name, fsync'd and renamed, so a crash never leaves half a profile.
 * The total size is capped: the oldest files go first, with a warning.
 * Thread-safe (one mutex).
 */
#ifndef PP_UPLOAD_SPOOL_H
#define PP_UPLOAD_SPOOL_H

#include <stddef.h>
#include <time.h>

struct pp_spool;

/* NULL with err set if the directory cannot be created, is not owned by us
 * or is accessible by others. */
struct pp_spool *pp_spool_open(const char *dir, size_t max_bytes, char *err, size_t errlen);
void pp_spool_free(struct pp_spool *s);

/* Store one body. 0, or -errno (-EFBIG: larger than the whole cap). */
int pp_spool_put(struct pp_spool *s, time_t end, const char *id, const void *body, size_t len);

/* The oldest entry: its path into path (and its id into id, 33 bytes).
 * 0, or -ENOENT if the spool is empty. */
int pp_spool_oldest(struct pp_spool *s, char *path, size_t pathlen, char id[33]);
/* Read an entry (bounded by the cap). 0 or -errno; *body malloc'd. */
int pp_spool_read(struct pp_spool *s, const char *path, unsigned char **body, size_t *len);
int pp_spool_remove(struct pp_spool *s, const char *path);

/* Entries and bytes currently held. */
size_t pp_spool_count(struct pp_spool *s, size_t *bytes);

#endif
