/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gzip (RFC 1952) in memory, for every writer and client of the agent that
 * compresses: the pprof file, the studio upload body, the log batches.
 * Kept apart from the HTTP client so a file writer does not depend on the
 * uploaders.
 */
#ifndef PP_SUPPORT_GZIP_H
#define PP_SUPPORT_GZIP_H

#include <stddef.h>

/* gzip of len bytes at level (1-9). *out malloc'd. 0, -ENOMEM or -EIO. */
int pp_gzip(const void *in, size_t len, int level, unsigned char **out, size_t *out_len);
/* Inverse, bounded to max_out bytes (-EFBIG beyond) because the input may
 * come from a server; *out is NUL-terminated. 0 or -errno. */
int pp_gunzip(const void *in, size_t len, size_t max_out, char **out, size_t *out_len);

#endif
