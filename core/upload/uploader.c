/* SPDX-License-Identifier: Apache-2.0 */
/* Background delivery with retries and an on-disk spool (see uploader.h). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "upload/http.h"
#include "upload/logship.h"
#include "upload/otlp.h"
#include "upload/spool.h"
#include "upload/studio.h"
#include "upload/uploader.h"

#define TAG "polyprof.upload"
#define QUEUE_MAX 16 /* items held in memory; older studio items overflow to the spool */
#define GRACE_MAX_MS 15000

enum kind { K_STUDIO, K_PYROSCOPE, K_LOGS, K_OTLP };

struct item {
  enum kind kind;
  char id[33];
  time_t end;
  unsigned char *body;
  size_t len;
  char *url; /* pyroscope */
  char ctype[96];
  struct item *next;
};

struct pp_uploader {
  pthread_t th;
  bool started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct item *head, *tail;
  size_t qlen;
  bool busy;
  bool stopping;
  uint64_t deadline_ms; /* monotonic: end of the shutdown grace period */
  volatile int abort_flag;
  bool spool_dirty; /* the spool may hold something worth trying now */
  bool otlp_spool_dirty;
  int undelivered; /* items spooled or dropped (for flush) */

  bool studio;
  struct pp_logship *logs; /* NULL unless shipping logs */
  struct pp_spool *spool;
  struct pp_spool *otlp_spool; /* OTLP requests that failed, in <spool_dir>/otlp */
  char *otlp_url;
  struct pp_studio_conf sc;
  char *server_host, *token, *service, *hostname, *ca, *api_server;
  int retries, backoff_ms;
  time_t spawn;
  char gpid[PP_GPID_MAX + 1];
};

static uint64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void free_item(struct item *it) {
  if (!it) return;
  free(it->body);
  free(it->url);
  free(it);
}

/* Caller holds mu. */
static bool past_deadline(struct pp_uploader *u) {
  return u->stopping && mono_ms() >= u->deadline_ms;
}

static struct pp_spool *spool_of(struct pp_uploader *u, enum kind k) {
  return k == K_STUDIO ? u->spool : k == K_OTLP ? u->otlp_spool : NULL;
}

static void spool_or_drop(struct pp_uploader *u, struct item *it, const char *why) {
  struct pp_spool *sp = spool_of(u, it->kind);
  if (sp) {
    int rc = pp_spool_put(sp, it->end, it->id, it->body, it->len);
    if (rc == 0) {
      size_t bytes, n = pp_spool_count(sp, &bytes);
      pp_log(PP_LOG_WARNING, TAG,
             "profile %s kept in the spool for a later retry (%zu held, %zu bytes)", it->id, n,
             bytes);
      pthread_mutex_lock(&u->mu);
      u->undelivered++;
      pthread_mutex_unlock(&u->mu);
      return;
    }
    pp_log(PP_LOG_ERROR, TAG, "profile %s dropped: cannot spool its %zu bytes: %s", it->id, it->len,
           strerror(-rc));
  } else if (it->kind != K_LOGS) {
    pp_log(PP_LOG_ERROR, TAG, "%s %s dropped: %s",
           it->kind == K_STUDIO ? "profile"
           : it->kind == K_OTLP ? "OTLP export"
                                : "pyroscope push",
           it->id, why);
  }
  pthread_mutex_lock(&u->mu);
  u->undelivered++;
  pthread_mutex_unlock(&u->mu);
}

static enum pp_send_result send_item(struct pp_uploader *u, struct item *it, char *err,
                                     size_t errlen) {
  if (it->kind == K_STUDIO) {
    char gpid[PP_GPID_MAX + 1];
    pthread_mutex_lock(&u->mu);
    memcpy(gpid, u->gpid, sizeof(gpid));
    pthread_mutex_unlock(&u->mu);
    enum pp_send_result r = pp_studio_send(&u->sc, it->id, it->body, it->len, gpid, err, errlen);
    if (r == PP_SEND_OK) {
      pthread_mutex_lock(&u->mu);
      memcpy(u->gpid, gpid, sizeof(gpid));
      pthread_mutex_unlock(&u->mu);
    }
    return r;
  }
  if (it->kind == K_OTLP)
    return pp_otlp_send(u->otlp_url, it->body, it->len, &u->sc.http, err, errlen);
  char ct[128], tok[1200];
  snprintf(ct, sizeof(ct), "Content-Type: %s", it->ctype);
  const char *h_pyro[] = {ct, NULL};
  snprintf(tok, sizeof(tok), "X-Token: %s", u->token ? u->token : "");
  const char *h_logs[] = {"Content-Encoding: gzip", "Content-Type: application/json",
                          "X-Application-Name: gprofiler", tok, NULL};
  char url[2048];
  if (it->kind == K_LOGS) {
    size_t bl = strlen(u->api_server);
    while (bl && u->api_server[bl - 1] == '/')
      bl--;
    snprintf(url, sizeof(url), "%.*s/api/v1/logs", (int)bl, u->api_server);
  }
  struct pp_http_opts o = u->sc.http;
  if (it->kind == K_LOGS) o.timeout_ms = 10000, o.connect_timeout_ms = 1500;
  struct pp_http_result r;
  int rc = pp_http_post(it->kind == K_LOGS ? url : it->url, it->kind == K_LOGS ? h_logs : h_pyro,
                        it->body, it->len, &o, &r);
  explicit_bzero(tok, sizeof(tok));
  enum pp_send_result out = PP_SEND_OK;
  if (rc < 0) {
    snprintf(err, errlen, "%s", r.error);
    out = PP_SEND_RETRY;
  } else if (r.status < 200 || r.status >= 300) {
    snprintf(err, errlen, "HTTP %ld", r.status);
    out = r.status >= 500 || r.status == 429 || r.status == 408 ? PP_SEND_RETRY : PP_SEND_DROP;
  }
  pp_http_result_free(&r);
  return out;
}

static const char *kind_name(enum kind k) {
  return k == K_STUDIO      ? "profile upload"
         : k == K_PYROSCOPE ? "pyroscope push"
         : k == K_OTLP      ? "OTLP export"
                            : "log batch";
}

static void process(struct pp_uploader *u, struct item *it) {
  int attempts = it->kind == K_LOGS ? 1 : 1 + u->retries;
  char err[320] = "";
  for (int k = 0;; k++) {
    pthread_mutex_lock(&u->mu);
    bool late = past_deadline(u), stopping = u->stopping;
    pthread_mutex_unlock(&u->mu);
    if (late) {
      snprintf(err, sizeof(err), "agent stopping");
      break;
    }
    enum pp_send_result r = send_item(u, it, err, sizeof(err));
    if (r == PP_SEND_OK) {
      pp_log(PP_LOG_DEBUG, TAG, "%s %s delivered (%zu bytes)", kind_name(it->kind), it->id,
             it->len);
      if (it->kind == K_STUDIO) {
        pp_log(PP_LOG_INFO, TAG, "profile %s uploaded (%zu bytes)", it->id, it->len);
        pthread_mutex_lock(&u->mu);
        u->spool_dirty = u->spool != NULL;
        pthread_mutex_unlock(&u->mu);
      } else if (it->kind == K_OTLP) {
        pthread_mutex_lock(&u->mu);
        u->otlp_spool_dirty = u->otlp_spool != NULL;
        pthread_mutex_unlock(&u->mu);
      }
      free_item(it);
      return;
    }
    if (r == PP_SEND_DROP) {
      pp_log(PP_LOG_ERROR, TAG, "%s %s refused by the server: %s (dropped)", kind_name(it->kind),
             it->id, err);
      pthread_mutex_lock(&u->mu);
      u->undelivered++;
      pthread_mutex_unlock(&u->mu);
      free_item(it);
      return;
    }
    pp_log(it->kind == K_LOGS ? PP_LOG_DEBUG : PP_LOG_WARNING, TAG,
           "%s %s failed (attempt %d/%d): %s", kind_name(it->kind), it->id, k + 1, attempts, err);
    if (k + 1 >= attempts || stopping) break;
    /* exponential backoff with +-50 % jitter, so a fleet that lost its
     * server does not come back in lockstep */
    double base = (double)u->backoff_ms * (double)(1u << (k < 20 ? k : 20));
    double jitter = 0.5 + (double)(rand() % 1001) / 1000.0;
    uint64_t wait_ms = (uint64_t)(base * jitter);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(wait_ms / 1000);
    ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&u->mu);
    while (!u->stopping && pthread_cond_timedwait(&u->cv, &u->mu, &ts) != ETIMEDOUT) {
    }
    pthread_mutex_unlock(&u->mu);
  }
  spool_or_drop(u, it, err);
  free_item(it);
}

/* One attempt at the oldest spooled profile. */
static void drain_one(struct pp_uploader *u) {
  char path[4200], id[33], err[320] = "";
  if (pp_spool_oldest(u->spool, path, sizeof(path), id) < 0) {
    pthread_mutex_lock(&u->mu);
    u->spool_dirty = false;
    pthread_mutex_unlock(&u->mu);
    return;
  }
  unsigned char *body = NULL;
  size_t len = 0;
  int rc = pp_spool_read(u->spool, path, &body, &len);
  if (rc == -EBADMSG || rc == -EFBIG) {
    /* never sendable: a cut-off gzip or more than the whole spool may hold */
    pp_log(PP_LOG_ERROR, TAG, "spooled %s is %s: not uploaded, removed", path,
           rc == -EBADMSG ? "incomplete (a truncated gzip)" : "larger than the spool cap");
    pp_spool_remove(u->spool, path);
    return;
  }
  if (rc < 0) {
    /* a short read or an I/O error may pass: the file stays for a later try */
    pp_log(PP_LOG_WARNING, TAG, "spooled %s unreadable (%s): kept for a later attempt", path,
           strerror(-rc));
    pthread_mutex_lock(&u->mu);
    u->spool_dirty = false;
    pthread_mutex_unlock(&u->mu);
    return;
  }
  char gpid[PP_GPID_MAX + 1];
  pthread_mutex_lock(&u->mu);
  memcpy(gpid, u->gpid, sizeof(gpid));
  pthread_mutex_unlock(&u->mu);
  enum pp_send_result r = pp_studio_send(&u->sc, id, body, len, gpid, err, sizeof(err));
  free(body);
  if (r == PP_SEND_RETRY) {
    pp_log(PP_LOG_INFO, TAG, "spooled profile %s not sent yet: %s", id, err);
    pthread_mutex_lock(&u->mu);
    u->spool_dirty = false; /* wait for the next successful upload */
    pthread_mutex_unlock(&u->mu);
    return;
  }
  pp_spool_remove(u->spool, path);
  if (r == PP_SEND_OK) {
    pthread_mutex_lock(&u->mu);
    memcpy(u->gpid, gpid, sizeof(gpid));
    pthread_mutex_unlock(&u->mu);
    pp_log(PP_LOG_INFO, TAG, "spooled profile %s uploaded", id);
  } else {
    pp_log(PP_LOG_ERROR, TAG, "spooled profile %s refused by the server: %s (dropped)", id, err);
  }
}

/* One attempt at the oldest spooled OTLP request. */
static void drain_one_otlp(struct pp_uploader *u) {
  char path[4200], id[33], err[320] = "";
  unsigned char *body = NULL;
  size_t len = 0;
  int rc = pp_spool_oldest(u->otlp_spool, path, sizeof(path), id);
  if (rc == 0) rc = pp_spool_read(u->otlp_spool, path, &body, &len);
  if (rc == -EBADMSG || rc == -EFBIG) {
    pp_log(PP_LOG_ERROR, TAG, "spooled %s is %s: not exported, removed", path,
           rc == -EBADMSG ? "incomplete (a truncated gzip)" : "larger than the spool cap");
    pp_spool_remove(u->otlp_spool, path);
    return;
  }
  enum pp_send_result r = PP_SEND_RETRY;
  if (rc == 0) r = pp_otlp_send(u->otlp_url, body, len, &u->sc.http, err, sizeof(err));
  free(body);
  if (rc < 0 || r == PP_SEND_RETRY) {
    if (rc < 0 && rc != -ENOENT)
      pp_log(PP_LOG_WARNING, TAG, "spooled %s unreadable (%s): kept for a later attempt", path,
             strerror(-rc));
    else if (rc == 0)
      pp_log(PP_LOG_INFO, TAG, "spooled OTLP export %s not sent yet: %s", id, err);
    pthread_mutex_lock(&u->mu);
    u->otlp_spool_dirty = false; /* wait for the next successful export */
    pthread_mutex_unlock(&u->mu);
    return;
  }
  pp_spool_remove(u->otlp_spool, path);
  if (r == PP_SEND_OK)
    pp_log(PP_LOG_INFO, TAG, "spooled OTLP export %s delivered", id);
  else
    pp_log(PP_LOG_ERROR, TAG, "spooled OTLP export %s refused by the collector: %s (dropped)", id,
           err);
}

static void *thread_main(void *arg) {
  struct pp_uploader *u = arg;
  if (u->studio) {
    char err[320];
    if (pp_studio_health(&u->sc, err, sizeof(err)) < 0)
      pp_log(PP_LOG_WARNING, TAG,
             "server %s not reachable (%s); profiles will be retried and spooled", u->server_host,
             err);
    else
      pp_log(PP_LOG_INFO, TAG, "server %s is up", u->server_host);
  }
  pthread_mutex_lock(&u->mu);
  for (;;) {
    while (!u->head && !u->stopping && !u->spool_dirty && !u->otlp_spool_dirty)
      pthread_cond_wait(&u->cv, &u->mu);
    if (u->head) {
      struct item *it = u->head;
      u->head = it->next;
      if (!u->head) u->tail = NULL;
      u->qlen--;
      u->busy = true;
      pthread_mutex_unlock(&u->mu);
      process(u, it);
      pthread_mutex_lock(&u->mu);
      u->busy = false;
      pthread_cond_broadcast(&u->cv);
      continue;
    }
    if (u->spool_dirty && !past_deadline(u)) {
      u->busy = true;
      pthread_mutex_unlock(&u->mu);
      drain_one(u);
      pthread_mutex_lock(&u->mu);
      u->busy = false;
      pthread_cond_broadcast(&u->cv);
      continue;
    }
    if (u->otlp_spool_dirty && !past_deadline(u)) {
      u->busy = true;
      pthread_mutex_unlock(&u->mu);
      drain_one_otlp(u);
      pthread_mutex_lock(&u->mu);
      u->busy = false;
      pthread_cond_broadcast(&u->cv);
      continue;
    }
    if (u->stopping) break;
    u->spool_dirty = false;
    u->otlp_spool_dirty = false;
  }
  pthread_mutex_unlock(&u->mu);
  return NULL;
}

static char *dup_or_null(const char *s) {
  return s ? strdup(s) : NULL;
}

struct pp_uploader *pp_uploader_new(const struct pp_config *cfg, time_t spawn_time) {
  if (!cfg->upload && !cfg->pyroscope_url && !cfg->otlp_endpoint) return NULL;
  pp_http_global_init();
  struct pp_uploader *u = calloc(1, sizeof(*u));
  if (!u) return NULL;
  pthread_mutex_init(&u->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&u->cv, &ca);
  pthread_condattr_destroy(&ca);
  char host[256] = "";
  if (gethostname(host, sizeof(host) - 1) != 0) snprintf(host, sizeof(host), "<unknown>");
  u->studio = cfg->upload;
  u->server_host = dup_or_null(cfg->server_host);
  u->token = dup_or_null(cfg->token);
  u->service = dup_or_null(cfg->service_name);
  u->hostname = strdup(host);
  u->ca = dup_or_null(cfg->server_ca);
  u->api_server = dup_or_null(cfg->api_server);
  u->retries = cfg->upload_retries;
  u->backoff_ms = cfg->retry_backoff_ms;
  u->spawn = spawn_time;
  u->sc = (struct pp_studio_conf){
      .server_host = u->server_host,
      .token = u->token,
      .service_name = u->service,
      .hostname = u->hostname,
      .http = {.ca_file = u->ca,
               .verify = cfg->tls_verify,
               .connect_timeout_ms = (long)cfg->connect_timeout_s * 1000,
               .timeout_ms = (long)cfg->upload_timeout_s * 1000,
               .abort = &u->abort_flag},
  };
  srand((unsigned)(time(NULL) ^ getpid()));
  if (!cfg->tls_verify)
    pp_log(PP_LOG_WARNING, TAG, "TLS certificate verification is off (--insecure-skip-verify)");
  if (u->studio && cfg->spool_dir) {
    char err[512];
    u->spool = pp_spool_open(cfg->spool_dir, cfg->spool_max_bytes, err, sizeof(err));
    if (!u->spool)
      pp_log(PP_LOG_WARNING, TAG, "%s: failed uploads will be dropped", err);
    else if (pp_spool_count(u->spool, NULL) > 0)
      u->spool_dirty = true; /* resend what an earlier run could not deliver */
  }
  if (cfg->otlp_endpoint) {
    u->otlp_url = pp_otlp_url(cfg->otlp_endpoint);
    if (!u->otlp_url) {
      pp_uploader_free(u);
      return NULL;
    }
  }
  if (cfg->otlp_endpoint && cfg->spool_dir) {
    char dir[4096], err[512];
    snprintf(dir, sizeof(dir), "%s/otlp", cfg->spool_dir);
    u->otlp_spool = pp_spool_open(dir, cfg->spool_max_bytes, err, sizeof(err));
    if (!u->otlp_spool)
      pp_log(PP_LOG_WARNING, TAG, "%s: failed OTLP exports will be dropped", err);
    else if (pp_spool_count(u->otlp_spool, NULL) > 0)
      u->otlp_spool_dirty = true;
  }
  if (u->studio && cfg->send_logs) u->logs = pp_logship_new(u->service, u->hostname, u->token);
  if (pthread_create(&u->th, NULL, thread_main, u) != 0) {
    pp_log(PP_LOG_ERROR, TAG, "cannot start the upload thread");
    pp_uploader_free(u);
    return NULL;
  }
  u->started = true;
  return u;
}

static void enqueue(struct pp_uploader *u, struct item *it) {
  struct item *overflow = NULL;
  pthread_mutex_lock(&u->mu);
  if (u->qlen >= QUEUE_MAX) {
    overflow = u->head;
    u->head = overflow->next;
    if (!u->head) u->tail = NULL;
    u->qlen--;
  }
  if (u->tail)
    u->tail->next = it;
  else
    u->head = it;
  u->tail = it;
  u->qlen++;
  pthread_cond_broadcast(&u->cv);
  pthread_mutex_unlock(&u->mu);
  if (overflow) {
    spool_or_drop(u, overflow, "upload queue full");
    free_item(overflow);
  }
}

void pp_uploader_submit(struct pp_uploader *u, const char *col, size_t len, time_t start,
                        time_t end, double cpu_avg, double mem_avg) {
  if (!u || !u->studio) return;
  struct item *it = calloc(1, sizeof(*it));
  if (!it) return;
  it->kind = K_STUDIO;
  it->end = end;
  pp_http_random_hex(it->id);
  char gpid[PP_GPID_MAX + 1];
  pthread_mutex_lock(&u->mu);
  memcpy(gpid, u->gpid, sizeof(gpid));
  pthread_mutex_unlock(&u->mu);
  if (pp_studio_body(col, len, start, end, cpu_avg, mem_avg, u->spawn, gpid, &it->body, &it->len) <
      0) {
    pp_log(PP_LOG_ERROR, TAG, "cannot encode the upload: out of memory");
    free_item(it);
    return;
  }
  enqueue(u, it);
}

void pp_uploader_submit_pyroscope(struct pp_uploader *u, char *url, unsigned char *body, size_t len,
                                  const char *content_type) {
  struct item *it = u ? calloc(1, sizeof(*it)) : NULL;
  if (!it) {
    free(url);
    free(body);
    return;
  }
  it->kind = K_PYROSCOPE;
  pp_http_random_hex(it->id);
  it->url = url;
  it->body = body;
  it->len = len;
  snprintf(it->ctype, sizeof(it->ctype), "%s", content_type);
  enqueue(u, it);
}

void pp_uploader_submit_otlp(struct pp_uploader *u, unsigned char *body, size_t len, time_t end) {
  struct item *it = u && u->otlp_url ? calloc(1, sizeof(*it)) : NULL;
  if (!it) {
    free(body);
    return;
  }
  it->kind = K_OTLP;
  it->end = end;
  pp_http_random_hex(it->id);
  it->body = body;
  it->len = len;
  enqueue(u, it);
}

void pp_uploader_submit_logs(struct pp_uploader *u, unsigned char *body, size_t len) {
  struct item *it = u ? calloc(1, sizeof(*it)) : NULL;
  if (!it) {
    free(body);
    return;
  }
  it->kind = K_LOGS;
  pp_http_random_hex(it->id);
  it->body = body;
  it->len = len;
  enqueue(u, it);
}

int pp_uploader_flush(struct pp_uploader *u) {
  if (!u) return 0;
  pthread_mutex_lock(&u->mu);
  while (u->head || u->busy)
    pthread_cond_wait(&u->cv, &u->mu);
  int rc = u->undelivered ? -1 : 0;
  pthread_mutex_unlock(&u->mu);
  return rc;
}

void pp_uploader_ship_logs(struct pp_uploader *u) {
  unsigned char *body;
  size_t len;
  if (u && u->logs && pp_logship_take(u->logs, &body, &len) == 0)
    pp_uploader_submit_logs(u, body, len);
  if (u) pp_logship_new_cycle(u->logs);
}

void pp_uploader_free(struct pp_uploader *u) {
  if (!u) return;
  pp_uploader_ship_logs(u);
  if (u->started) {
    long grace = u->sc.http.timeout_ms < GRACE_MAX_MS ? u->sc.http.timeout_ms : GRACE_MAX_MS;
    pthread_mutex_lock(&u->mu);
    u->stopping = true;
    u->deadline_ms = mono_ms() + (uint64_t)grace;
    pthread_cond_broadcast(&u->cv);
    pthread_mutex_unlock(&u->mu);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += grace / 1000 + 1;
    if (pthread_timedjoin_np(u->th, NULL, &ts) != 0) {
      /* a request is still hanging: cut it, the item goes to the spool */
      u->abort_flag = 1;
      pthread_join(u->th, NULL);
    }
  }
  while (u->head) {
    struct item *it = u->head;
    u->head = it->next;
    spool_or_drop(u, it, "agent stopped");
    free_item(it);
  }
  pp_logship_free(u->logs);
  pp_spool_free(u->spool);
  pp_spool_free(u->otlp_spool);
  free(u->otlp_url);
  pthread_cond_destroy(&u->cv);
  pthread_mutex_destroy(&u->mu);
  if (u->token) explicit_bzero(u->token, strlen(u->token));
  free(u->server_host);
  free(u->token);
  free(u->service);
  free(u->hostname);
  free(u->ca);
  free(u->api_server);
  free(u);
}
