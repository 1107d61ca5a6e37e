/* SPDX-License-Identifier: Apache-2.0 */
/* Core <-> worker framing and wire helpers (see ipc.h). */
#include "ipc.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

const char *pp_ipc_type_name(uint32_t type) {
  switch (type) {
    case PP_MSG_INIT:
      return "INIT";
    case PP_MSG_START:
      return "START";
    case PP_MSG_ADD_TARGETS:
      return "ADD_TARGETS";
    case PP_MSG_SNAPSHOT:
      return "SNAPSHOT";
    case PP_MSG_STOP:
      return "STOP";
    case PP_MSG_EXIT:
      return "EXIT";
    case PP_MSG_PING:
      return "PING";
    case PP_MSG_DUMP:
      return "DUMP";
    case PP_MSG_LOG:
      return "LOG";
    case PP_MSG_REPLY:
      return "REPLY";
    case PP_MSG_PROFILE:
      return "PROFILE";
    case PP_MSG_DENIED:
      return "DENIED";
    default:
      return "unknown";
  }
}

/* ---- output buffer ---- */

void pp_wbuf_init(struct pp_wbuf *b) {
  memset(b, 0, sizeof(*b));
}

void pp_wbuf_free(struct pp_wbuf *b) {
  free(b->data);
  memset(b, 0, sizeof(*b));
}

void pp_wbuf_reset(struct pp_wbuf *b) {
  b->len = 0;
  b->err = 0;
}

uint8_t *pp_wbuf_reserve(struct pp_wbuf *b, size_t n) {
  if (b->err) return NULL;
  size_t limit = b->limit ? b->limit : PP_IPC_MAX_MSG;
  if (n > limit || b->len > limit - n) {
    b->err = -E2BIG;
    return NULL;
  }
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n)
      cap *= 2;
    uint8_t *d = realloc(b->data, cap);
    if (!d) {
      b->err = -ENOMEM;
      return NULL;
    }
    b->data = d;
    b->cap = cap;
  }
  uint8_t *out = b->data + b->len;
  b->len += n;
  return out;
}

void pp_wbuf_put(struct pp_wbuf *b, const void *p, size_t n) {
  uint8_t *d = pp_wbuf_reserve(b, n);
  if (d && n) memcpy(d, p, n);
}

void pp_wbuf_u32(struct pp_wbuf *b, uint32_t v) {
  pp_wbuf_put(b, &v, sizeof(v));
}

void pp_wbuf_u64(struct pp_wbuf *b, uint64_t v) {
  pp_wbuf_put(b, &v, sizeof(v));
}

void pp_wbuf_strn(struct pp_wbuf *b, const char *s, size_t n) {
  if (!s) {
    pp_wbuf_u32(b, PP_WIRE_NULL);
    return;
  }
  if (n >= PP_WIRE_NULL) {
    b->err = b->err ? b->err : -E2BIG;
    return;
  }
  pp_wbuf_u32(b, (uint32_t)n);
  pp_wbuf_put(b, s, n);
}

void pp_wbuf_str(struct pp_wbuf *b, const char *s) {
  pp_wbuf_strn(b, s, s ? strlen(s) : 0);
}

/* ---- input buffer ---- */

void pp_rbuf_init(struct pp_rbuf *r, const void *p, size_t len) {
  r->p = p;
  r->len = p ? len : 0;
  r->off = 0;
  r->err = 0;
}

size_t pp_rbuf_left(const struct pp_rbuf *r) {
  return r->err ? 0 : r->len - r->off;
}

const void *pp_rbuf_bytes(struct pp_rbuf *r, size_t n) {
  if (r->err || n > r->len - r->off) {
    r->err = -EINVAL;
    return NULL;
  }
  const void *p = r->p + r->off;
  r->off += n;
  return p;
}

uint32_t pp_rbuf_u32(struct pp_rbuf *r) {
  uint32_t v = 0;
  const void *p = pp_rbuf_bytes(r, sizeof(v));
  if (p) memcpy(&v, p, sizeof(v));
  return v;
}

uint64_t pp_rbuf_u64(struct pp_rbuf *r) {
  uint64_t v = 0;
  const void *p = pp_rbuf_bytes(r, sizeof(v));
  if (p) memcpy(&v, p, sizeof(v));
  return v;
}

int pp_rbuf_str(struct pp_rbuf *r, size_t max, const char **s, size_t *n) {
  *s = NULL;
  *n = 0;
  uint32_t len = pp_rbuf_u32(r);
  if (r->err) return r->err;
  if (len == PP_WIRE_NULL) return 0;
  if (len > max) {
    r->err = -EINVAL;
    return r->err;
  }
  const char *p = pp_rbuf_bytes(r, len);
  if (!p) return r->err;
  /* Strings become C strings on the other side: an embedded NUL would
   * silently truncate them, so refuse it. */
  if (memchr(p, 0, len)) {
    r->err = -EINVAL;
    return r->err;
  }
  *s = p;
  *n = len;
  return 0;
}

int pp_rbuf_strdup(struct pp_rbuf *r, size_t max, bool required, char **out) {
  const char *s;
  size_t n;
  *out = NULL;
  int rc = pp_rbuf_str(r, max, &s, &n);
  if (rc) return rc;
  if (!s) {
    if (required) r->err = -EINVAL;
    return r->err;
  }
  char *c = malloc(n + 1);
  if (!c) return -ENOMEM;
  memcpy(c, s, n);
  c[n] = 0;
  *out = c;
  return 0;
}

/* ---- framing ---- */

uint64_t pp_ipc_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* poll() timeout in ms for a deadline; rounds up so we never wake early and
 * spin. -1 for no deadline. */
static int timeout_ms(uint64_t deadline_ns) {
  if (!deadline_ns) return -1;
  uint64_t now = pp_ipc_now_ns();
  if (now >= deadline_ns) return 0;
  uint64_t ms = (deadline_ns - now + 999999) / 1000000;
  return ms > 60000 ? 60000 : (int)ms;
}

void pp_ipc_rx_init(struct pp_ipc_rx *rx) {
  memset(rx, 0, sizeof(*rx));
}

uint8_t *pp_ipc_rx_steal(struct pp_ipc_rx *rx) {
  uint8_t *b = rx->body;
  rx->body = NULL;
  rx->body_cap = 0;
  return b;
}

void pp_ipc_rx_free(struct pp_ipc_rx *rx) {
  free(rx->body);
  memset(rx, 0, sizeof(*rx));
}

/* One recv() into [p, p+n). >0 bytes, 0 would block, <0 error / -EPIPE. */
static ssize_t rx_recv(int fd, void *p, size_t n) {
  for (;;) {
    ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) return r;
    if (r == 0) return -EPIPE;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    if (errno == ECONNRESET) return -EPIPE;
    return -errno;
  }
}

int pp_ipc_rx_read(struct pp_ipc_rx *rx, int fd, pp_ipc_msg_fn fn, void *ctx, unsigned max_msgs) {
  unsigned done = 0;
  for (;;) {
    if (rx->hdr_got < PP_IPC_HDR_SIZE) {
      ssize_t r = rx_recv(fd, rx->hdr + rx->hdr_got, PP_IPC_HDR_SIZE - rx->hdr_got);
      if (r <= 0) return (int)r;
      rx->hdr_got += (size_t)r;
      if (rx->hdr_got < PP_IPC_HDR_SIZE) continue;
      memcpy(&rx->type, rx->hdr, 4);
      memcpy(&rx->len, rx->hdr + 4, 4);
      if (rx->len > PP_IPC_MAX_MSG) return -EPROTO;
      rx->body_got = 0;
    }
    while (rx->body_got < rx->len) {
      /* Grow the buffer only as bytes actually arrive, so a header that
       * announces 256 MiB and is followed by silence costs nothing. */
      if (rx->body_got == rx->body_cap) {
        size_t ncap = rx->body_cap ? rx->body_cap * 2 : 4096;
        if (ncap > rx->len) ncap = rx->len;
        uint8_t *b = realloc(rx->body, ncap);
        if (!b) return -ENOMEM;
        rx->body = b;
        rx->body_cap = ncap;
      }
      size_t room = rx->body_cap - rx->body_got;
      size_t want = rx->len - rx->body_got;
      ssize_t r = rx_recv(fd, rx->body + rx->body_got, want < room ? want : room);
      if (r <= 0) return (int)r;
      rx->body_got += (size_t)r;
    }
    /* Complete: reset the header state before the callback so that whatever
     * the callback returns, the receiver is ready for the next message. */
    rx->hdr_got = 0;
    int rc = fn(ctx, rx->type, rx->body, rx->len);
    /* Keep a small buffer for the next message; give big ones back. */
    if (rx->body_cap > (1u << 20)) {
      free(rx->body);
      rx->body = NULL;
      rx->body_cap = 0;
    }
    rx->body_got = 0;
    if (rc) return rc;
    if (max_msgs && ++done >= max_msgs) return 0;
  }
}

int pp_ipc_wait_readable(int fd, uint64_t deadline_ns) {
  for (;;) {
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int r = poll(&pfd, 1, timeout_ms(deadline_ns));
    if (r < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (r > 0) return 1;
    if (deadline_ns && pp_ipc_now_ns() >= deadline_ns) return 0;
  }
}

int pp_ipc_send(int fd, uint32_t type, const void *payload, size_t len, uint64_t deadline_ns,
                struct pp_ipc_rx *rx, pp_ipc_msg_fn fn, void *ctx) {
  if (len > PP_IPC_MAX_MSG) return -EMSGSIZE;
  uint8_t hdr[PP_IPC_HDR_SIZE];
  uint32_t len32 = (uint32_t)len;
  memcpy(hdr, &type, 4);
  memcpy(hdr + 4, &len32, 4);
  size_t total = PP_IPC_HDR_SIZE + len, sent = 0;
  while (sent < total) {
    struct iovec iov[2];
    int n = 0;
    if (sent < PP_IPC_HDR_SIZE) {
      iov[n].iov_base = hdr + sent;
      iov[n++].iov_len = PP_IPC_HDR_SIZE - sent;
      if (len) {
        iov[n].iov_base = (void *)payload;
        iov[n++].iov_len = len;
      }
    } else {
      iov[n].iov_base = (uint8_t *)payload + (sent - PP_IPC_HDR_SIZE);
      iov[n++].iov_len = total - sent;
    }
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    /* MSG_NOSIGNAL: a dead peer is an error to report, not a SIGPIPE. */
    ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w >= 0) {
      sent += (size_t)w;
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EPIPE || errno == ECONNRESET) return -EPIPE;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return -errno;
    struct pollfd pfd = {.fd = fd, .events = POLLOUT | (rx ? POLLIN : 0)};
    int r = poll(&pfd, 1, timeout_ms(deadline_ns));
    if (r < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (r == 0) {
      if (deadline_ns && pp_ipc_now_ns() >= deadline_ns) return -ETIMEDOUT;
      continue;
    }
    if (rx && (pfd.revents & POLLIN)) {
      int rc = pp_ipc_rx_read(rx, fd, fn, ctx, 64);
      if (rc) return rc;
    } else if ((pfd.revents & (POLLERR | POLLHUP)) && !(pfd.revents & POLLOUT)) {
      return -EPIPE;
    }
  }
  return 0;
}
