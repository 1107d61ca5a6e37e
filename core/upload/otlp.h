/* SPDX-License-Identifier: Apache-2.0 */
/*
 * OpenTelemetry export: each session goes to an OTLP collector as one
 * ExportProfilesServiceRequest of the profiles signal
 * (opentelemetry.proto.collector.profiles.v1development, as published in
 * opentelemetry-proto v1.11.0), protobuf over HTTP, gzip-encoded, POSTed to
 * <endpoint>/v1development/profiles.
 *
 * One ResourceProfiles per container (host processes form their own), with
 * the resource attributes host.name, service.name and, where known,
 * container.name, k8s.container.name, k8s.pod.name, k8s.namespace.name and
 * k8s.pod.label.<key> of the selected pod labels (k8s_labels.h); one Profile in each,
 * for CPU sample type samples/count with the sampling period as
 * cpu/nanoseconds, for the other profile types their own type and unit;
 * samples carry process.pid, process.executable.name and polyprof.appid;
 * locations carry profile.frame.type. All tables live in the request's
 * shared dictionary, each starting with its zero entry as the format asks.
 *
 * Delivery goes through the uploader thread with the studio upload's
 * retries and spool (its own spool directory, "otlp" inside upload.spool_dir).
 */
#ifndef PP_UPLOAD_OTLP_H
#define PP_UPLOAD_OTLP_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "config.h"
#include "profile.h"
#include "upload/http.h"
#include "upload/studio.h"

#define PP_OTLP_PROFILES_PATH "/v1development/profiles"

struct pp_otlp_info {
  time_t start, end;
  int frequency;        /* Hz; 0: no period */
  const char *hostname; /* host.name */
  const char *service;  /* service.name */
  const char *version;  /* instrumentation scope version */
  const uint8_t
      *profile_id_seed; /* 16 bytes (random); each resource's profile id derives from it */
  /* sample type and unit of a profile that is not cpu samples (wall/count,
   * off_cpu/microseconds, alloc_space/bytes), without a period; NULL: cpu,
   * samples/count with the period cpu/nanoseconds */
  const char *sample_type, *sample_unit;
};

/* The uncompressed ExportProfilesServiceRequest. 0 or -ENOMEM. */
int pp_otlp_encode(const struct pp_profile *p, const struct pp_otlp_info *info, uint8_t **out,
                   size_t *len);

/* The request URL for an endpoint: a bare "scheme://host[:port][/]" gets
 * PP_OTLP_PROFILES_PATH, an endpoint with a path is used as it is.
 * malloc'd, NULL if out of memory. */
char *pp_otlp_url(const char *endpoint);

/* Encode, gzip and queue one session's profile of type `type` (enum
 * pp_profile_type); a no-op unless upload.otlp_endpoint. */
struct pp_uploader;
void pp_otlp_push(const struct pp_config *cfg, struct pp_uploader *u, const struct pp_profile *p,
                  time_t start, time_t end, unsigned type);

/* One POST of a gzipped request. The reply's partial_success is read: a
 * rejected count is logged (the collector has decided; it is not resent). */
enum pp_send_result pp_otlp_send(const char *url, const void *body, size_t len,
                                 const struct pp_http_opts *o, char *err, size_t errlen);

/* Reads an ExportProfilesServiceResponse. 0 with *rejected and msg (the
 * error_message, cut to msglen) set; -1 if malformed. */
int pp_otlp_parse_response(const uint8_t *buf, size_t len, int64_t *rejected, char *msg,
                           size_t msglen);

#endif
