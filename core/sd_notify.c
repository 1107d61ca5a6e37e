/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sd_notify(3) wire protocol, see sd_notify.h. The address is resolved once
 * at start-up; each notification is one socket()+sendto()+close(), which
 * happens a handful of times per session, never per sample.
 */
#include "sd_notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static struct sockaddr_un notify_addr;
static socklen_t notify_addr_len; /* 0: notifications off */

void pp_sd_notify_reset(void) {
  memset(&notify_addr, 0, sizeof(notify_addr));
  notify_addr_len = 0;
}

int pp_sd_notify_init(void) {
  pp_sd_notify_reset();
  const char *env = getenv("NOTIFY_SOCKET");
  if (!env) return 0;
  size_t len = strlen(env);
  int rc = -EINVAL;
  /* a path must be absolute; '@' starts an abstract name (a leading NUL on
   * the wire). Anything else, or a name that does not fit sun_path, is
   * refused rather than truncated into some other socket's name. */
  if (len >= 2 && len < sizeof(notify_addr.sun_path) && (env[0] == '/' || env[0] == '@')) {
    notify_addr.sun_family = AF_UNIX;
    memcpy(notify_addr.sun_path, env, len);
    if (env[0] == '@') notify_addr.sun_path[0] = '\0';
    /* abstract names are exactly len bytes long; paths carry their NUL */
    notify_addr_len =
        (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (env[0] == '/' ? 1 : 0));
    rc = 1;
  }
  unsetenv("NOTIFY_SOCKET");
  return rc;
}

int pp_sd_notify(const char *state) {
  if (!notify_addr_len || !state) return 0;
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -errno;
  int rc = 0;
  size_t len = strlen(state);
  ssize_t n =
      sendto(fd, state, len, MSG_NOSIGNAL, (const struct sockaddr *)&notify_addr, notify_addr_len);
  if (n < 0)
    rc = -errno;
  else if ((size_t)n != len)
    rc = -EMSGSIZE;
  close(fd);
  return rc;
}
