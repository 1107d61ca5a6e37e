/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Container ids from cgroup paths and names from the Docker Engine API.
 *
 * The API reply comes from another process and is treated as hostile: the
 * whole exchange has one deadline, the reply is capped, the HTTP framing
 * (Content-Length or chunked) is checked against what was received, and the
 * JSON is parsed with jansson and checked for types before use.
 */
#include "container.h"
#include "k8s_labels.h"
#include "k8s_meta.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "enrich.h"
#include "log.h"
#include "lru.h"

#define LOG_TAG "polyprof.containers"
#define MAX_HEADER_BYTES (64 * 1024)
#define UNKNOWN_RETRY_S 60 /* an id no runtime knew is not re-asked sooner */
#define NO_RUNTIME_RETRY_S 60

/* ---- cgroup ---- */

static bool is_lower_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

int pp_container_id_from_cgroup(const char *text, char id[65]) {
  /* gProfiler: for each "hierarchy:controllers:path" line, all
   * non-overlapping runs of 64 lowercase hex digits in the path; the last
   * one of the first line that has any. This covers /docker/<id>,
   * docker-<id>.scope, cri-containerd-<id>.scope, crio-<id>.scope,
   * libpod-<id>.scope and kubepods/.../pod<uid>/<id>. */
  if (!text) return -ENOENT;
  const char *line = text;
  while (*line) {
    const char *eol = strchr(line, '\n');
    size_t len = eol ? (size_t)(eol - line) : strlen(line);
    const char *c1 = memchr(line, ':', len);
    const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
    const char *path = c2 ? c2 + 1 : line;
    size_t plen = len - (size_t)(path - line);
    const char *last = NULL;
    size_t i = 0;
    while (i + 64 <= plen) {
      size_t run = 0;
      while (run < 64 && is_lower_hex(path[i + run]))
        run++;
      if (run == 64) {
        last = path + i;
        i += 64;
      } else {
        i += run + 1; /* no match can start inside a run shorter than 64 */
      }
    }
    if (last) {
      memcpy(id, last, 64);
      id[64] = '\0';
      return 0;
    }
    if (!eol) break;
    line = eol + 1;
  }
  return -ENOENT;
}

/* ---- Docker API over a unix socket ---- */

static time_t now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec;
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int wait_fd(int fd, short events, int64_t deadline) {
  for (;;) {
    int64_t left = deadline - now_ms();
    if (left <= 0) return -ETIMEDOUT;
    struct pollfd p = {.fd = fd, .events = events};
    int r = poll(&p, 1, (int)left);
    if (r > 0) return 0;
    if (r == 0) return -ETIMEDOUT;
    if (errno != EINTR) return -errno;
  }
}

static int connect_unix(const char *path, int64_t deadline) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof(sa.sun_path)) return -ENAMETOOLONG;
  memcpy(sa.sun_path, path, strlen(path) + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -errno;
  if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
    int e = errno;
    if (e != EINPROGRESS && e != EAGAIN) {
      close(fd);
      return -e;
    }
    int r = wait_fd(fd, POLLOUT, deadline);
    socklen_t sl = sizeof(e);
    if (r == 0 && (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &sl) != 0 || e != 0)) r = -ECONNREFUSED;
    if (r != 0) {
      close(fd);
      return r;
    }
  }
  return fd;
}

static int send_all(int fd, const char *buf, size_t len, int64_t deadline) {
  while (len) {
    ssize_t w = send(fd, buf, len, MSG_NOSIGNAL);
    if (w > 0) {
      buf += w;
      len -= (size_t)w;
    } else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
      int r = wait_fd(fd, POLLOUT, deadline);
      if (r) return r;
    } else {
      return w < 0 ? -errno : -EPIPE;
    }
  }
  return 0;
}

struct reply {
  char *buf;
  size_t len, cap;
  size_t header_len; /* bytes up to and including the blank line, 0 = not yet */
  int status;
  bool chunked;
  int64_t content_length; /* -1 unknown */
};

static const char *find_crlfcrlf(const char *p, size_t len) {
  for (size_t i = 0; i + 4 <= len; i++)
    if (p[i] == '\r' && p[i + 1] == '\n' && p[i + 2] == '\r' && p[i + 3] == '\n') return p + i;
  return NULL;
}

/* Parse the status line and the two headers we need. -EPROTO if malformed. */
static int parse_headers(struct reply *r) {
  const char *end = find_crlfcrlf(r->buf, r->len);
  if (!end) return r->len > MAX_HEADER_BYTES ? -EPROTO : 0;
  r->header_len = (size_t)(end - r->buf) + 4;
  if (r->header_len > MAX_HEADER_BYTES) return -EPROTO;
  int major, minor, status;
  if (sscanf(r->buf, "HTTP/%d.%d %3d", &major, &minor, &status) != 3 || major != 1) return -EPROTO;
  r->status = status;
  r->content_length = -1;
  const char *line = strstr(r->buf, "\r\n");
  while (line && line + 2 < end) {
    line += 2;
    const char *eol = strstr(line, "\r\n");
    if (!eol || eol > end) break;
    size_t l = (size_t)(eol - line);
    if (l > 15 && strncasecmp(line, "content-length:", 15) == 0) {
      char num[32];
      size_t nl = l - 15 < sizeof(num) - 1 ? l - 15 : sizeof(num) - 1;
      memcpy(num, line + 15, nl);
      num[nl] = '\0';
      char *e;
      long long v = strtoll(num, &e, 10);
      while (*e == ' ' || *e == '\t')
        e++;
      if (v < 0 || *e) return -EPROTO;
      r->content_length = v;
    } else if (l > 18 && strncasecmp(line, "transfer-encoding:", 18) == 0) {
      for (size_t i = 18; i + 7 <= l; i++)
        if (strncasecmp(line + i, "chunked", 7) == 0) r->chunked = true;
    }
    line = eol;
  }
  return 0;
}

/* Decode a chunked body in place. 1 when complete, 0 if more is needed,
 * -EPROTO if malformed. */
static int dechunk(const char *in, size_t len, char *out, size_t *out_len) {
  size_t i = 0, o = 0;
  for (;;) {
    const char *eol = NULL;
    for (size_t k = i; k + 1 < len; k++)
      if (in[k] == '\r' && in[k + 1] == '\n') {
        eol = in + k;
        break;
      }
    if (!eol) return (len - i) > 64 ? -EPROTO : 0;
    size_t size = 0, digits = 0;
    size_t k = i;
    for (; in + k < eol && isxdigit((unsigned char)in[k]); k++, digits++) {
      if (digits >= 8) return -EPROTO; /* > 4 GiB chunks: hostile */
      int c = tolower((unsigned char)in[k]);
      size = size * 16 + (size_t)(c <= '9' ? c - '0' : c - 'a' + 10);
    }
    if (!digits || (in + k < eol && in[k] != ';' && in[k] != ' ')) return -EPROTO;
    i = (size_t)(eol - in) + 2;
    if (size == 0) {
      *out_len = o;
      return 1; /* trailers are ignored */
    }
    if (size > len - i || len - i - size < 2) return 0;
    memmove(out + o, in + i, size);
    o += size;
    i += size;
    if (in[i] != '\r' || in[i + 1] != '\n') return -EPROTO;
    i += 2;
  }
}

/* Body of a complete reply: 1 (with body/len), 0 incomplete, <0 error. */
static int reply_body(struct reply *r, bool eof, char **body, size_t *blen) {
  if (!r->header_len) return eof ? -EPROTO : 0;
  char *b = r->buf + r->header_len;
  size_t avail = r->len - r->header_len;
  if (r->chunked) {
    /* decode only once the terminating chunk may have arrived */
    if (!eof && (avail < 5 || memcmp(b + avail - 5, "0\r\n\r\n", 5) != 0)) return 0;
    char *tmp = malloc(avail + 1);
    if (!tmp) return -ENOMEM;
    size_t out = 0;
    int d = dechunk(b, avail, tmp, &out);
    if (d == 1) {
      memcpy(b, tmp, out);
      *body = b;
      *blen = out;
    }
    free(tmp);
    return d == 0 && eof ? -EPROTO : d;
  }
  if (r->content_length >= 0) {
    if ((uint64_t)avail < (uint64_t)r->content_length) return eof ? -EPROTO : 0;
    *body = b;
    *blen = (size_t)r->content_length;
    return 1;
  }
  if (!eof) return 0; /* delimited by the end of the connection */
  *body = b;
  *blen = avail;
  return 1;
}

static int http_get(const char *socket_path, const char *target, int timeout_ms, size_t max_bytes,
                    struct reply *r, char **body, size_t *blen) {
  int64_t deadline = now_ms() + timeout_ms;
  int fd = connect_unix(socket_path, deadline);
  if (fd < 0) return fd;
  char req[512];
  int n = snprintf(req, sizeof(req),
                   "GET %s HTTP/1.1\r\nHost: docker\r\nUser-Agent: polyprof/" POLYPROF_VERSION
                   "\r\nAccept: application/json\r\nConnection: close\r\n\r\n",
                   target);
  int rc = send_all(fd, req, (size_t)n, deadline);
  while (rc == 0) {
    if (r->len + 1 >= r->cap) {
      if (r->cap >= max_bytes + 1) {
        rc = -E2BIG;
        break;
      }
      size_t nc = r->cap ? r->cap * 2 : 16384;
      if (nc > max_bytes + 1) nc = max_bytes + 1;
      char *nb = realloc(r->buf, nc);
      if (!nb) {
        rc = -ENOMEM;
        break;
      }
      r->buf = nb;
      r->cap = nc;
    }
    ssize_t got = recv(fd, r->buf + r->len, r->cap - r->len - 1, 0);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) {
      rc = wait_fd(fd, POLLIN, deadline);
      continue;
    }
    if (got < 0) {
      rc = -errno;
      break;
    }
    r->len += (size_t)got;
    r->buf[r->len] = '\0';
    if (!r->header_len) {
      rc = parse_headers(r);
      if (rc == 0 && r->header_len && r->content_length > (int64_t)max_bytes) rc = -E2BIG;
    }
    if (rc) break;
    int done = reply_body(r, got == 0, body, blen);
    if (done < 0) rc = done;
    if (done != 0) break;
  }
  close(fd);
  return rc;
}

/* Selected labels of a Docker container (k8s_labels.h): a pod sandbox's
 * (dockershim) are its pod's, any other container's are its own. */
static void docker_labels(const json_t *labels, const char *name) {
  if (!json_is_object(labels) || !pp_k8s_labels_wanted()) return;
  const char *type = json_string_value(json_object_get(labels, "io.kubernetes.docker.type"));
  const char *ns = json_string_value(json_object_get(labels, "io.kubernetes.pod.namespace"));
  const char *pod = json_string_value(json_object_get(labels, "io.kubernetes.pod.name"));
  char key[PP_K8S_POD_KEY_MAX + 1];
  if (type && strcmp(type, "podsandbox") == 0) {
    if (ns && pod && !strpbrk(ns, "/;_") && !strpbrk(pod, "/;_") &&
        snprintf(key, sizeof(key), "%s/%s", ns, pod) < (int)sizeof(key))
      pp_k8s_labels_put(key, labels);
  } else if (!ns && pp_k8s_labels_key_of(name, key, sizeof(key)) == 0) {
    pp_k8s_labels_put(key, labels);
  }
}

int pp_docker_list(const char *socket_path, int timeout_ms, size_t max_bytes, pp_container_cb cb,
                   void *ctx) {
  struct reply r = {0};
  char *body = NULL;
  size_t blen = 0;
  int rc = http_get(socket_path, "/containers/json", timeout_ms, max_bytes, &r, &body, &blen);
  if (rc == 0 && r.status != 200) rc = -EPROTO;
  json_t *root = NULL;
  if (rc == 0) {
    json_error_t err;
    root = json_loadb(body, blen, JSON_REJECT_DUPLICATES, &err);
    if (!root || !json_is_array(root)) rc = -EPROTO;
  }
  size_t i;
  json_t *c;
  if (rc == 0) {
    json_array_foreach(root, i, c) {
      json_t *id = json_object_get(c, "Id");
      json_t *names = json_object_get(c, "Names");
      json_t *first = json_is_array(names) ? json_array_get(names, 0) : NULL;
      if (!json_is_string(id) || !json_is_string(first)) continue;
      const char *name = json_string_value(first);
      if (name[0] == '/') name++;
      size_t idl = json_string_length(id);
      if (idl == 0 || idl > 128 || !*name) continue;
      /* the name becomes a field of a ';'-separated .col line */
      char clean[256];
      size_t n = 0;
      for (; name[n] && n < sizeof(clean) - 1; n++)
        clean[n] = (name[n] == ';' || name[n] == '\n' || name[n] == '\r') ? '_' : name[n];
      clean[n] = '\0';
      docker_labels(json_object_get(c, "Labels"), clean);
      cb(ctx, json_string_value(id), clean);
    }
  }
  json_decref(root);
  free(r.buf);
  return rc;
}

/* ---- the id -> name cache ---- */

struct cached_name {
  char *name;    /* NULL: no runtime knew this id */
  time_t listed; /* when it was last confirmed */
};

struct pp_containers {
  char *sockets[4];
  size_t nsockets;
  struct pp_lru *names;
  time_t last_refresh, no_runtime_since;
  bool logged_no_runtime, any_runtime;
  bool paired;    /* sockets[] holds the default pairs */
  char *k8s_root; /* NULL: /proc/1/root */
};

static void cached_name_free(void *v) {
  struct cached_name *cn = v;
  free(cn->name);
  free(cn);
}

struct pp_containers *pp_containers_new(const char *docker_socket, size_t cache_size) {
  struct pp_containers *c = calloc(1, sizeof(*c));
  if (!c) return NULL;
  c->names = pp_lru_new(cache_size ? cache_size : 4096, cached_name_free);
  if (docker_socket) {
    c->sockets[c->nsockets++] = strdup(docker_socket);
  } else {
    /* The agent may itself run in a container: the host's sockets are
     * reached through init's root (gProfiler does the same). */
    static const char *const defaults[] = {
        "/proc/1/root/var/run/docker.sock", "/var/run/docker.sock",
        "/proc/1/root/run/podman/podman.sock", "/run/podman/podman.sock"};
    for (size_t i = 0; i < 4; i++)
      c->sockets[c->nsockets++] = strdup(defaults[i]);
    c->paired = true;
  }
  for (size_t i = 0; i < c->nsockets; i++)
    if (!c->sockets[i]) {
      pp_containers_free(c);
      return NULL;
    }
  if (!c->names) {
    pp_containers_free(c);
    return NULL;
  }
  return c;
}

void pp_containers_free(struct pp_containers *c) {
  if (!c) return;
  for (size_t i = 0; i < c->nsockets; i++)
    free(c->sockets[i]);
  pp_lru_free(c->names);
  free(c->k8s_root);
  free(c);
}

int pp_containers_set_k8s_root(struct pp_containers *c, const char *root) {
  char *r = root ? strdup(root) : NULL;
  if (root && !r) return -ENOMEM;
  free(c->k8s_root);
  c->k8s_root = r;
  return 0;
}

struct refresh_ctx {
  struct pp_containers *c;
  time_t now;
};

static void on_container(void *ctx, const char *id, const char *name) {
  struct refresh_ctx *rc = ctx;
  void *v;
  /* Docker first, then the other sockets: an id already named keeps it. */
  if (pp_lru_lookup_str(rc->c->names, id, &v) && v && ((struct cached_name *)v)->name &&
      ((struct cached_name *)v)->listed == rc->now)
    return;
  struct cached_name *cn = calloc(1, sizeof(*cn));
  if (!cn) return;
  cn->name = strdup(name);
  cn->listed = rc->now;
  if (!cn->name) {
    free(cn);
    return;
  }
  pp_lru_put_str(rc->c->names, id, cn);
}

/* Re-list every reachable runtime. Returns how many answered. */
static int refresh(struct pp_containers *c, time_t now) {
  struct refresh_ctx rc = {.c = c, .now = now};
  int answered = 0;
  for (size_t i = 0; i < c->nsockets; i++) {
    int r =
        pp_docker_list(c->sockets[i], PP_DOCKER_TIMEOUT_MS, PP_DOCKER_MAX_REPLY, on_container, &rc);
    if (r == 0) {
      answered++;
      /* the default paths come in pairs (host root, then our own root):
       * once the first of a pair answered, the second is the same daemon */
      if (c->paired && i % 2 == 0) i++;
    } else if (r != -ENOENT && r != -ECONNREFUSED && r != -EACCES) {
      pp_log(PP_LOG_DEBUG, LOG_TAG, "container listing from %s failed: %s", c->sockets[i],
             strerror(-r));
    }
  }
  c->last_refresh = now;
  if (answered) {
    c->any_runtime = true;
    c->no_runtime_since = 0;
  } else {
    c->no_runtime_since = now;
    if (!c->logged_no_runtime) {
      c->logged_no_runtime = true;
      pp_log(PP_LOG_INFO, LOG_TAG,
             "no Docker or podman API socket answered (%s%s): container names are not "
             "resolved",
             c->sockets[0], c->nsockets > 1 ? " and the other default paths" : "");
    }
  }
  return answered;
}

/* CRI-O keeps the pod's labels in its sandbox's bundle: read once per pod
 * when labels are selected (k8s_labels.h). */
static void sandbox_labels(struct pp_containers *c, const struct pp_k8s_meta *km) {
  char key[PP_K8S_POD_KEY_MAX + 1];
  if (!km->sandbox[0] || !pp_k8s_labels_wanted() ||
      snprintf(key, sizeof(key), "%s/%s", km->ns, km->pod) >= (int)sizeof(key) ||
      pp_k8s_labels_known(key))
    return;
  json_t *labels = NULL;
  if (pp_k8s_sandbox_labels(c->k8s_root, km->sandbox, &labels) == 0) pp_k8s_labels_put(key, labels);
  json_decref(labels);
}

int pp_containers_name(struct pp_containers *c, const char *id, char **name) {
  *name = NULL;
  if (!c || !id || !*id) return -EINVAL;
  time_t now = now_s(); /* monotonic: wall clock jumps must not matter */
  void *v = NULL;
  if (pp_lru_lookup_str(c->names, id, &v) && v) {
    struct cached_name *cn = v;
    if (cn->name) {
      *name = strdup(cn->name);
      return *name ? 0 : -ENOMEM;
    }
    if (now - cn->listed < UNKNOWN_RETRY_S) return c->any_runtime ? -ENOENT : -ENOTCONN;
  }
  /* a Kubernetes container of containerd or CRI-O: one small file read */
  struct pp_k8s_meta km;
  if (pp_k8s_meta_lookup(c->k8s_root, id, &km) == 0) {
    struct cached_name *cn = calloc(1, sizeof(*cn));
    char buf[PP_K8S_NAME_MAX];
    pp_k8s_meta_name(&km, buf, sizeof(buf));
    sandbox_labels(c, &km);
    if (!cn || !(cn->name = strdup(buf))) {
      free(cn);
      return -ENOMEM;
    }
    cn->listed = now;
    pp_lru_put_str(c->names, id, cn);
    c->any_runtime = true;
    *name = strdup(buf);
    return *name ? 0 : -ENOMEM;
  }
  if (c->no_runtime_since && now - c->no_runtime_since < NO_RUNTIME_RETRY_S) return -ENOTCONN;
  if (refresh(c, now) == 0) return -ENOTCONN;
  if (pp_lru_lookup_str(c->names, id, &v) && v && ((struct cached_name *)v)->name) {
    *name = strdup(((struct cached_name *)v)->name);
    return *name ? 0 : -ENOMEM;
  }
  struct cached_name *unknown = calloc(1, sizeof(*unknown));
  if (unknown) {
    unknown->listed = now;
    pp_lru_put_str(c->names, id, unknown);
  }
  return -ENOENT;
}
