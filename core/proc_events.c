/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Process events connector client (see proc_events.h).
 *
 * Subscribing: bind to the CN_IDX_PROC multicast group (needs
 * CAP_NET_ADMIN; only the initial network namespace has the connector),
 * then send PROC_CN_MCAST_LISTEN. The kernel ignores a LISTEN from outside
 * the initial PID or user namespace without a word, and events would then
 * name pids of another namespace, so the connector counts as usable only
 * once the kernel's acknowledgement of our LISTEN (PROC_EVENT_NONE answering
 * our request's ack field) has arrived with no error. A second, longer request then
 * asks kernels that filter by event type (6.6 on; older ones ignore it) for
 * fork, exec and exit only; it is not acknowledged on such kernels.
 *
 * Threads: a fork whose child is not a thread group leader is a new thread,
 * an exit of a non-leader the end of one; both are ignored. The exit of a
 * leader whose other threads go on (pthread_exit in main) ends the process
 * for discovery until the next full rescan finds it again.
 */
#include "proc_events.h"

#include <errno.h>
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RCVBUF_BYTES (4 << 20) /* a few thousand queued events between drains */
#define LOG_MAX 65536          /* process events kept per batch; more: rescan */
#define ACK_WAIT_MS 500

/* The kernel's per-socket event filter request (6.6 on), declared here
 * because older headers lack it. */
struct proc_filter_req {
  uint32_t mcast_op;
  uint32_t event_type;
};

struct ev_rec {
  uint32_t pid;
  uint32_t seq; /* arrival order, so the last event of a pid wins */
  uint32_t gone;
};

struct pp_proc_events {
  int fd;
  uint32_t listen_ack;
  int ack_err; /* -1: no acknowledgement yet */
  bool lost;
  bool exec_seen; /* an exec is in the batch */
  struct ev_rec *log;
  size_t nlog, log_cap;
  uint32_t *changed, *gone;
  size_t nchanged, ngone, out_cap;
};

static void log_event(struct pp_proc_events *pe, uint32_t pid, bool gone) {
  if (pid == 0) return;
  if (pe->nlog == pe->log_cap) {
    if (pe->log_cap >= LOG_MAX) {
      pe->lost = true;
      return;
    }
    size_t ncap = pe->log_cap ? pe->log_cap * 2 : 256;
    struct ev_rec *g = realloc(pe->log, ncap * sizeof(*g));
    if (!g) {
      pe->lost = true;
      return;
    }
    pe->log = g;
    pe->log_cap = ncap;
  }
  pe->log[pe->nlog] = (struct ev_rec){.pid = pid, .seq = (uint32_t)pe->nlog, .gone = gone};
  pe->nlog++;
}

/* One connector message from the kernel; len bytes at cn, checked. */
static void on_message(struct pp_proc_events *pe, const struct cn_msg *cn, size_t len) {
  if (len < sizeof(*cn) || cn->len > len - sizeof(*cn)) return;
  if (cn->id.idx != CN_IDX_PROC || cn->id.val != CN_VAL_PROC) return;
  /* the fields read below end within the first 16 bytes of the union */
  if (cn->len < offsetof(struct proc_event, event_data) + 16) return;
  struct proc_event ev;
  memset(&ev, 0, sizeof(ev));
  memcpy(&ev, cn->data, cn->len < sizeof(ev) ? cn->len : sizeof(ev));
  switch (ev.what) {
    case PROC_EVENT_NONE:
      /* the kernel numbers every message it sends (our sequence number is
       * not echoed) but answers a request's ack field plus one */
      if (cn->ack == pe->listen_ack + 1) pe->ack_err = (int)ev.event_data.ack.err;
      break;
    case PROC_EVENT_FORK:
      if (ev.event_data.fork.child_pid == ev.event_data.fork.child_tgid)
        log_event(pe, (uint32_t)ev.event_data.fork.child_tgid, false);
      break;
    case PROC_EVENT_EXEC:
      log_event(pe, (uint32_t)ev.event_data.exec.process_tgid, false);
      pe->exec_seen = true;
      break;
    case PROC_EVENT_EXIT:
      if (ev.event_data.exit.process_pid == ev.event_data.exit.process_tgid)
        log_event(pe, (uint32_t)ev.event_data.exit.process_tgid, true);
      break;
    default:
      break;
  }
}

/* Reads what is queued without blocking. 0, or -errno of the socket. */
static int read_queued(struct pp_proc_events *pe) {
  char buf[16384] __attribute__((aligned(8)));
  for (;;) {
    struct sockaddr_nl from;
    socklen_t fl = sizeof(from);
    ssize_t r = recvfrom(pe->fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      if (errno == ENOBUFS) { /* the queue overflowed: events are gone */
        pe->lost = true;
        continue;
      }
      return -errno;
    }
    /* only the kernel speaks for the connector */
    if (fl < sizeof(from) || from.nl_family != AF_NETLINK || from.nl_pid != 0) continue;
    size_t left = (size_t)r;
    for (struct nlmsghdr *nh = (struct nlmsghdr *)buf; NLMSG_OK(nh, left);
         nh = NLMSG_NEXT(nh, left)) {
      if (nh->nlmsg_type == NLMSG_ERROR || nh->nlmsg_type == NLMSG_NOOP) continue;
      if (nh->nlmsg_len < NLMSG_HDRLEN) break;
      on_message(pe, NLMSG_DATA(nh), nh->nlmsg_len - NLMSG_HDRLEN);
    }
  }
}

static int send_request(int fd, uint32_t ack, const void *payload, uint16_t plen) {
  char buf[NLMSG_SPACE(sizeof(struct cn_msg) + 16)] __attribute__((aligned(8)));
  memset(buf, 0, sizeof(buf));
  struct nlmsghdr *nh = (struct nlmsghdr *)buf;
  nh->nlmsg_len = (uint32_t)NLMSG_LENGTH(sizeof(struct cn_msg) + plen);
  nh->nlmsg_type = NLMSG_DONE;
  nh->nlmsg_pid = 0;
  struct cn_msg *cn = NLMSG_DATA(nh);
  cn->id.idx = CN_IDX_PROC;
  cn->id.val = CN_VAL_PROC;
  cn->seq = 0;
  cn->ack = ack;
  cn->len = plen;
  memcpy(cn->data, payload, plen);
  struct sockaddr_nl to = {.nl_family = AF_NETLINK};
  ssize_t w = sendto(fd, buf, nh->nlmsg_len, 0, (struct sockaddr *)&to, sizeof(to));
  return w == (ssize_t)nh->nlmsg_len ? 0 : -errno;
}

static uint64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct pp_proc_events *pp_proc_events_open(char *why, size_t why_len) {
  int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_CONNECTOR);
  if (fd < 0) {
    snprintf(why, why_len, "no connector socket: %s", strerror(errno));
    return NULL;
  }
  int sz = RCVBUF_BYTES;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)) < 0)
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
  struct sockaddr_nl addr = {.nl_family = AF_NETLINK, .nl_groups = CN_IDX_PROC};
  if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
    snprintf(why, why_len, "cannot join the process events group: %s%s", strerror(errno),
             errno == EPERM ? " (needs CAP_NET_ADMIN)" : "");
    close(fd);
    return NULL;
  }
  struct pp_proc_events *pe = calloc(1, sizeof(*pe));
  if (!pe) {
    snprintf(why, why_len, "out of memory");
    close(fd);
    return NULL;
  }
  pe->fd = fd;
  pe->ack_err = -1;
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  /* another listener's acknowledgements reach us too: ours answers this
   * (events carry 0, so never 0 - 1) */
  pe->listen_ack = ((uint32_t)getpid() ^ (uint32_t)now.tv_nsec) | 1;
  uint32_t op = PROC_CN_MCAST_LISTEN;
  int rc = send_request(fd, pe->listen_ack, &op, sizeof(op));
  if (rc < 0) {
    snprintf(why, why_len, "subscription refused: %s", strerror(-rc));
    pp_proc_events_close(pe);
    return NULL;
  }
  uint64_t deadline = mono_ms() + ACK_WAIT_MS;
  while (pe->ack_err < 0) {
    uint64_t t = mono_ms();
    if (t >= deadline) break;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, (int)(deadline - t)) < 0 && errno != EINTR) break;
    if (read_queued(pe) < 0) break;
  }
  if (pe->ack_err != 0) {
    if (pe->ack_err < 0)
      snprintf(why, why_len,
               "the kernel did not acknowledge the subscription (outside the initial PID or user "
               "namespace?)");
    else
      snprintf(why, why_len, "subscription refused: %s", strerror(pe->ack_err));
    pp_proc_events_close(pe);
    return NULL;
  }
  struct proc_filter_req f = {.mcast_op = PROC_CN_MCAST_LISTEN,
                              .event_type = PROC_EVENT_FORK | PROC_EVENT_EXEC | PROC_EVENT_EXIT};
  (void)send_request(fd, pe->listen_ack + 2, &f, sizeof(f));
  /* what arrived while we waited predates the caller's first scan */
  pe->nlog = 0;
  pe->lost = false;
  pe->exec_seen = false;
  return pe;
}

void pp_proc_events_close(struct pp_proc_events *pe) {
  if (!pe) return;
  close(pe->fd); /* the kernel drops the subscription with the socket */
  free(pe->log);
  free(pe->changed);
  free(pe->gone);
  free(pe);
}

int pp_proc_events_drain(struct pp_proc_events *pe) {
  int rc = read_queued(pe);
  if (rc < 0) pe->lost = true; /* cannot tell what was missed */
  bool lost = pe->lost;
  pe->lost = false;
  return lost ? 1 : 0;
}

int pp_proc_events_fd(const struct pp_proc_events *pe) {
  return pe->fd;
}

bool pp_proc_events_read(struct pp_proc_events *pe) {
  if (read_queued(pe) < 0) pe->lost = true;
  return pe->exec_seen || pe->lost;
}

static int by_pid_then_seq(const void *a, const void *b) {
  const struct ev_rec *x = a, *y = b;
  if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void pp_proc_events_take(struct pp_proc_events *pe, const uint32_t **changed, size_t *nchanged,
                         const uint32_t **gone, size_t *ngone) {
  pe->nchanged = pe->ngone = 0;
  pe->exec_seen = false;
  if (pe->nlog > pe->out_cap) {
    uint32_t *c = realloc(pe->changed, pe->nlog * sizeof(*c));
    if (c) pe->changed = c;
    uint32_t *g = realloc(pe->gone, pe->nlog * sizeof(*g));
    if (g) pe->gone = g;
    if (c && g) pe->out_cap = pe->nlog;
  }
  if (pe->nlog <= pe->out_cap) {
    if (pe->nlog) /* the log is NULL before the first event */
      qsort(pe->log, pe->nlog, sizeof(*pe->log), by_pid_then_seq);
    for (size_t i = 0; i < pe->nlog; i++) {
      if (i + 1 < pe->nlog && pe->log[i + 1].pid == pe->log[i].pid) continue; /* not the last */
      if (pe->log[i].gone)
        pe->gone[pe->ngone++] = pe->log[i].pid;
      else
        pe->changed[pe->nchanged++] = pe->log[i].pid;
    }
  } else {
    pe->lost = true; /* no memory for the sets: the next drain says to rescan */
  }
  pe->nlog = 0;
  *changed = pe->changed;
  *nchanged = pe->nchanged;
  *gone = pe->gone;
  *ngone = pe->ngone;
}
