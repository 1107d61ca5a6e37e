/*
 * Test workload: a short-lived process that burns CPU in a function of its
 * own, then exits. Many copies of it make a host with process churn.
 *
 *   brief MS            burn MS milliseconds of CPU time, exit
 *   brief MS SECONDS    every 50 ms burn MS ms of CPU, for SECONDS, exit
 *
 * CPU time, not wall time: on a loaded machine every copy still spends
 * (and is sampled for) the same amount of CPU.
 */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static volatile uint64_t sink;

static double cpu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double wall_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

__attribute__((noinline)) static void brief_spin(double secs) {
  double end = cpu_now() + secs;
  uint64_t x = sink | 1;
  while (cpu_now() < end)
    for (int i = 0; i < 20000; i++)
      x = x * 6364136223846793005ull + 1;
  sink = x;
}

int main(int argc, char **argv) {
  double burn = (argc > 1 ? atof(argv[1]) : 300) / 1000.0;
  if (argc < 3) {
    brief_spin(burn);
    return 0;
  }
  double until = wall_now() + atof(argv[2]);
  struct timespec nap = {0, 50 * 1000 * 1000};
  while (wall_now() < until) {
    brief_spin(burn);
    nanosleep(&nap, NULL);
  }
  return 0;
}
