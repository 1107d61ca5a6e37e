/*
 * See fuzz_input.h.
 */
#include "fuzz_input.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
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
