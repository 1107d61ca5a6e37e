/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The helper channel, agent side (chan.h). Everything the helper sends is
 * hostile: a line is bounded by max_line and must parse as one JSON object.
 */
#include "chan.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "polyprof/kit/cap_step.h"
#include "polyprof/kit/log.h"
#include "polyprof/kit/target_files.h"

void nodejs_chan_init(struct nodejs_chan *c, size_t max_line) {
  memset(c, 0, sizeof(*c));
  c->fd = -1;
  c->max_line = max_line;
}

int nodejs_chan_connect(struct nodejs_chan *c, uint32_t pid, const char *path, char *reason,
                        size_t cap) {
  nodejs_chan_close(c);
  /* the helper's socket is the target user's, owner-only: connecting is
   * the step that needs CAP_DAC_OVERRIDE */
  struct pp_cap_step dac;
  pp_cap_step_begin(&dac, PP_CAP_NEEDS_FILE_OVERRIDE);
  int fd = pp_target_connect_unix(pid, path, reason, cap);
  pp_cap_step_end(&dac);
  if (fd < 0) return fd;
  struct ucred cr;
  socklen_t cl = sizeof(cr);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 || cr.pid != (pid_t)pid) {
    snprintf(reason, cap, "%.200s is not the process's own socket", path);
    close(fd);
    return -EPERM;
  }
  c->fd = fd;
  return 0;
}

static int chan_wait(int fd, short ev, uint64_t deadline_ns) {
  uint64_t now = pp_clock_ns();
  int ms = deadline_ns > now ? (int)((deadline_ns - now + 999999) / 1000000) : 0;
  struct pollfd p = {.fd = fd, .events = ev};
  int r = poll(&p, 1, ms);
  if (r < 0) return errno == EINTR ? 0 : -errno;
  return r;
}

int nodejs_chan_send(struct nodejs_chan *c, const char *type, uint64_t deadline_ns) {
  if (c->fd < 0) return -ENOTCONN;
  char line[64];
  int n = snprintf(line, sizeof(line), "{\"t\":\"%s\"}\n", type);
  if (n < 0 || (size_t)n >= sizeof(line)) return -EINVAL;
  size_t off = 0;
  while (off < (size_t)n) {
    ssize_t w = send(c->fd, line + off, (size_t)n - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      off += (size_t)w;
      continue;
    }
    if (w < 0 && errno != EAGAIN && errno != EINTR) return -errno;
    int r = chan_wait(c->fd, POLLOUT, deadline_ns);
    if (r < 0) return r;
    if (r == 0 && pp_clock_ns() >= deadline_ns) return -ETIMEDOUT;
  }
  return 0;
}

/* Hands out the first complete line, if any: 1, 0 (none yet), or -errno. */
static int take_line(struct nodejs_chan *c, json_t **msg) {
  char *nl = c->len ? memchr(c->buf, '\n', c->len) : NULL;
  if (!nl) return c->len > c->max_line ? -EMSGSIZE : 0;
  size_t n = (size_t)(nl - c->buf);
  json_error_t je;
  json_t *m = json_loadb(c->buf, n, JSON_REJECT_DUPLICATES, &je);
  memmove(c->buf, nl + 1, c->len - n - 1);
  c->len -= n + 1;
  if (!json_is_object(m)) {
    json_decref(m);
    return -EPROTO;
  }
  *msg = m;
  return 1;
}

int nodejs_chan_recv(struct nodejs_chan *c, json_t **msg, uint64_t deadline_ns) {
  *msg = NULL;
  if (c->fd < 0) return -ENOTCONN;
  for (;;) {
    int t = take_line(c, msg);
    if (t != 0) return t < 0 ? t : 0;
    if (c->len == c->cap) {
      size_t ncap = c->cap ? c->cap * 2 : 64 * 1024;
      if (ncap > c->max_line + 2) ncap = c->max_line + 2;
      if (ncap <= c->cap) return -EMSGSIZE;
      char *g = realloc(c->buf, ncap);
      if (!g) return -ENOMEM;
      c->buf = g;
      c->cap = ncap;
    }
    ssize_t r = recv(c->fd, c->buf + c->len, c->cap - c->len, MSG_DONTWAIT);
    if (r > 0) {
      c->len += (size_t)r;
      continue;
    }
    if (r == 0) return -ECONNRESET;
    if (errno == EINTR) continue;
    if (errno != EAGAIN) return -errno;
    if (pp_clock_ns() >= deadline_ns) return -ETIMEDOUT;
    int w = chan_wait(c->fd, POLLIN, deadline_ns);
    if (w < 0) return w;
  }
}

void nodejs_chan_close(struct nodejs_chan *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  free(c->buf);
  c->buf = NULL;
  c->len = c->cap = 0;
}
