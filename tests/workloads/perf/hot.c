/*
 * Test workload for the perf plugin: two hot functions whose CPU time is in
 * a 3:1 ratio (hot_a does three times the work of hot_b per round), called
 * through a few levels so a profiler must unwind to reach main.
 *
 *   hot SECONDS [bigframe]
 *
 * bigframe: call through a frame holding 16 KiB of locals, deeper than the
 * default DWARF stack copy (8 KiB), so only frame pointers reach main.
 * Built by the tests with and without frame pointers.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile uint64_t sink;

#define ROUND 200000

__attribute__((noinline)) static void hot_a(void) {
  uint64_t x = sink | 1;
  for (int i = 0; i < 3 * ROUND; i++)
    x = x * 6364136223846793005ull + 1442695040888963407ull;
  sink = x;
}

__attribute__((noinline)) static void hot_b(void) {
  uint64_t x = sink | 3;
  for (int i = 0; i < ROUND; i++)
    x = x * 2862933555777941757ull + 3037000493ull;
  sink = x;
}

__attribute__((noinline)) static void level3(void) {
  hot_a();
  hot_b();
  __asm__ volatile("" ::: "memory"); /* keep this frame: no tail call */
}

__attribute__((noinline)) static void level2(void) {
  level3();
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void bigframe(void) {
  volatile char big[16384];
  memset((char *)big, 1, sizeof(big));
  level2();
  sink += big[100];
}

__attribute__((noinline)) static void work(int big) {
  if (big)
    bigframe();
  else
    level2();
  __asm__ volatile("" ::: "memory");
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  double secs = argc > 1 ? atof(argv[1]) : 5;
  int big = argc > 2 && strcmp(argv[2], "bigframe") == 0;
  double end = now() + secs;
  while (now() < end)
    work(big);
  return 0;
}
