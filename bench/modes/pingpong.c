/* SPDX-License-Identifier: Apache-2.0 */
/* A context-switch storm: two processes hand a byte back and forth through
 * pipes as fast as they can. Usage: pingpong SECONDS */
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
  int secs = argc > 1 ? atoi(argv[1]) : 10;
  int a[2], b[2];
  char c = 0;
  if (pipe(a) || pipe(b)) return 1;
  time_t end = time(NULL) + secs;
  if (fork() == 0) {
    /* only the parent's ends stay open elsewhere: its exit ends this loop */
    close(a[1]);
    close(b[0]);
    while (read(a[0], &c, 1) == 1 && write(b[1], &c, 1) == 1)
      ;
    _exit(0);
  }
  close(a[0]);
  close(b[1]);
  while (time(NULL) < end)
    for (int i = 0; i < 1000; i++)
      if (write(a[1], &c, 1) != 1 || read(b[0], &c, 1) != 1) return 1;
  return 0;
}
