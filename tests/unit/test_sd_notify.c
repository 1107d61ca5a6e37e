/* SPDX-License-Identifier: Apache-2.0 */
/* sd_notify: the datagrams reach a socket we bind, for path and abstract
 * ($NOTIFY_SOCKET=@name) addresses; malformed addresses are refused and
 * turn notifications off; the variable is removed from the environment. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sd_notify.h"
#include "testlib.h"

/* Receives one datagram (waits at most 2 s); "" if none. */
static void recv_one(int fd, char *buf, size_t cap) {
  struct timeval tv = {.tv_sec = 2};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ssize_t n = recv(fd, buf, cap - 1, 0);
  buf[n > 0 ? n : 0] = '\0';
}

static int bind_dgram(const char *name, int abstract) {
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  size_t len = strlen(name);
  memcpy(sa.sun_path + (abstract ? 1 : 0), name, len);
  socklen_t sl = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
  if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sl) < 0) {
    perror("bind");
    return -1;
  }
  return fd;
}

static void test_path_socket(void) {
  char dir[] = "/tmp/pp-sdnotify-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char path[128];
  snprintf(path, sizeof(path), "%s/notify", dir);
  int fd = bind_dgram(path, 0);
  CHECK(fd >= 0);
  setenv("NOTIFY_SOCKET", path, 1);
  CHECK_EQ_INT(pp_sd_notify_init(), 1);
  CHECK(getenv("NOTIFY_SOCKET") == NULL); /* workers must not inherit it */
  CHECK_EQ_INT(pp_sd_notify("READY=1\nSTATUS=ok"), 0);
  char buf[256];
  recv_one(fd, buf, sizeof(buf));
  CHECK_EQ_STR(buf, "READY=1\nSTATUS=ok");
  CHECK_EQ_INT(pp_sd_notify("RELOADING=1"), 0);
  recv_one(fd, buf, sizeof(buf));
  CHECK_EQ_STR(buf, "RELOADING=1");
  close(fd);
  /* the manager went away: an error code, never a crash or a block */
  unlink(path);
  CHECK(pp_sd_notify("STOPPING=1") < 0);
  rmdir(dir);
}

static void test_abstract_socket(void) {
  char name[64];
  snprintf(name, sizeof(name), "pp-sdnotify-test-%d", (int)getpid());
  int fd = bind_dgram(name, 1);
  CHECK(fd >= 0);
  char env[80];
  snprintf(env, sizeof(env), "@%s", name);
  setenv("NOTIFY_SOCKET", env, 1);
  CHECK_EQ_INT(pp_sd_notify_init(), 1);
  CHECK_EQ_INT(pp_sd_notify("STOPPING=1"), 0);
  char buf[64];
  recv_one(fd, buf, sizeof(buf));
  CHECK_EQ_STR(buf, "STOPPING=1");
  close(fd);
}

static void test_refused(void) {
  /* unset: off, and sending is a successful no-op */
  unsetenv("NOTIFY_SOCKET");
  CHECK_EQ_INT(pp_sd_notify_init(), 0);
  CHECK_EQ_INT(pp_sd_notify("READY=1"), 0);
  const char *bad[] = {"", "@", "relative/notify", "x"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    setenv("NOTIFY_SOCKET", bad[i], 1);
    CHECK_EQ_INT(pp_sd_notify_init(), -EINVAL);
    CHECK_EQ_INT(pp_sd_notify("READY=1"), 0); /* off, not sent anywhere */
  }
  /* longer than sun_path: refused, not truncated into another name */
  char longp[200];
  memset(longp, 'a', sizeof(longp) - 1);
  longp[0] = '/';
  longp[sizeof(longp) - 1] = '\0';
  setenv("NOTIFY_SOCKET", longp, 1);
  CHECK_EQ_INT(pp_sd_notify_init(), -EINVAL);
  pp_sd_notify_reset();
}

int main(void) {
  test_path_socket();
  test_abstract_socket();
  test_refused();
  return pp_test_finish("test_sd_notify");
}
