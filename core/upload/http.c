/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libcurl POST/GET helpers for the uploaders (see http.h).
 *
 * libcurl is dlopen()ed on the first request instead of linked: with its
 * dependencies (TLS, Kerberos, LDAP, SSH, IDN... about 30 libraries, some
 * of which initialise themselves when loaded) it made up ~8 MiB of the
 * agent's 11 MiB resident set, and by default the agent never uploads.
 * Only the header is used at build time; the soname is libcurl's stable
 * ABI (libcurl.so.4).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <curl/curl.h>

#include "upload/http.h"

#define CURL_SONAME "libcurl.so.4"

/* The part of libcurl's API we call. */
static struct {
  CURLcode (*global_init)(long);
  CURL *(*easy_init)(void);
  CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
  CURLcode (*easy_perform)(CURL *);
  CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
  void (*easy_cleanup)(CURL *);
  const char *(*easy_strerror)(CURLcode);
  struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
  void (*slist_free_all)(struct curl_slist *);
} curl;
static bool curl_ok;
static char curl_error[200]; /* why it could not be loaded */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void do_init(void) {
  void *h = dlopen(CURL_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    snprintf(curl_error, sizeof(curl_error), "cannot load %s (install libcurl4): %s", CURL_SONAME,
             e ? e : "unknown error");
    return;
  }
  struct {
    void **slot;
    const char *name;
  } syms[] = {
      {(void **)&curl.global_init, "curl_global_init"},
      {(void **)&curl.easy_init, "curl_easy_init"},
      {(void **)&curl.easy_setopt, "curl_easy_setopt"},
      {(void **)&curl.easy_perform, "curl_easy_perform"},
      {(void **)&curl.easy_getinfo, "curl_easy_getinfo"},
      {(void **)&curl.easy_cleanup, "curl_easy_cleanup"},
      {(void **)&curl.easy_strerror, "curl_easy_strerror"},
      {(void **)&curl.slist_append, "curl_slist_append"},
      {(void **)&curl.slist_free_all, "curl_slist_free_all"},
  };
  for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
    if (!(*syms[i].slot = dlsym(h, syms[i].name))) {
      snprintf(curl_error, sizeof(curl_error), "%s has no %s: not a usable libcurl", CURL_SONAME,
               syms[i].name);
      return; /* the handle stays open: harmless, and dlclose could race */
    }
  }
  if (curl.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    snprintf(curl_error, sizeof(curl_error), "curl_global_init failed");
    return;
  }
  curl_ok = true;
}

char *pp_url_escape(const char *s) {
  static const char hex[] = "0123456789ABCDEF";
  size_t n = strlen(s);
  if (n > (SIZE_MAX - 1) / 3) return NULL;
  char *out = malloc(n * 3 + 1), *o = out;
  if (!out) return NULL;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    unsigned char c = *p;
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      *o++ = (char)c;
    } else {
      *o++ = '%';
      *o++ = hex[c >> 4];
      *o++ = hex[c & 15];
    }
  }
  *o = 0;
  return out;
}

void pp_http_global_init(void) {
  pthread_once(&curl_once, do_init);
}

struct sink {
  char *buf;
  size_t len;
  size_t cap; /* bytes kept at most */
  bool overflow;
};

/* Keeps at most PP_HTTP_MAX_RESPONSE bytes: a hostile or broken server
 * cannot make the agent allocate without bound. */
static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ud) {
  struct sink *s = ud;
  size_t n = size * nmemb;
  if (s->len + n > s->cap) {
    s->overflow = true;
    return 0; /* aborts the transfer */
  }
  char *b = realloc(s->buf, s->len + n + 1);
  if (!b) return 0;
  memcpy(b + s->len, ptr, n);
  s->buf = b;
  s->len += n;
  b[s->len] = '\0';
  return n;
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
  volatile int *abort_flag = ud;
  return abort_flag && *abort_flag ? 1 : 0;
}

static int perform(const char *url, const char *const *headers, const void *body, size_t len,
                   const char *method, const struct pp_http_opts *o, struct pp_http_result *res) {
  bool post = method && strcmp(method, "GET") != 0;
  pp_http_global_init();
  memset(res, 0, sizeof(*res));
  if (!curl_ok) {
    snprintf(res->error, sizeof(res->error), "%s", curl_error);
    return -1;
  }
  CURL *c = curl.easy_init();
  if (!c) {
    snprintf(res->error, sizeof(res->error), "curl_easy_init failed");
    return -1;
  }
  struct curl_slist *hl = NULL;
  for (size_t i = 0; headers && headers[i]; i++)
    hl = curl.slist_append(hl, headers[i]);
  /* curl adds "Expect: 100-continue" to big POSTs; servers behind some
   * proxies stall on it, and it buys nothing here */
  hl = curl.slist_append(hl, "Expect:");
  struct sink s = {.cap = o->max_response ? o->max_response : PP_HTTP_MAX_RESPONSE};
  char ebuf[CURL_ERROR_SIZE] = "";
  curl.easy_setopt(c, CURLOPT_URL, url);
  curl.easy_setopt(c, CURLOPT_HTTPHEADER, hl);
  curl.easy_setopt(c, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM for DNS timeouts */
  curl.easy_setopt(c, CURLOPT_ERRORBUFFER, ebuf);
  curl.easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
  curl.easy_setopt(c, CURLOPT_WRITEDATA, &s);
  curl.easy_setopt(c, CURLOPT_USERAGENT, "polyprof/" POLYPROF_VERSION);
  curl.easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl.easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl.easy_setopt(c, CURLOPT_SSL_VERIFYPEER, o->verify ? 1L : 0L);
  curl.easy_setopt(c, CURLOPT_SSL_VERIFYHOST, o->verify ? 2L : 0L);
  if (o->ca_file) curl.easy_setopt(c, CURLOPT_CAINFO, o->ca_file);
  if (o->connect_timeout_ms > 0)
    curl.easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, o->connect_timeout_ms);
  if (o->timeout_ms > 0) curl.easy_setopt(c, CURLOPT_TIMEOUT_MS, o->timeout_ms);
  if (o->abort) {
    curl.easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl.easy_setopt(c, CURLOPT_XFERINFODATA, (void *)o->abort);
    curl.easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  }
  if (post) {
    curl.easy_setopt(c, CURLOPT_POST, 1L);
    curl.easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl.easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    if (strcmp(method, "POST") != 0) curl.easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  }
  CURLcode rc = curl.easy_perform(c);
  long status = 0;
  curl.easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  res->status = status;
  res->body = s.buf;
  res->body_len = s.len;
  int ret = 0;
  if (rc != CURLE_OK) {
    if (s.overflow)
      snprintf(res->error, sizeof(res->error), "reply longer than %zu bytes", s.cap);
    else
      snprintf(res->error, sizeof(res->error), "%s", ebuf[0] ? ebuf : curl.easy_strerror(rc));
    /* a response that was cut off does not count as an answer */
    res->status = 0;
    ret = -1;
  }
  curl.slist_free_all(hl);
  curl.easy_cleanup(c);
  return ret;
}

int pp_http_post(const char *url, const char *const *headers, const void *body, size_t len,
                 const struct pp_http_opts *o, struct pp_http_result *res) {
  return perform(url, headers, body, len, "POST", o, res);
}

int pp_http_put(const char *url, const char *const *headers, const struct pp_http_opts *o,
                struct pp_http_result *res) {
  return perform(url, headers, "", 0, "PUT", o, res);
}

int pp_http_get(const char *url, const char *const *headers, const struct pp_http_opts *o,
                struct pp_http_result *res) {
  return perform(url, headers, NULL, 0, "GET", o, res);
}

void pp_http_result_free(struct pp_http_result *res) {
  free(res->body);
  res->body = NULL;
}

void pp_http_redact_url(const char *url, char *out, size_t len) {
  size_t o = 0;
  const char *p = url;
  while (*p && o + 1 < len) {
    bool at_param = (p == url || p[-1] == '?' || p[-1] == '&');
    if (at_param && (strncmp(p, "key=", 4) == 0 || strncmp(p, "token=", 6) == 0)) {
      size_t kl = strcspn(p, "=") + 1;
      int n = snprintf(out + o, len - o, "%.*s<redacted>", (int)kl, p);
      if (n < 0 || (size_t)n >= len - o) break;
      o += (size_t)n;
      p += kl + strcspn(p + kl, "&");
      continue;
    }
    out[o++] = *p++;
  }
  out[o < len ? o : len - 1] = '\0';
}

void pp_http_now_iso(char *buf, size_t len) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
}

void pp_http_random_hex(char out[33]) {
  unsigned char r[16];
  if (getrandom(r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)(uintptr_t)out;
    for (int i = 0; i < 16; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      r[i] = (unsigned char)x;
    }
  }
  for (int i = 0; i < 16; i++)
    snprintf(out + 2 * i, 3, "%02x", r[i]);
}
