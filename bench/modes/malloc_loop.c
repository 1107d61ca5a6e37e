/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Native allocation benchmark workload: waits DELAY_MS (for a profiler to
 * place its probes), then for SECONDS makes malloc calls of sizes spread
 * over 16..4111 bytes, each freeing the block allocated 64 calls earlier,
 * and prints the CPU time per call (user + system: what the traps of a
 * profiler's probes add shows whatever else the machine runs).
 * Usage: malloc_loop SECONDS DELAY_MS
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void *volatile ring[64];

int main(int argc, char **argv) {
  double secs = argc > 1 ? atof(argv[1]) : 5;
  long delay_ms = argc > 2 ? atol(argv[2]) : 0;
  usleep((useconds_t)(delay_ms * 1000));
  struct timespec a, b, ca, cb;
  clock_gettime(CLOCK_MONOTONIC, &a);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ca);
  unsigned x = 1;
  long n = 0;
  double ns = 0;
  do {
    for (int k = 0; k < 4096; k++, n++) {
      x = x * 1103515245u + 12345u;
      free(ring[n & 63]);
      ring[n & 63] = malloc(16 + (x >> 16) % 4096);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
  } while (ns < secs * 1e9);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cb);
  ns = ((double)(cb.tv_sec - ca.tv_sec) * 1e9 + (double)(cb.tv_nsec - ca.tv_nsec)) / (double)n;
  printf("cpu_ns_per_call %.1f\n", ns);
  return 0;
}
