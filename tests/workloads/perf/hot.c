/*
 * Test workload for the perf plugin: two hot functions whose CPU time is in
 * a 3:1 ratio (hot_a does three times the work of hot_b per round), called
 * through a few levels so a profiler must unwind to reach main.
 *
 *   hot SECONDS [bigframe]
 *
 * bigframe: call through a frame holding 16 KiB of locals, deeper than the
 * default DWARF stack copy (8 KiB), so only frame pointers reach main; three
 * more levels sit below that frame, so this build's frame-pointer stacks are
 * far deeper than its DWARF ones: smart mode's choice (gProfiler's average
 * depth over distinct stacks, ties to DWARF) then survives a rare shallow
 * stack, such as a sample taken between two rounds.
 * Built by the tests with and without frame pointers.
 *
 * A round's length varies at random (both functions scaled alike, so the
 * split stays 3:1): a fixed-length round on an idle machine phase-locks
 * with a periodic sampler, and the sampled split drifted to 82:18.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile uint64_t sink;
static int round_len;

#define ROUND 200000

/* xorshift: a round of ROUND/2 .. 3*ROUND/2 iterations */
static void next_round(void) {
  static uint64_t s = 0x9e3779b97f4a7c15ull;
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  round_len = ROUND / 2 + (int)(s % ROUND);
}

__attribute__((noinline)) static void hot_a(void) {
  uint64_t x = sink | 1;
  for (int i = 0; i < 3 * round_len; i++)
    x = x * 6364136223846793005ull + 1442695040888963407ull;
  sink = x;
}

__attribute__((noinline)) static void hot_b(void) {
  uint64_t x = sink | 3;
  for (int i = 0; i < round_len; i++)
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
  for (size_t i = 0; i < sizeof(big); i += 512) /* in line: no libc leaf frame */
    big[i] = 1;
  level2();
  sink += big[512];
}

__attribute__((noinline)) static void outer3(void) {
  bigframe();
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void outer2(void) {
  outer3();
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void outer1(void) {
  outer2();
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void work(int big) {
  next_round();
  if (big)
    outer1();
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
