/* SPDX-License-Identifier: Apache-2.0 */
/* OTLP profiles export: URL, push into the uploader, send, reply (see otlp.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "log.h"
#include "profile_mode.h"
#include "support/gzip.h"
#include "upload/otlp.h"
#include "upload/otlp_pb.h"
#include "upload/uploader.h"

#define TAG "polyprof.otlp"

/* ExportProfilesServiceResponse / ExportProfilesPartialSuccess */
#define F_RESP_PARTIAL 1
#define F_PARTIAL_REJECTED 1
#define F_PARTIAL_MESSAGE 2

char *pp_otlp_url(const char *endpoint) {
  size_t n = strlen(endpoint);
  const char *scheme = strstr(endpoint, "://");
  const char *path = scheme ? strchr(scheme + 3, '/') : NULL;
  bool bare = !path || (path[1] == '\0');
  while (n && endpoint[n - 1] == '/')
    n--;
  size_t need = n + sizeof(PP_OTLP_PROFILES_PATH);
  char *url = malloc(need);
  if (!url) return NULL;
  if (bare)
    snprintf(url, need, "%.*s%s", (int)n, endpoint, PP_OTLP_PROFILES_PATH);
  else
    snprintf(url, need, "%s", endpoint);
  return url;
}

void pp_otlp_push(const struct pp_config *cfg, struct pp_uploader *u, const struct pp_profile *p,
                  time_t start, time_t end, unsigned type) {
  if (!u || !cfg->otlp_endpoint) return;
  char host[256] = "";
  if (gethostname(host, sizeof(host) - 1) != 0) snprintf(host, sizeof(host), "unknown");
  uint8_t seed[16];
  if (getrandom(seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed)) {
    /* the id is only for deduplication: time and pid are unique enough */
    memset(seed, 0, sizeof(seed));
    memcpy(seed, &end, sizeof(end) < 8 ? sizeof(end) : 8);
    pid_t pid = getpid();
    memcpy(seed + 8, &pid, sizeof(pid));
  }
  struct pp_otlp_info info = {
      .start = start,
      .end = end,
      .frequency = cfg->frequency,
      .hostname = host,
      .service = cfg->service_name,
      .version = POLYPROF_VERSION,
      .profile_id_seed = seed,
  };
  const struct pp_profile_type_desc *d = pp_profile_type(type);
  if (d && type != PP_PROFILE_CPU) {
    info.sample_type = d->pprof_type;
    info.sample_unit = d->pprof_unit;
  }
  uint8_t *raw = NULL;
  size_t len = 0;
  if (pp_otlp_encode(p, &info, &raw, &len) < 0) {
    pp_log(PP_LOG_ERROR, TAG, "cannot encode the OTLP profiles request: out of memory");
    return;
  }
  unsigned char *gz = NULL;
  size_t gzlen = 0;
  int rc = pp_gzip(raw, len, 6, &gz, &gzlen);
  free(raw);
  if (rc < 0) {
    pp_log(PP_LOG_ERROR, TAG, "cannot compress the OTLP profiles request: %s", strerror(-rc));
    return;
  }
  pp_uploader_submit_otlp(u, gz, gzlen, end);
}

int pp_otlp_parse_response(const uint8_t *buf, size_t len, int64_t *rejected, char *msg,
                           size_t msglen) {
  *rejected = 0;
  if (msglen) msg[0] = '\0';
  struct pp_pb_reader r = {buf, buf + len};
  struct pp_pb_field f;
  int rc;
  while ((rc = pp_pb_read_field(&r, &f)) > 0) {
    if (f.number != F_RESP_PARTIAL) continue;
    if (f.wire != 2) return -1;
    struct pp_pb_reader in = {f.data, f.data + f.len};
    struct pp_pb_field g;
    int rc2;
    while ((rc2 = pp_pb_read_field(&in, &g)) > 0) {
      if (g.number == F_PARTIAL_REJECTED && g.wire == 0) {
        *rejected = (int64_t)g.value;
      } else if (g.number == F_PARTIAL_MESSAGE && g.wire == 2 && msglen) {
        size_t n = g.len < msglen - 1 ? g.len : msglen - 1;
        for (size_t i = 0; i < n; i++) /* printable for the log */
          msg[i] = g.data[i] >= 0x20 && g.data[i] < 0x7f ? (char)g.data[i] : '?';
        msg[n] = '\0';
      }
    }
    if (rc2 < 0) return -1;
  }
  return rc < 0 ? -1 : 0;
}

enum pp_send_result pp_otlp_send(const char *url, const void *body, size_t len,
                                 const struct pp_http_opts *o, char *err, size_t errlen) {
  const char *headers[] = {"Content-Type: application/x-protobuf", "Content-Encoding: gzip",
                           "User-Agent: polyprof/" POLYPROF_VERSION, NULL};
  struct pp_http_result r;
  int rc = pp_http_post(url, headers, body, len, o, &r);
  enum pp_send_result out = PP_SEND_OK;
  if (rc < 0) {
    snprintf(err, errlen, "%s", r.error);
    out = PP_SEND_RETRY;
  } else if (r.status < 200 || r.status >= 300) {
    /* the OTLP/HTTP retryable statuses; everything else is final */
    snprintf(err, errlen, "HTTP %ld", r.status);
    out = r.status == 429 || r.status == 502 || r.status == 503 || r.status == 504 ? PP_SEND_RETRY
                                                                                   : PP_SEND_DROP;
  } else if (r.body && r.body_len) {
    int64_t rejected;
    char msg[200];
    if (pp_otlp_parse_response((const uint8_t *)r.body, r.body_len, &rejected, msg, sizeof(msg)) <
        0)
      pp_log(PP_LOG_WARNING, TAG,
             "collector %s: unreadable reply (%zu bytes) to an accepted export", url, r.body_len);
    else if (rejected > 0 || msg[0])
      pp_log(PP_LOG_WARNING, TAG, "collector %s rejected %lld profile(s): %s", url,
             (long long)rejected, msg[0] ? msg : "(no message)");
  }
  pp_http_result_free(&r);
  return out;
}
