/*
 * Test workload: wakes up every 250 ms, burns ~0.1 ms of CPU in a
 * function of its own, sleeps again. Thousands of these make a host with
 * many lightly active processes (the perf plugin's memory-bound test).
 *
 *   blip SECONDS
 */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static volatile uint64_t sink;

__attribute__((noinline)) static void blip_work(void) {
  uint64_t x = sink | 1;
  for (int i = 0; i < 40000; i++)
    x = x * 6364136223846793005ull + 1;
  sink = x;
}

int main(int argc, char **argv) {
  double secs = argc > 1 ? atof(argv[1]) : 10;
  struct timespec t0, t, nap = {0, 250 * 1000 * 1000};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    blip_work();
    nanosleep(&nap, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while ((double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
  return 0;
}
