/* Unit tests of the nodejs plugin's CDP reply matching: the exit
 * announcement (NodeRuntime.waitingForDisconnect) is remembered whenever it
 * arrives, even while a reply is awaited. Node sends it once; dropped with
 * the other events, it left a finished target waiting at exit for good. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../plugins/nodejs/cdp.c"
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

static void wait_reply(const char *const *msgs, size_t n, int want_rc, int want_exit) {
  int sv[2];
  CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
  struct nodejs_cdp c = {.ws = {.fd = sv[0], .max_msg = 1 << 20, .cap = 64}};
  c.ws.buf = malloc(c.ws.cap);
  serve(sv[1], msgs, n);
  json_t *res = NULL;
  char err[100];
  int rc = nodejs_cdp_wait(&c, 2, &res, err, sizeof(err), pp_clock_ns() + 500000000ull);
  CHECK_EQ_INT(rc, want_rc);
  CHECK_EQ_INT(c.exit_pending, want_exit);
  if (rc == 0) CHECK(json_is_object(res));
  json_decref(res);
  nodejs_ws_close(&c.ws, 0);
  close(sv[1]);
}

static void test_exit_event_during_wait(void) {
  /* the announcement between other traffic and the awaited reply */
  const char *const a[] = {"{\"method\":\"Profiler.consoleProfileStarted\",\"params\":{}}",
                           "{\"method\":\"NodeRuntime.waitingForDisconnect\",\"params\":{}}",
                           "{\"id\":1,\"result\":{}}", "{\"id\":2,\"result\":{\"profile\":{}}}"};
  wait_reply(a, 4, 0, 1);
  /* no announcement: nothing noted */
  const char *const b[] = {"{\"method\":\"Runtime.consoleAPICalled\",\"params\":{}}",
                           "{\"id\":2,\"result\":{}}"};
  wait_reply(b, 2, 0, 0);
  /* after the reply: left for the next read */
  const char *const c[] = {"{\"id\":2,\"result\":{}}",
                           "{\"method\":\"NodeRuntime.waitingForDisconnect\",\"params\":{}}"};
  wait_reply(c, 2, 0, 0);
  /* an error reply still notes an announcement before it */
  const char *const d[] = {"{\"method\":\"NodeRuntime.waitingForDisconnect\"}",
                           "{\"id\":2,\"error\":{\"message\":\"Cannot find context\"}}"};
  wait_reply(d, 2, -EREMOTEIO, 1);
}

static void test_note_event(void) {
  struct nodejs_cdp c = {.ws = {.fd = -1}};
  const char ev[] = "{\"method\":\"NodeRuntime.waitingForDisconnect\",\"params\":{}}";
  const char other[] = "{\"method\":\"NodeRuntime.waitingForDebugger\"}";
  const char bad[] = "{\"method\":";
  const char notstr[] = "{\"method\":7}";
  CHECK_EQ_INT(nodejs_cdp_note_event(&c, other, strlen(other)), 0);
  CHECK_EQ_INT(nodejs_cdp_note_event(&c, bad, strlen(bad)), 0);
  CHECK_EQ_INT(nodejs_cdp_note_event(&c, notstr, strlen(notstr)), 0);
  CHECK_EQ_INT(c.exit_pending, 0);
  CHECK_EQ_INT(nodejs_cdp_note_event(&c, ev, strlen(ev)), 1);
  CHECK_EQ_INT(c.exit_pending, 1);
}

int main(void) {
  test_exit_event_during_wait();
  test_note_event();
  return pp_test_finish("test_nodejs_cdp");
}
