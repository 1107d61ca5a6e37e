/* SPDX-License-Identifier: Apache-2.0 */
/* Buffered log shipping (see logship.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <jansson.h>

#include "log.h"
#include "metadata.h"
#include "support/gzip.h"
#include "upload/http.h"
#include "upload/logship.h"

#define BUF_MAX (4u << 20)
#define MSG_MAX (64u << 10)

struct pp_logship {
  pthread_mutex_t mu;
  json_t *logs; /* records */
  size_t bytes; /* approximate size of logs */
  unsigned long lost;
  unsigned long serial;
  char run_id[33], cycle_id[33];
  char *service, *hostname, *token;
};

static int severity(int level) {
  switch (level) {
    case PP_LOG_DEBUG:
      return 2;
    case PP_LOG_INFO:
      return 3;
    case PP_LOG_WARNING:
      return 4;
    default:
      return 5;
  }
}

/* msg with every occurrence of the token replaced. */
static char *redact(const char *msg, const char *token) {
  size_t tl = token ? strlen(token) : 0;
  size_t n = strnlen(msg, MSG_MAX);
  char *out = malloc(n + 1 + (tl ? (n / tl + 1) * 10 : 0));
  if (!out) return NULL;
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    if (tl >= 4 && i + tl <= n && memcmp(msg + i, token, tl) == 0) {
      memcpy(out + o, "<redacted>", 10);
      o += 10;
      i += tl;
    } else {
      out[o++] = msg[i++];
    }
  }
  out[o] = '\0';
  return out;
}

static void tap(int level, const char *tag, const char *msg, void *ctx) {
  struct pp_logship *l = ctx;
  if (level < PP_LOG_INFO) return;
  char *m = redact(msg, l->token);
  if (!m) return;
  struct timeval tv;
  gettimeofday(&tv, NULL);
  char iso[32];
  pp_iso_time(tv.tv_sec, iso, sizeof(iso));
  pthread_mutex_lock(&l->mu);
  json_t *text =
      json_pack("{s:s,s:I,s:o,s:b,s:i,s:s,s:s,s:s,s:s,s:n,s:{s:s}}", "logger_name", tag,
                "serial_no", (json_int_t)l->serial++, "message", pp_json_string_lossy(m, strlen(m)),
                "truncated", strlen(msg) > MSG_MAX, "lineno", 0, "pathname", "", "funcname", "",
                "thread", "", "timestamp", iso, "exception", "extra", "cycle_id", l->cycle_id);
  json_t *rec = text ? json_pack("{s:i,s:I,s:o}", "severity", severity(level), "timestamp",
                                 (json_int_t)tv.tv_sec * 1000 + tv.tv_usec / 1000, "text", text)
                     : NULL;
  size_t sz = strlen(m) + strlen(tag) + 300;
  if (rec) {
    if (l->bytes + sz > BUF_MAX) {
      /* full: drop the oldest quarter, as glogger does */
      size_t n = json_array_size(l->logs), drop = n / 4 ? n / 4 : n;
      for (size_t i = 0; i < drop; i++)
        json_array_remove(l->logs, 0);
      l->lost += drop;
      l->bytes = l->bytes * (n - drop) / (n ? n : 1);
    }
    json_array_append_new(l->logs, rec);
    l->bytes += sz;
  }
  pthread_mutex_unlock(&l->mu);
  free(m);
}

struct pp_logship *pp_logship_new(const char *service, const char *hostname, const char *token) {
  struct pp_logship *l = calloc(1, sizeof(*l));
  if (!l) return NULL;
  pthread_mutex_init(&l->mu, NULL);
  l->logs = json_array();
  l->service = strdup(service ? service : "");
  l->hostname = strdup(hostname ? hostname : "");
  l->token = token ? strdup(token) : NULL;
  pp_http_random_hex(l->run_id);
  memcpy(l->cycle_id, l->run_id, sizeof(l->cycle_id));
  pp_log_set_tap(tap, l);
  return l;
}

void pp_logship_free(struct pp_logship *l) {
  if (!l) return;
  pp_log_set_tap(NULL, NULL);
  json_decref(l->logs);
  free(l->service);
  free(l->hostname);
  if (l->token) explicit_bzero(l->token, strlen(l->token));
  free(l->token);
  pthread_mutex_destroy(&l->mu);
  free(l);
}

void pp_logship_new_cycle(struct pp_logship *l) {
  if (!l) return;
  pthread_mutex_lock(&l->mu);
  pp_http_random_hex(l->cycle_id);
  pthread_mutex_unlock(&l->mu);
}

int pp_logship_take(struct pp_logship *l, unsigned char **body, size_t *len) {
  pthread_mutex_lock(&l->mu);
  if (json_array_size(l->logs) == 0) {
    pthread_mutex_unlock(&l->mu);
    return -ENODATA;
  }
  json_t *logs = l->logs;
  unsigned long lost = l->lost;
  l->logs = json_array();
  l->bytes = 0;
  l->lost = 0;
  char batch[33];
  pp_http_random_hex(batch);
  json_t *o =
      json_pack("{s:s,s:{s:s,s:s,s:s,s:s},s:I,s:o}", "batch_id", batch, "metadata", "run_id",
                l->run_id, "gprofiler_version", POLYPROF_VERSION, "service_name", l->service,
                "hostname", l->hostname, "lost_logs_count", (json_int_t)lost, "logs", logs);
  pthread_mutex_unlock(&l->mu);
  char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  if (!text) return -ENOMEM;
  int rc = pp_gzip(text, strlen(text), 6, body, len);
  free(text);
  return rc;
}
