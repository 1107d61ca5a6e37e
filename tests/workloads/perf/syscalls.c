/*
 * Test workload: spends its time in the kernel (read(2) of /dev/zero and
 * getppid(2) in a loop), so its samples carry kernel frames.
 *
 *   syscalls SECONDS
 */
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

__attribute__((noinline)) static void syscall_loop(int fd) {
  char buf[65536];
  for (int i = 0; i < 200; i++) {
    if (read(fd, buf, sizeof(buf)) < 0) break;
    getppid();
  }
}

int main(int argc, char **argv) {
  double secs = argc > 1 ? atof(argv[1]) : 5;
  int fd = open("/dev/zero", O_RDONLY);
  if (fd < 0) return 1;
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    syscall_loop(fd);
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while ((double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
  return 0;
}
