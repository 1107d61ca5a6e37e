/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Background uploader: one thread that delivers each session's profile to
 * the studio (and Pyroscope, and an OTLP collector), so a slow or dead server never stalls
 * profiling.
 *
 * A profile is tried 1 + upload.retries times with exponential backoff and
 * jitter (upload.retry_backoff_ms doubled each time, +-50 %); if it still
 * fails it goes to the on-disk spool (spool.h). Whenever an upload succeeds
 * - and once at start, for what an earlier run left behind - the spool is
 * drained oldest first, one attempt per file, a file being deleted only
 * after a 2xx. On shutdown the queue gets one last attempt each within a
 * short grace period, and whatever is left is spooled, so nothing is lost
 * by stopping the agent.
 */
#ifndef PP_UPLOAD_UPLOADER_H
#define PP_UPLOAD_UPLOADER_H

#include <stddef.h>
#include <time.h>

#include "config.h"

struct pp_uploader;

/* NULL if cfg->upload, cfg->pyroscope_url and cfg->otlp_endpoint are all off. */
struct pp_uploader *pp_uploader_new(const struct pp_config *cfg, time_t spawn_time);

/* Queue one session's .col text for the studio. Never blocks on the
 * network. */
void pp_uploader_submit(struct pp_uploader *u, const char *col, size_t len, time_t start,
                        time_t end, double cpu_avg, double mem_avg);

/* Queue a ready Pyroscope /ingest request (see pyroscope.h). Takes body. */
void pp_uploader_submit_pyroscope(struct pp_uploader *u, char *url, unsigned char *body, size_t len,
                                  const char *content_type);

/* Queue a gzipped OTLP ExportProfilesServiceRequest (see otlp.h), retried
 * and spooled like a studio upload. Takes body. */
void pp_uploader_submit_otlp(struct pp_uploader *u, unsigned char *body, size_t len, time_t end);

/* Queue an already gzipped log batch for <api-server>/api/v1/logs. Takes body. */
void pp_uploader_submit_logs(struct pp_uploader *u, unsigned char *body, size_t len);

/* Queue the log messages gathered since the last call (if log shipping is
 * on) and start a new cycle id. Called at the end of each session. */
void pp_uploader_ship_logs(struct pp_uploader *u);

/* Flush (grace period bounded by the upload timeout, at most 15 s), spool
 * the rest, stop the thread. */
void pp_uploader_free(struct pp_uploader *u);

/* Test/CLI helper: deliver everything queued, then return (upload-file). 0
 * if all was delivered, -1 if something was spooled or dropped. */
int pp_uploader_flush(struct pp_uploader *u);

#endif
