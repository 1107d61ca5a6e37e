/* SPDX-License-Identifier: Apache-2.0 */
/* Performance Studio profile upload (see studio.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "metadata.h"
#include "support/gzip.h"
#include "support/json_string.h"
#include "upload/studio.h"

static void put_avg(FILE *f, double v) {
  char buf[64];
  if (v < 0 || !pp_json_real_repr(v, buf, sizeof(buf)))
    fputs("null", f);
  else
    fputs(buf, f);
}

/* Written by hand rather than through jansson: the profile text can be tens
 * of MB and this way it is escaped in one pass, without building a copy. */
int pp_studio_body(const char *col, size_t col_len, time_t start, time_t end, double cpu_avg,
                   double mem_avg, time_t spawn_time, const char *gpid, unsigned char **out,
                   size_t *out_len) {
  char s_iso[32], e_iso[32], spawn_iso[32], host[256] = "";
  pp_iso_time(start, s_iso, sizeof(s_iso));
  pp_iso_time(end, e_iso, sizeof(e_iso));
  pp_iso_time(spawn_time, spawn_iso, sizeof(spawn_iso));
  if (gethostname(host, sizeof(host) - 1) != 0) snprintf(host, sizeof(host), "<unknown>");
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) return -ENOMEM;
  fprintf(f, "{\"start_time\":\"%s\",\"end_time\":\"%s\",\"hostname\":", s_iso, e_iso);
  pp_json_put_string(f, host, strlen(host));
  /* the .col text comes from process names and symbols: invalid UTF-8
   * becomes U+FFFD so the body stays valid JSON */
  fputs(",\"profile\":", f);
  pp_json_put_string(f, col, col_len);
  fputs(",\"cpu_avg\":", f);
  put_avg(f, cpu_avg);
  fputs(",\"mem_avg\":", f);
  put_avg(f, mem_avg);
  fprintf(f, ",\"spawn_time\":\"%s\",\"gpid\":", spawn_iso);
  pp_json_put_string(f, gpid ? gpid : "", gpid ? strlen(gpid) : 0);
  fputs("}", f);
  if (fclose(f) != 0) {
    free(text);
    return -ENOMEM;
  }
  int rc = pp_gzip(text, len, 6, out, out_len);
  free(text);
  return rc;
}

/* base + "/api/<ver>/<path>?service=..&hostname=..&timestamp=..[&extra]".
 * The token travels only in the GPROFILER-API-KEY header, which is where
 * the studio reads it (docs/upload.md): a URL ends up in proxy and server
 * access logs, a header does not. */
static char *studio_url(const struct pp_studio_conf *c, const char *path, const char *extra) {
  char ts[32];
  pp_http_now_iso(ts, sizeof(ts));
  char *s = pp_url_escape(c->service_name ? c->service_name : "");
  char *h = pp_url_escape(c->hostname ? c->hostname : "");
  char *t = pp_url_escape(ts);
  char *url = NULL;
  size_t bl = strlen(c->server_host);
  while (bl && c->server_host[bl - 1] == '/')
    bl--;
  if (s && h && t &&
      asprintf(&url, "%.*s%s?service=%s&hostname=%s&timestamp=%s%s%s", (int)bl, c->server_host,
               path, s, h, t, extra ? "&" : "", extra ? extra : "") < 0)
    url = NULL;
  free(s);
  free(h);
  free(t);
  return url;
}

struct hdrs {
  char key[1200], svc[600];
};

static void auth_headers(const struct pp_studio_conf *c, struct hdrs *h) {
  snprintf(h->key, sizeof(h->key), "GPROFILER-API-KEY: %s", c->token ? c->token : "");
  snprintf(h->svc, sizeof(h->svc), "GPROFILER-SERVICE-NAME: %s",
           c->service_name ? c->service_name : "");
}

/* The "message" of a JSON error reply, sanitised for one log line. */
static void reply_message(const struct pp_http_result *r, char *out, size_t len) {
  out[0] = '\0';
  if (!r->body) return;
  json_t *j = json_loadb(r->body, r->body_len, JSON_DISABLE_EOF_CHECK, NULL);
  const char *m = j ? json_string_value(json_object_get(j, "message")) : NULL;
  snprintf(out, len, "%.200s", m ? m : "");
  for (char *p = out; *p; p++)
    if ((unsigned char)*p < 0x20) *p = ' ';
  json_decref(j);
}

enum pp_send_result pp_studio_send(const struct pp_studio_conf *c, const char *id, const void *body,
                                   size_t len, char gpid[PP_GPID_MAX + 1], char *err,
                                   size_t errlen) {
  char extra[64];
  snprintf(extra, sizeof(extra), "version=%s", POLYPROF_VERSION);
  char *url = studio_url(c, "/api/v2/profiles", extra);
  if (!url) {
    snprintf(err, errlen, "out of memory");
    return PP_SEND_RETRY;
  }
  struct hdrs h;
  auth_headers(c, &h);
  char idh[64];
  snprintf(idh, sizeof(idh), "X-Polyprof-Upload-Id: %s", id ? id : "");
  const char *headers[] = {h.key, h.svc, "Content-Encoding: gzip", "Content-Type: application/json",
                           idh,   NULL};
  struct pp_http_result r;
  int rc = pp_http_post(url, headers, body, len, &c->http, &r);
  explicit_bzero(h.key, sizeof(h.key));
  explicit_bzero(url, strlen(url));
  free(url);
  enum pp_send_result out = PP_SEND_OK;
  if (rc < 0) {
    snprintf(err, errlen, "%s", r.error);
    out = PP_SEND_RETRY;
  } else if (r.status >= 200 && r.status < 300) {
    json_t *j = r.body ? json_loadb(r.body, r.body_len, 0, NULL) : NULL;
    json_t *g = j ? json_object_get(j, "gpid") : NULL;
    /* gpid is echoed back next time: accept only a short printable value */
    char tmp[PP_GPID_MAX + 1] = "";
    if (json_is_string(g) && json_string_length(g) <= PP_GPID_MAX)
      snprintf(tmp, sizeof(tmp), "%s", json_string_value(g));
    else if (json_is_integer(g))
      snprintf(tmp, sizeof(tmp), "%lld", (long long)json_integer_value(g));
    bool ok = tmp[0] != '\0';
    for (char *p = tmp; *p; p++)
      if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e) ok = false;
    if (ok) memcpy(gpid, tmp, sizeof(tmp));
    json_decref(j);
  } else {
    char msg[256];
    reply_message(&r, msg, sizeof(msg));
    snprintf(err, errlen, "HTTP %ld%s%s", r.status, msg[0] ? ": " : "", msg);
    bool transient = r.status >= 500 || r.status == 408 || r.status == 429 || r.status == 401 ||
                     r.status == 403 || r.status < 200;
    out = transient ? PP_SEND_RETRY : PP_SEND_DROP;
  }
  pp_http_result_free(&r);
  return out;
}

int pp_studio_health(const struct pp_studio_conf *c, char *err, size_t errlen) {
  char *url = studio_url(c, "/api/v1/health_check", NULL);
  if (!url) return -1;
  struct hdrs h;
  auth_headers(c, &h);
  const char *headers[] = {h.key, h.svc, NULL};
  struct pp_http_opts o = c->http;
  o.timeout_ms = 5000;
  struct pp_http_result r;
  int rc = pp_http_get(url, headers, &o, &r);
  explicit_bzero(h.key, sizeof(h.key));
  free(url);
  if (rc == 0 && (r.status < 200 || r.status >= 300)) {
    snprintf(err, errlen, "HTTP %ld", r.status);
    rc = -1;
  } else if (rc < 0) {
    snprintf(err, errlen, "%s", r.error);
  }
  pp_http_result_free(&r);
  return rc;
}
