/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gProfiler Performance Studio client: POST <server>/api/v2/profiles with
 * the API key and service name as headers and query parameters, a gzipped
 * JSON body whose "profile" is the whole .col text, and the "gpid" of the
 * previous reply threaded through (the API: docs/gprofiler-compat.md).
 */
#ifndef PP_UPLOAD_STUDIO_H
#define PP_UPLOAD_STUDIO_H

#include <stddef.h>
#include <time.h>

#include "upload/http.h"

#define PP_GPID_MAX 128

struct pp_studio_conf {
  const char *server_host; /* "https://profiler.granulate.io" */
  const char *token;
  const char *service_name;
  const char *hostname;
  struct pp_http_opts http;
};

enum pp_send_result {
  PP_SEND_OK = 0,
  PP_SEND_RETRY = 1, /* transport error, timeout, 5xx, 408, 429, 401/403: try again later */
  PP_SEND_DROP = 2,  /* the server refused this profile for good (other 4xx) */
};

/* The gzipped JSON body. cpu/mem < 0 become null. 0 or -ENOMEM. */
int pp_studio_body(const char *col, size_t col_len, time_t start, time_t end, double cpu_avg,
                   double mem_avg, time_t spawn_time, const char *gpid, unsigned char **out,
                   size_t *out_len);

/* Send one body. id (32 hex) goes out as X-Polyprof-Upload-Id so a server
 * can drop a duplicate of a retried upload whose first reply was lost. On
 * success gpid gets the reply's "gpid" (unchanged if none). err explains
 * any other result (never contains the token). */
enum pp_send_result pp_studio_send(const struct pp_studio_conf *c, const char *id, const void *body,
                                   size_t len, char gpid[PP_GPID_MAX + 1], char *err,
                                   size_t errlen);

/* GET /api/v1/health_check. 0 if the server answered 2xx, else -1 + err. */
int pp_studio_health(const struct pp_studio_conf *c, char *err, size_t errlen);

#endif
