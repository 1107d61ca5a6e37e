/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the nodejs plugin's CDP reply matching (events and replies
 * to abandoned requests are skipped, an error reply is -EREMOTEIO) and of
 * its helper channel (one JSON object per line, bounded, hostile input
 * refused). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../plugins/nodejs/cdp.c"
#include "../../plugins/nodejs/chan.c"
#include "../../plugins/nodejs/ws.c"
#include "testlib.h"

/* Writes msgs as unmasked server text frames (each under 126 bytes). */
static void serve(int fd, const char *const *msgs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint8_t f[2 + 125];
    size_t l = strlen(msgs[i]);
    f[0] = 0x81;
    f[1] = (uint8_t)l;
    memcpy(f + 2, msgs[i], l);
    CHECK_EQ_INT(write(fd, f, 2 + l), (int64_t)(2 + l));
  }
}

static void wait_reply(const char *const *msgs, size_t n, int want_rc) {
  int sv[2];
  CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
  struct nodejs_cdp c = {.ws = {.fd = sv[0], .max_msg = 1 << 20, .cap = 64}};
  c.ws.buf = malloc(c.ws.cap);
  serve(sv[1], msgs, n);
  json_t *res = NULL;
  char err[100];
  int rc = nodejs_cdp_wait(&c, 2, &res, err, sizeof(err), pp_clock_ns() + 500000000ull);
  CHECK_EQ_INT(rc, want_rc);
  if (rc == 0) CHECK(json_is_object(res));
  json_decref(res);
  nodejs_ws_close(&c.ws, 0);
  close(sv[1]);
}

static void test_reply_matching(void) {
  const char *const a[] = {"{\"method\":\"Profiler.consoleProfileStarted\",\"params\":{}}",
                           "{\"id\":1,\"result\":{}}", "{\"id\":2,\"result\":{\"profile\":{}}}"};
  wait_reply(a, 3, 0);
  const char *const d[] = {"{\"id\":2,\"error\":{\"message\":\"Cannot find context\"}}"};
  wait_reply(d, 1, -EREMOTEIO);
  const char *const e[] = {"{\"id\":2,\"result\":7}"};
  wait_reply(e, 1, -EPROTO);
  const char *const f[] = {"{\"id\":1,\"result\":{}}"}; /* never the one awaited */
  wait_reply(f, 1, -ETIMEDOUT);
}

/* Feeds text to a channel and returns what recv says of it. */
static int chan_read(const char *text, size_t max_line, json_t **m, int close_after) {
  int sv[2];
  CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
  struct nodejs_chan c;
  nodejs_chan_init(&c, max_line);
  c.fd = sv[0];
  CHECK_EQ_INT(write(sv[1], text, strlen(text)), (int64_t)strlen(text));
  if (close_after) close(sv[1]);
  int rc = nodejs_chan_recv(&c, m, pp_clock_ns() + 100000000ull);
  nodejs_chan_close(&c);
  if (!close_after) close(sv[1]);
  return rc;
}

static void test_channel(void) {
  json_t *m = NULL;
  CHECK_EQ_INT(chan_read("{\"t\":\"hello\",\"pid\":7}\n{\"t\":\"bye\"}\n", 1024, &m, 0), 0);
  CHECK(m && strcmp(json_string_value(json_object_get(m, "t")), "hello") == 0);
  json_decref(m);
  /* a line that is no JSON object, or too long, or cut by EOF */
  CHECK_EQ_INT(chan_read("[1,2]\n", 1024, &m, 0), -EPROTO);
  CHECK_EQ_INT(chan_read("{\"t\":\"x\",\"t\":\"y\"}\n", 1024, &m, 0), -EPROTO);
  CHECK_EQ_INT(chan_read("{\"t\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}\n", 16, &m, 0), -EMSGSIZE);
  CHECK_EQ_INT(chan_read("{\"t\":\"hel", 1024, &m, 1), -ECONNRESET);
  CHECK_EQ_INT(chan_read("{\"t\":\"hel", 1024, &m, 0), -ETIMEDOUT);
  CHECK(m == NULL);
  /* send: one request per line */
  int sv[2];
  CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
  struct nodejs_chan c;
  nodejs_chan_init(&c, 1024);
  c.fd = sv[0];
  CHECK_EQ_INT(nodejs_chan_send(&c, "snap", pp_clock_ns() + 100000000ull), 0);
  char buf[64] = "";
  CHECK_EQ_INT(read(sv[1], buf, sizeof(buf) - 1), 13);
  CHECK(strcmp(buf, "{\"t\":\"snap\"}\n") == 0);
  nodejs_chan_close(&c);
  close(sv[1]);
}

int main(void) {
  test_reply_matching();
  test_channel();
  return pp_test_finish("test_nodejs_cdp");
}
