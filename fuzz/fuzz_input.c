/* SPDX-License-Identifier: Apache-2.0 */
/*
 * See fuzz_input.h.
 */
#include "fuzz_input.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

int pp_fuzz_memfd(const uint8_t *data, size_t size, char *path, size_t cap) {
  static int fd = -1;
  if (fd < 0) fd = memfd_create("pp-fuzz-input", MFD_CLOEXEC);
  if (fd < 0) return -1;
  if (ftruncate(fd, 0) < 0) return -1;
  size_t done = 0;
  while (done < size) {
    ssize_t n = pwrite(fd, data + done, size - done, (off_t)done);
    if (n <= 0) return -1;
    done += (size_t)n;
  }
  snprintf(path, cap, "/proc/self/fd/%d", fd);
  return fd;
}

FILE *pp_fuzz_devnull(void) {
  static FILE *f;
  if (!f) f = fopen("/dev/null", "we");
  if (!f) abort();
  return f;
}

int pp_fuzz_peer_socket(const uint8_t *data, size_t size, int *peer) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) abort();
  int buf = 1 << 20;
  setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
  setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
  int fl = fcntl(sv[0], F_GETFL);
  fcntl(sv[0], F_SETFL, fl | O_NONBLOCK); /* never block on an input larger than the buffer */
  size_t done = 0;
  while (done < size) {
    ssize_t n = write(sv[0], data + done, size - done);
    if (n <= 0) break;
    done += (size_t)n;
  }
  if (peer) {
    shutdown(sv[0], SHUT_WR);
    *peer = sv[0];
  } else {
    close(sv[0]);
  }
  return sv[1];
}
