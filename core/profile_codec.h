/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Binary form of a pp_profile, used to carry a worker's snapshot to the core.
 *
 * Layout (host byte order, see ipc.h for the string encoding):
 *
 *   u32 magic "PPF1", u32 version (1)
 *   u32 nstrings   { u32 len, bytes }            string table, ids = index
 *   u32 nframes    { u32 name, u32 file, u32 line, u32 kind }
 *   u32 npids      { u32 pid, comm, appid, app_meta, container, status,
 *                    reason, app_meta_index, u64 start_time }
 *   u32 nstacks    { u32 pid, u32 comm, u32 nframes, u64 count,
 *                    nframes * u32 frame id (root first) }
 *   u32 ncounters  { u32 name, u64 value }
 *
 * String fields are ids into the table or PP_NO_STR. The decoder trusts
 * nothing: every count is checked against the bytes left, every id against
 * its table, kinds and statuses against their enums, nframes against
 * PP_MAX_FRAMES, and strings for length and embedded NULs. A corrupt buffer
 * yields -EINVAL (the profile then holds a partial result the caller should
 * discard), never a crash. Decoding re-interns into the destination, so a
 * hostile table with duplicates is harmless.
 */
#ifndef PP_PROFILE_CODEC_H
#define PP_PROFILE_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "ipc.h"
#include "profile.h"

#define PP_CODEC_MAGIC 0x31465050u /* "PPF1" */
#define PP_CODEC_VERSION 1u
#define PP_CODEC_MAX_STR (1u << 20) /* longest string accepted (app metadata JSON) */

/* Append the encoding of p to b. 0, -ENOMEM or -E2BIG (over b's limit). */
int pp_profile_encode(const struct pp_profile *p, struct pp_wbuf *b);

/* Clear `out` and fill it from buf. 0, -EINVAL (malformed) or -ENOMEM. */
int pp_profile_decode(struct pp_profile *out, const void *buf, size_t len);

#endif
