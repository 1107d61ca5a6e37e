/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Small libcurl wrapper shared by the studio, Pyroscope and log clients
 * (libcurl is loaded on the first request, not linked: see http.c):
 * one POST with TLS verified by default, proxies from the environment
 * (libcurl reads https_proxy / HTTPS_PROXY / no_proxy itself), bounded
 * timeouts, a bounded response body (servers are not trusted), and an abort
 * flag so the agent can stop in the middle of a slow request.
 */
#ifndef PP_UPLOAD_HTTP_H
#define PP_UPLOAD_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PP_HTTP_MAX_RESPONSE (64 * 1024) /* longer replies are cut off and fail */

struct pp_http_opts {
  const char *ca_file;     /* NULL: system store */
  bool verify;             /* false only with --insecure-skip-verify */
  long connect_timeout_ms; /* 0: curl default */
  long timeout_ms;         /* whole request */
  volatile int *abort;     /* non-zero aborts the transfer (may be NULL) */
  size_t max_response;     /* 0: PP_HTTP_MAX_RESPONSE */
};

struct pp_http_result {
  long status;     /* HTTP status, 0 if no response */
  char error[256]; /* transport error text ("" if a response came) */
  char *body;      /* NUL-terminated, malloc'd (may be NULL) */
  size_t body_len;
};

/* POST body to url. headers: NULL-terminated "Name: value" lines. Returns 0
 * if a response arrived (whatever its status), -1 on a transport error
 * (res->error says why). res->body must be freed by the caller. */
int pp_http_post(const char *url, const char *const *headers, const void *body, size_t len,
                 const struct pp_http_opts *o, struct pp_http_result *res);
/* GET, same conventions. */
int pp_http_get(const char *url, const char *const *headers, const struct pp_http_opts *o,
                struct pp_http_result *res);
/* PUT with an empty body (AWS IMDSv2 token). */
int pp_http_put(const char *url, const char *const *headers, const struct pp_http_opts *o,
                struct pp_http_result *res);
void pp_http_result_free(struct pp_http_result *res);

/* Once per process, before any thread uses curl: loads libcurl (it is not
 * linked, see http.c). A failure is reported by every request after it. */
void pp_http_global_init(void);

/* s percent-encoded for a URL query value: every byte but A-Z a-z 0-9 - . _ ~
 * as %XX (what curl_easy_escape does). malloc'd, NULL if out of memory. */
char *pp_url_escape(const char *s);

/* A URL for logs: query values of key/token replaced by "<redacted>". */
void pp_http_redact_url(const char *url, char *out, size_t len);

/* "2026-11-22T03:50:00" for now (UTC). */
void pp_http_now_iso(char *buf, size_t len);
/* 32 random hex digits (for ids, batch ids). */
void pp_http_random_hex(char out[33]);

#endif
