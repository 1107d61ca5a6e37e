/* SPDX-License-Identifier: Apache-2.0 */
/* IPC: wire helpers and framing over a real socketpair. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipc.h"
#include "testlib.h"

static void test_wire(void) {
  struct pp_wbuf b;
  pp_wbuf_init(&b);
  pp_wbuf_u32(&b, 7);
  pp_wbuf_u64(&b, 1ull << 50);
  pp_wbuf_str(&b, "hello");
  pp_wbuf_str(&b, NULL);
  pp_wbuf_str(&b, "");
  CHECK_EQ_INT(b.err, 0);

  struct pp_rbuf r;
  pp_rbuf_init(&r, b.data, b.len);
  CHECK_EQ_INT(pp_rbuf_u32(&r), 7);
  CHECK(pp_rbuf_u64(&r) == 1ull << 50);
  const char *s;
  size_t n;
  CHECK_EQ_INT(pp_rbuf_str(&r, 100, &s, &n), 0);
  CHECK(s && n == 5 && memcmp(s, "hello", 5) == 0);
  CHECK_EQ_INT(pp_rbuf_str(&r, 100, &s, &n), 0);
  CHECK(s == NULL);
  char *d;
  CHECK_EQ_INT(pp_rbuf_strdup(&r, 100, true, &d), 0);
  CHECK_EQ_STR(d, "");
  free(d);
  CHECK_EQ_INT(pp_rbuf_left(&r), 0);
  /* Reading past the end is sticky. */
  CHECK_EQ_INT(pp_rbuf_u32(&r), 0);
  CHECK_EQ_INT(r.err, -EINVAL);
  CHECK_EQ_INT(pp_rbuf_u64(&r), 0);

  /* String longer than allowed, or holding a NUL: refused. */
  pp_rbuf_init(&r, b.data, b.len);
  pp_rbuf_u32(&r);
  pp_rbuf_u64(&r);
  CHECK_EQ_INT(pp_rbuf_str(&r, 4, &s, &n), -EINVAL);
  pp_wbuf_reset(&b);
  pp_wbuf_strn(&b, "a\0b", 3);
  pp_rbuf_init(&r, b.data, b.len);
  CHECK_EQ_INT(pp_rbuf_str(&r, 100, &s, &n), -EINVAL);
  /* A length running past the buffer. */
  pp_wbuf_reset(&b);
  pp_wbuf_u32(&b, 1000);
  pp_wbuf_put(&b, "abc", 3);
  pp_rbuf_init(&r, b.data, b.len);
  CHECK_EQ_INT(pp_rbuf_str(&r, 1u << 20, &s, &n), -EINVAL);
  /* A required string sent as NULL. */
  pp_wbuf_reset(&b);
  pp_wbuf_str(&b, NULL);
  pp_rbuf_init(&r, b.data, b.len);
  CHECK_EQ_INT(pp_rbuf_strdup(&r, 10, true, &d), -EINVAL);

  /* The write side honours its limit. */
  pp_wbuf_reset(&b);
  b.limit = 8;
  pp_wbuf_u64(&b, 1);
  CHECK_EQ_INT(b.err, 0);
  pp_wbuf_u32(&b, 1);
  CHECK_EQ_INT(b.err, -E2BIG);
  CHECK(pp_wbuf_reserve(&b, 1) == NULL);
  pp_wbuf_free(&b);
}

struct got {
  uint32_t type[16];
  uint32_t len[16];
  uint32_t sum[16];
  int n;
};

static int collect(void *ctx, uint32_t type, const uint8_t *p, uint32_t len) {
  struct got *g = ctx;
  if (g->n >= 16) return -ENOSPC;
  uint32_t sum = 0;
  for (uint32_t i = 0; i < len; i++)
    sum = sum * 31 + p[i];
  g->type[g->n] = type;
  g->len[g->n] = len;
  g->sum[g->n] = sum;
  g->n++;
  return 0;
}

static void pair(int sv[2]) {
  int rc = socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv);
  CHECK_EQ_INT(rc, 0);
}

static void test_partial(void) {
  int sv[2];
  pair(sv);
  /* Hand-made message delivered one byte at a time. */
  uint8_t msg[8 + 5];
  uint32_t type = PP_MSG_LOG, len = 5;
  memcpy(msg, &type, 4);
  memcpy(msg + 4, &len, 4);
  memcpy(msg + 8, "abcde", 5);
  struct pp_ipc_rx rx;
  pp_ipc_rx_init(&rx);
  struct got g = {0};
  for (size_t i = 0; i < sizeof(msg); i++) {
    CHECK_EQ_INT(write(sv[0], msg + i, 1), 1);
    CHECK_EQ_INT(pp_ipc_rx_read(&rx, sv[1], collect, &g, 0), 0);
    CHECK_EQ_INT(g.n, i + 1 == sizeof(msg) ? 1 : 0);
  }
  CHECK_EQ_INT(g.type[0], PP_MSG_LOG);
  CHECK_EQ_INT(g.len[0], 5);

  /* Several messages in one read, including an empty one; max_msgs. */
  g.n = 0;
  CHECK_EQ_INT(pp_ipc_send(sv[0], PP_MSG_PING, NULL, 0, 0, NULL, NULL, NULL), 0);
  CHECK_EQ_INT(pp_ipc_send(sv[0], PP_MSG_REPLY, "xy", 2, 0, NULL, NULL, NULL), 0);
  CHECK_EQ_INT(pp_ipc_send(sv[0], PP_MSG_EXIT, NULL, 0, 0, NULL, NULL, NULL), 0);
  CHECK_EQ_INT(pp_ipc_rx_read(&rx, sv[1], collect, &g, 2), 0);
  CHECK_EQ_INT(g.n, 2);
  CHECK_EQ_INT(pp_ipc_rx_read(&rx, sv[1], collect, &g, 0), 0);
  CHECK_EQ_INT(g.n, 3);
  CHECK_EQ_INT(g.type[1], PP_MSG_REPLY);
  CHECK_EQ_INT(g.len[1], 2);
  CHECK_EQ_INT(g.type[2], PP_MSG_EXIT);

  /* Oversized announced length: protocol error, nothing allocated. */
  type = PP_MSG_PROFILE;
  len = PP_IPC_MAX_MSG + 1;
  memcpy(msg, &type, 4);
  memcpy(msg + 4, &len, 4);
  CHECK_EQ_INT(write(sv[0], msg, 8), 8);
  CHECK_EQ_INT(pp_ipc_rx_read(&rx, sv[1], collect, &g, 0), -EPROTO);
  pp_ipc_rx_free(&rx);

  /* A header promising 256 MiB then EOF: -EPIPE, memory stays small. */
  pp_ipc_rx_init(&rx);
  len = PP_IPC_MAX_MSG;
  memcpy(msg + 4, &len, 4);
  CHECK_EQ_INT(write(sv[0], msg, 13), 13);
  close(sv[0]);
  CHECK_EQ_INT(pp_ipc_rx_read(&rx, sv[1], collect, &g, 0), -EPIPE);
  CHECK(rx.body_cap <= 4096);
  pp_ipc_rx_free(&rx);
  close(sv[1]);

  /* A too large payload is refused by the sender. */
  pair(sv);
  CHECK_EQ_INT(pp_ipc_send(sv[0], PP_MSG_LOG, "", (size_t)PP_IPC_MAX_MSG + 1, 0, NULL, NULL, NULL),
               -EMSGSIZE);
  /* Nobody reads: a big send times out at its deadline. */
  size_t big = 8u << 20;
  uint8_t *buf = calloc(1, big);
  uint64_t t0 = pp_ipc_now_ns();
  CHECK_EQ_INT(pp_ipc_send(sv[0], PP_MSG_PROFILE, buf, big, t0 + 200000000ull, NULL, NULL, NULL),
               -ETIMEDOUT);
  uint64_t dt = pp_ipc_now_ns() - t0;
  CHECK(dt >= 190000000ull && dt < 2000000000ull);
  /* Waiting for input honours a deadline too. */
  close(sv[0]);
  close(sv[1]);
  pair(sv);
  CHECK_EQ_INT(pp_ipc_wait_readable(sv[1], pp_ipc_now_ns() + 50000000ull), 0);
  close(sv[0]);
  CHECK_EQ_INT(pp_ipc_wait_readable(sv[1], pp_ipc_now_ns() + 50000000ull), 1);
  close(sv[1]);
  /* Writing to a closed peer is -EPIPE, not SIGPIPE. */
  pair(sv);
  close(sv[1]);
  CHECK_EQ_INT(pp_ipc_send(sv[0], PP_MSG_LOG, "x", 1, 0, NULL, NULL, NULL), -EPIPE);
  close(sv[0]);
  free(buf);
}

struct stealer {
  struct pp_ipc_rx *rx;
  uint8_t *taken;
  uint32_t len;
};

static int steal_it(void *ctx, uint32_t type, const uint8_t *p, uint32_t len) {
  struct stealer *st = ctx;
  st->taken = pp_ipc_rx_steal(st->rx);
  st->len = len;
  return st->taken == p ? 0 : -EFAULT;
}

/* A callback can keep the payload; the receiver goes on with a new buffer. */
static void test_steal(void) {
  int sv[2];
  pair(sv);
  struct pp_ipc_rx rx;
  pp_ipc_rx_init(&rx);
  struct stealer st = {.rx = &rx};
  CHECK_EQ_INT(pp_ipc_send(sv[0], PP_MSG_PROFILE, "payload", 7, 0, NULL, NULL, NULL), 0);
  CHECK_EQ_INT(pp_ipc_rx_read(&rx, sv[1], steal_it, &st, 0), 0);
  CHECK(st.taken && st.len == 7 && memcmp(st.taken, "payload", 7) == 0);
  free(st.taken);
  CHECK_EQ_INT(pp_ipc_send(sv[0], PP_MSG_PROFILE, "second", 6, 0, NULL, NULL, NULL), 0);
  CHECK_EQ_INT(pp_ipc_rx_read(&rx, sv[1], steal_it, &st, 0), 0);
  CHECK(st.taken && st.len == 6 && memcmp(st.taken, "second", 6) == 0);
  free(st.taken);
  pp_ipc_rx_free(&rx);
  close(sv[0]);
  close(sv[1]);
}

struct peer {
  int fd;
  size_t size;
  int rc;
  struct got got;
};

/* The worker's side: a plain send (no draining), then read. */
static void *big_sender(void *arg) {
  struct peer *p = arg;
  uint8_t *buf = malloc(p->size);
  for (size_t i = 0; i < p->size; i++)
    buf[i] = (uint8_t)(i * 7);
  p->rc = pp_ipc_send(p->fd, PP_MSG_PROFILE, buf, p->size, pp_ipc_now_ns() + 10000000000ull, NULL,
                      NULL, NULL);
  free(buf);
  struct pp_ipc_rx rx;
  pp_ipc_rx_init(&rx);
  while (p->got.n == 0) {
    if (pp_ipc_wait_readable(p->fd, pp_ipc_now_ns() + 5000000000ull) <= 0) break;
    if (pp_ipc_rx_read(&rx, p->fd, collect, &p->got, 0) != 0) break;
  }
  pp_ipc_rx_free(&rx);
  return NULL;
}

/* Both ends send a message far larger than the socket buffer at the same
 * time. The side that drains while sending (the core) keeps it from
 * deadlocking. */
static void test_crossed_sends(void) {
  int sv[2];
  pair(sv);
  struct peer p = {.fd = sv[1], .size = 16u << 20};
  pthread_t t;
  pthread_create(&t, NULL, big_sender, &p);
  size_t mine = 4u << 20;
  uint8_t *buf = calloc(1, mine);
  struct pp_ipc_rx rx;
  pp_ipc_rx_init(&rx);
  struct got g = {0};
  int rc = pp_ipc_send(sv[0], PP_MSG_ADD_TARGETS, buf, mine, pp_ipc_now_ns() + 10000000000ull, &rx,
                       collect, &g);
  CHECK_EQ_INT(rc, 0);
  while (g.n == 0) {
    if (pp_ipc_wait_readable(sv[0], pp_ipc_now_ns() + 5000000000ull) <= 0) break;
    if (pp_ipc_rx_read(&rx, sv[0], collect, &g, 0) != 0) break;
  }
  pthread_join(t, NULL);
  CHECK_EQ_INT(p.rc, 0);
  CHECK_EQ_INT(g.n, 1);
  CHECK_EQ_INT(g.len[0], 16u << 20);
  uint32_t sum = 0;
  for (size_t i = 0; i < p.size; i++)
    sum = sum * 31 + (uint8_t)(i * 7);
  CHECK_EQ_INT(g.sum[0], sum);
  /* And the other side got mine intact. */
  CHECK_EQ_INT(p.got.n, 1);
  CHECK_EQ_INT(p.got.len[0], mine);
  CHECK_EQ_INT(p.got.type[0], PP_MSG_ADD_TARGETS);
  pp_ipc_rx_free(&rx);
  free(buf);
  close(sv[0]);
  close(sv[1]);
}

int main(void) {
  CHECK_EQ_STR(pp_ipc_type_name(PP_MSG_SNAPSHOT), "SNAPSHOT");
  CHECK_EQ_STR(pp_ipc_type_name(12345), "unknown");
  test_wire();
  test_partial();
  test_crossed_sends();
  test_steal();
  return pp_test_finish("test_ipc");
}
