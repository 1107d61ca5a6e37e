/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Log shipping to the studio's log endpoint, in glogger's batch format
 * (docs/gprofiler-compat.md):
 * messages of level INFO and above are buffered (bounded: 4 MiB; on
 * overflow the oldest quarter is dropped and counted in lost_logs_count)
 * and sent as one gzipped JSON batch to <api-server>/api/v1/logs at the end
 * of each session and at shutdown, through the uploader thread. Off with
 * --dont-send-logs or GPROFILER_DONT_SEND_LOGS=1. The token is redacted from
 * any message that would contain it.
 */
#ifndef PP_UPLOAD_LOGSHIP_H
#define PP_UPLOAD_LOGSHIP_H

#include <stddef.h>

struct pp_logship;

struct pp_logship *pp_logship_new(const char *service, const char *hostname, const char *token);
/* Stop tapping the log and free. */
void pp_logship_free(struct pp_logship *l);
/* The pending batch as a gzipped body (*body malloc'd), or -ENODATA when
 * nothing is pending. Starts a new batch. */
int pp_logship_take(struct pp_logship *l, unsigned char **body, size_t *len);
/* New cycle id (one per session, as gProfiler's cycle_id). */
void pp_logship_new_cycle(struct pp_logship *l);

#endif
