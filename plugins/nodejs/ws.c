/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Loopback HTTP GET and a minimal RFC 6455 client for Node's inspector.
 *
 * Node's server drops a client that sends fragmented, compressed, binary,
 * ping/pong or unmasked frames, so the client only ever sends one masked FIN
 * text frame per message (and a masked close). The server sends unmasked FIN
 * frames with 7/16/64-bit lengths; a cpuprofile can be many MB, hence the
 * growable, capped receive buffer.
 *
 * The peer is another process the agent does not trust: header sizes, frame
 * sizes and every wait are bounded.
 */
#include "ws.h"

#include "polyprof/kit/cap_step.h"
#include "polyprof/kit/log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define HTTP_HEAD_MAX 8192

/* ---- SHA-1 and base64, only for Sec-WebSocket-Accept ---- */

static uint32_t rol(uint32_t x, int n) {
  return (x << n) | (x >> (32 - n));
}

static void sha1_block(uint32_t h[5], const uint8_t *p) {
  uint32_t w[80];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
           p[4 * i + 3];
  for (int i = 16; i < 80; i++)
    w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
  for (int i = 0; i < 80; i++) {
    uint32_t f, k;
    if (i < 20)
      f = (b & c) | (~b & d), k = 0x5A827999;
    else if (i < 40)
      f = b ^ c ^ d, k = 0x6ED9EBA1;
    else if (i < 60)
      f = (b & c) | (b & d) | (c & d), k = 0x8F1BBCDC;
    else
      f = b ^ c ^ d, k = 0xCA62C1D6;
    uint32_t t = rol(a, 5) + f + e + k + w[i];
    e = d, d = c, c = rol(b, 30), b = a, a = t;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e;
}

static void sha1(const uint8_t *data, size_t len, uint8_t out[20]) {
  uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
  size_t i = 0;
  for (; i + 64 <= len; i += 64)
    sha1_block(h, data + i);
  uint8_t tail[128] = {0};
  size_t rest = len - i;
  memcpy(tail, data + i, rest);
  tail[rest] = 0x80;
  size_t tlen = rest + 1 + 8 <= 64 ? 64 : 128;
  uint64_t bits = (uint64_t)len * 8;
  for (int j = 0; j < 8; j++)
    tail[tlen - 1 - j] = (uint8_t)(bits >> (8 * j));
  sha1_block(h, tail);
  if (tlen == 128) sha1_block(h, tail + 64);
  for (int j = 0; j < 5; j++)
    for (int b = 0; b < 4; b++)
      out[4 * j + b] = (uint8_t)(h[j] >> (24 - 8 * b));
}

static void base64(const uint8_t *in, size_t len, char *out) {
  static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t o = 0;
  for (size_t i = 0; i < len; i += 3) {
    uint32_t v = (uint32_t)in[i] << 16;
    if (i + 1 < len) v |= (uint32_t)in[i + 1] << 8;
    if (i + 2 < len) v |= in[i + 2];
    out[o++] = tbl[(v >> 18) & 63];
    out[o++] = tbl[(v >> 12) & 63];
    out[o++] = i + 1 < len ? tbl[(v >> 6) & 63] : '=';
    out[o++] = i + 2 < len ? tbl[v & 63] : '=';
  }
  out[o] = '\0';
}

void nodejs_ws_accept_for(const char *key, char out[32]) {
  char cat[128];
  int n = snprintf(cat, sizeof(cat), "%s%s", key, WS_GUID);
  if (n < 0 || (size_t)n >= sizeof(cat)) n = (int)sizeof(cat) - 1;
  uint8_t d[20];
  sha1((const uint8_t *)cat, (size_t)n, d);
  base64(d, 20, out);
}

/* ---- framing (pure functions, unit tested) ---- */

int64_t nodejs_ws_parse_frame(const uint8_t *buf, size_t len, uint64_t max_payload,
                              struct nodejs_ws_frame *out) {
  if (len < 2) return 0;
  unsigned b0 = buf[0], b1 = buf[1];
  unsigned opcode = b0 & 0x0F;
  if (b0 & 0x70) return -EPROTO; /* no extension was negotiated */
  if (b1 & 0x80) return -EPROTO; /* servers never mask */
  if (opcode > 0x2 && opcode < 0x8) return -EPROTO;
  if (opcode > 0xA) return -EPROTO;
  int fin = (b0 & 0x80) != 0;
  uint64_t plen = b1 & 0x7F;
  size_t hdr = 2;
  if (opcode >= 0x8 && (!fin || plen > 125)) return -EPROTO; /* control frames */
  if (plen == 126) {
    if (len < 4) return 0;
    plen = (uint64_t)buf[2] << 8 | buf[3];
    hdr = 4;
  } else if (plen == 127) {
    if (len < 10) return 0;
    plen = 0;
    for (int i = 0; i < 8; i++)
      plen = plen << 8 | buf[2 + i];
    if (plen >> 63) return -EPROTO;
    hdr = 10;
  }
  if (plen > max_payload) return -EMSGSIZE;
  if (len - hdr < plen) return 0;
  out->opcode = opcode;
  out->fin = fin;
  out->payload = buf + hdr;
  out->len = plen;
  return (int64_t)(hdr + plen);
}

int64_t nodejs_ws_encode_frame(unsigned opcode, const uint8_t *payload, size_t len,
                               const uint8_t key[4], uint8_t *out, size_t cap) {
  size_t hdr = len <= 125 ? 2 : len <= 0xFFFF ? 4 : 10;
  if (cap < hdr + 4 || cap - hdr - 4 < len) return -ENOSPC;
  out[0] = (uint8_t)(0x80 | (opcode & 0x0F));
  if (len <= 125) {
    out[1] = (uint8_t)(0x80 | len);
  } else if (len <= 0xFFFF) {
    out[1] = 0x80 | 126;
    out[2] = (uint8_t)(len >> 8);
    out[3] = (uint8_t)len;
  } else {
    out[1] = 0x80 | 127;
    for (int i = 0; i < 8; i++)
      out[2 + i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
  }
  memcpy(out + hdr, key, 4);
  for (size_t i = 0; i < len; i++)
    out[hdr + 4 + i] = payload[i] ^ key[i & 3];
  return (int64_t)(hdr + 4 + len);
}

/* Case-insensitive search of a header line; copies its trimmed value. */
static int header_value(const char *head, size_t len, const char *name, char *val, size_t cap) {
  size_t nl = strlen(name);
  const char *p = head, *end = head + len;
  while (p < end) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol) eol = end;
    if ((size_t)(eol - p) > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
      const char *v = p + nl + 1;
      while (v < eol && (*v == ' ' || *v == '\t'))
        v++;
      const char *ve = eol;
      while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
        ve--;
      size_t n = (size_t)(ve - v);
      if (n >= cap) return -E2BIG;
      memcpy(val, v, n);
      val[n] = '\0';
      return 0;
    }
    p = eol + 1;
  }
  return -ENOENT;
}

int nodejs_ws_check_handshake(const char *head, size_t len, const char *key) {
  if (len < 12 || strncmp(head, "HTTP/1.1 101", 12) != 0) return -EPROTO;
  char got[64], want[32];
  if (header_value(head, len, "Sec-WebSocket-Accept", got, sizeof(got)) != 0) return -EPROTO;
  nodejs_ws_accept_for(key, want);
  return strcmp(got, want) == 0 ? 0 : -EPROTO;
}

/* ---- sockets with deadlines ---- */

static int wait_fd(int fd, short events, uint64_t deadline_ns) {
  for (;;) {
    uint64_t now = pp_clock_ns();
    if (now >= deadline_ns) return -ETIMEDOUT;
    uint64_t ms = (deadline_ns - now + 999999) / 1000000;
    struct pollfd p = {.fd = fd, .events = events};
    int r = poll(&p, 1, ms > 60000 ? 60000 : (int)ms);
    if (r > 0) return 0;
    if (r < 0 && errno != EINTR) return -errno;
  }
}

static int send_all(int fd, const void *data, size_t len, uint64_t deadline_ns) {
  const uint8_t *p = data;
  while (len) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int r = wait_fd(fd, POLLOUT, deadline_ns);
      if (r < 0) return r;
      continue;
    }
    return n < 0 ? -errno : -EPIPE;
  }
  return 0;
}

/* Reads what is available (waiting until the deadline for at least one
 * byte). Returns bytes read, 0 on EOF, or a negative errno. */
static ssize_t recv_some(int fd, void *buf, size_t cap, uint64_t deadline_ns) {
  for (;;) {
    ssize_t n = recv(fd, buf, cap, 0);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return -errno;
    int r = wait_fd(fd, POLLIN, deadline_ns);
    if (r < 0) return r;
  }
}

struct connect_job {
  uint32_t pid;
  uint16_t port;
  uint64_t deadline_ns;
  int result;
};

static int connect_here(uint16_t port, uint64_t deadline_ns) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -errno;
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
    if (errno != EINPROGRESS) {
      int e = -errno;
      close(fd);
      return e;
    }
    int r = wait_fd(fd, POLLOUT, deadline_ns);
    int err = 0;
    socklen_t el = sizeof(err);
    if (r == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0) err = errno;
    if (r < 0 || err) {
      close(fd);
      return r < 0 ? r : -err;
    }
  }
  return fd;
}

/* Runs in its own thread: the network namespace is a per-thread attribute,
 * so entering the target's here leaves the worker's main thread untouched.
 * The socket keeps the namespace it was created in after the thread ends. */
static void *connect_thread(void *arg) {
  struct connect_job *j = arg;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/ns/net", j->pid);
  int nsfd = open(path, O_RDONLY | O_CLOEXEC);
  if (nsfd < 0) {
    j->result = -errno;
    return NULL;
  }
  if (pp_setns_step(nsfd, CLONE_NEWNET) < 0) {
    j->result = -errno;
    close(nsfd);
    return NULL;
  }
  close(nsfd);
  j->result = connect_here(j->port, j->deadline_ns);
  return NULL;
}

static int same_netns(uint32_t pid) {
  char path[64];
  struct stat a, b;
  snprintf(path, sizeof(path), "/proc/%u/ns/net", pid);
  if (stat(path, &a) < 0) return -errno;
  if (stat("/proc/self/ns/net", &b) < 0) return -errno;
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int nodejs_connect_loopback(uint32_t pid, uint16_t port, uint64_t deadline_ns) {
  int same = same_netns(pid);
  if (same < 0) return same;
  if (same) return connect_here(port, deadline_ns);
  struct connect_job j = {.pid = pid, .port = port, .deadline_ns = deadline_ns, .result = -EIO};
  pthread_t t;
  int r = pthread_create(&t, NULL, connect_thread, &j);
  if (r) return -r;
  pthread_join(t, NULL);
  return j.result;
}

/* Reads an HTTP head (through the blank line) into buf; returns the head
 * length, with any bytes after it left in buf[head..*got). */
static int read_head(int fd, char *buf, size_t cap, size_t *got, uint64_t deadline_ns) {
  size_t n = 0;
  for (;;) {
    buf[n] = '\0';
    char *e = strstr(buf, "\r\n\r\n");
    if (e) {
      *got = n;
      return (int)(e + 4 - buf);
    }
    if (n + 1 >= cap) return -E2BIG;
    ssize_t r = recv_some(fd, buf + n, cap - 1 - n, deadline_ns);
    if (r < 0) return (int)r;
    if (r == 0) return -ECONNRESET;
    n += (size_t)r;
  }
}

int nodejs_http_get(uint32_t pid, uint16_t port, const char *path, size_t max_body, char **body,
                    uint64_t deadline_ns) {
  *body = NULL;
  int fd = nodejs_connect_loopback(pid, port, deadline_ns);
  if (fd < 0) return fd;
  char req[512];
  /* Node only answers a Host that is an IP literal or localhost */
  int rl =
      snprintf(req, sizeof(req),
               "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nConnection: close\r\n\r\n", path, port);
  int rc = rl > 0 && (size_t)rl < sizeof(req) ? send_all(fd, req, (size_t)rl, deadline_ns) : -E2BIG;
  char *head = NULL, *out = NULL;
  if (rc < 0) goto done;
  head = malloc(HTTP_HEAD_MAX);
  if (!head) {
    rc = -ENOMEM;
    goto done;
  }
  size_t got = 0;
  int hl = read_head(fd, head, HTTP_HEAD_MAX, &got, deadline_ns);
  if (hl < 0) {
    rc = hl;
    goto done;
  }
  int status = 0;
  if (sscanf(head, "HTTP/1.%*1[01] %3d", &status) != 1 || status < 100 || status > 599) {
    rc = -EPROTO;
    goto done;
  }
  char cl[32];
  long long want = -1;
  if (header_value(head, (size_t)hl, "Content-Length", cl, sizeof(cl)) == 0) {
    char *end;
    want = strtoll(cl, &end, 10);
    if (*end || want < 0) {
      rc = -EPROTO;
      goto done;
    }
    if ((unsigned long long)want > max_body) {
      rc = -EMSGSIZE;
      goto done;
    }
  }
  out = malloc(max_body + 1);
  if (!out) {
    rc = -ENOMEM;
    goto done;
  }
  size_t blen = got - (size_t)hl;
  if (blen > max_body) {
    rc = -EMSGSIZE;
    goto done;
  }
  memcpy(out, head + hl, blen);
  while (want < 0 || blen < (size_t)want) {
    if (blen >= max_body) {
      rc = -EMSGSIZE;
      goto done;
    }
    ssize_t r = recv_some(fd, out + blen, max_body - blen, deadline_ns);
    if (r < 0) {
      rc = (int)r;
      goto done;
    }
    if (r == 0) break;
    blen += (size_t)r;
  }
  if (want >= 0 && blen < (size_t)want) {
    rc = -ECONNRESET;
    goto done;
  }
  if (want >= 0) blen = (size_t)want;
  out[blen] = '\0';
  *body = out;
  out = NULL;
  rc = status;
done:
  free(out);
  free(head);
  close(fd);
  return rc;
}

int nodejs_ws_open(struct nodejs_ws *ws, uint32_t pid, uint16_t port, const char *path,
                   uint64_t max_msg, uint64_t deadline_ns) {
  memset(ws, 0, sizeof(*ws));
  ws->fd = -1;
  ws->max_msg = max_msg;
  if (path[0] == '/') path++;
  for (const char *p = path; *p; p++) /* the uuid comes from the target */
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
          *p == '-'))
      return -EINVAL;
  if (strlen(path) > 128) return -EINVAL;
  uint8_t rnd[16];
  if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) return -EIO;
  char key[32];
  base64(rnd, sizeof(rnd), key);
  int fd = nodejs_connect_loopback(pid, port, deadline_ns);
  if (fd < 0) return fd;
  char req[512];
  int rl = snprintf(req, sizeof(req),
                    "GET /%s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nUpgrade: websocket\r\n"
                    "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                    "Sec-WebSocket-Version: 13\r\n\r\n",
                    path, port, key);
  int rc = send_all(fd, req, (size_t)rl, deadline_ns);
  ws->cap = 64 * 1024;
  ws->buf = malloc(ws->cap);
  if (rc == 0 && !ws->buf) rc = -ENOMEM;
  size_t got = 0;
  int hl = rc == 0 ? read_head(fd, (char *)ws->buf, HTTP_HEAD_MAX, &got, deadline_ns) : rc;
  if (hl < 0) rc = hl;
  if (rc == 0) rc = nodejs_ws_check_handshake((const char *)ws->buf, (size_t)hl, key);
  if (rc < 0) {
    close(fd);
    free(ws->buf);
    ws->buf = NULL;
    return rc;
  }
  /* bytes after the 101 head already belong to the frame stream */
  memmove(ws->buf, ws->buf + hl, got - (size_t)hl);
  ws->len = got - (size_t)hl;
  ws->fd = fd;
  return 0;
}

static int send_frame(struct nodejs_ws *ws, unsigned opcode, const char *data, size_t len,
                      uint64_t deadline_ns) {
  uint8_t key[4];
  if (getrandom(key, sizeof(key), 0) != sizeof(key)) return -EIO;
  uint8_t small[256];
  uint8_t *out = len + 14 <= sizeof(small) ? small : malloc(len + 14);
  if (!out) return -ENOMEM;
  int64_t n = nodejs_ws_encode_frame(opcode, (const uint8_t *)data, len, key, out, len + 14);
  int rc = n < 0 ? (int)n : send_all(ws->fd, out, (size_t)n, deadline_ns);
  if (out != small) free(out);
  return rc;
}

int nodejs_ws_send_text(struct nodejs_ws *ws, const char *text, size_t len, uint64_t deadline_ns) {
  if (ws->fd < 0) return -ENOTCONN;
  return send_frame(ws, NODEJS_WS_OP_TEXT, text, len, deadline_ns);
}

int nodejs_ws_recv(struct nodejs_ws *ws, const char **msg, size_t *len, uint64_t deadline_ns) {
  if (ws->fd < 0) return -ENOTCONN;
  /* drop the message handed out last time */
  if (ws->consumed) {
    memmove(ws->buf, ws->buf + ws->consumed, ws->len - ws->consumed);
    ws->len -= ws->consumed;
    ws->consumed = 0;
  }
  /* give back the memory of a big profile once it has been handled */
  if (ws->cap > (4u << 20) && ws->len < (64u << 10)) {
    uint8_t *g = realloc(ws->buf, 64u << 10);
    if (g) ws->buf = g, ws->cap = 64u << 10;
  }
  for (;;) {
    struct nodejs_ws_frame f;
    int64_t n = nodejs_ws_parse_frame(ws->buf, ws->len, ws->max_msg, &f);
    if (n < 0) return (int)n;
    if (n > 0) {
      if (f.opcode == NODEJS_WS_OP_CLOSE) return -ECONNRESET;
      if (f.opcode == NODEJS_WS_OP_TEXT && f.fin) {
        /* NUL-terminate in place: the byte after the payload is the next
         * frame's first byte, so shift it out of the way first */
        size_t hdr = (size_t)(f.payload - ws->buf);
        if (ws->len + 1 > ws->cap) {
          uint8_t *g = realloc(ws->buf, ws->len + 1);
          if (!g) return -ENOMEM;
          ws->buf = g;
          ws->cap = ws->len + 1;
        }
        memmove(ws->buf, ws->buf + hdr, ws->len - hdr);
        ws->len -= hdr;
        /* payload now at 0..f.len; keep the following bytes after a gap */
        memmove(ws->buf + f.len + 1, ws->buf + f.len, ws->len - f.len);
        ws->buf[f.len] = '\0';
        ws->len += 1;
        ws->consumed = (size_t)f.len + 1;
        *msg = (const char *)ws->buf;
        *len = (size_t)f.len;
        return 0;
      }
      if (f.opcode == NODEJS_WS_OP_PING || f.opcode == NODEJS_WS_OP_PONG) {
        memmove(ws->buf, ws->buf + n, ws->len - (size_t)n);
        ws->len -= (size_t)n;
        continue;
      }
      return -EPROTO; /* binary or fragmented: Node never sends these */
    }
    if (ws->len == ws->cap) {
      if (ws->cap >= ws->max_msg + 16) return -EMSGSIZE;
      size_t ncap = ws->cap * 2;
      if (ncap > ws->max_msg + 16) ncap = (size_t)ws->max_msg + 16;
      uint8_t *g = realloc(ws->buf, ncap);
      if (!g) return -ENOMEM;
      ws->buf = g;
      ws->cap = ncap;
    }
    ssize_t r = recv_some(ws->fd, ws->buf + ws->len, ws->cap - ws->len, deadline_ns);
    if (r < 0) return (int)r;
    if (r == 0) return -ECONNRESET;
    ws->len += (size_t)r;
  }
}

static int send_close(struct nodejs_ws *ws, uint64_t deadline_ns) {
  if (ws->fd < 0) return -ENOTCONN;
  return send_frame(ws, NODEJS_WS_OP_CLOSE, "", 0, deadline_ns);
}

void nodejs_ws_finish(struct nodejs_ws *ws, uint64_t deadline_ns) {
  if (ws->fd >= 0) {
    uint64_t soon = pp_clock_ns() + 200000000ull;
    send_close(ws, soon < deadline_ns ? soon : deadline_ns);
    char sink[4096];
    while (recv_some(ws->fd, sink, sizeof(sink), deadline_ns) > 0) {
    }
  }
  nodejs_ws_close(ws, 0);
}

void nodejs_ws_close(struct nodejs_ws *ws, int send_close_frame) {
  if (ws->fd >= 0) {
    if (send_close_frame) send_close(ws, pp_clock_ns() + 200000000ull);
    close(ws->fd);
  }
  ws->fd = -1;
  free(ws->buf);
  ws->buf = NULL;
  ws->len = ws->cap = ws->consumed = 0;
}
