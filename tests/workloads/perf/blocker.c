/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Off-CPU workload with a known answer: one thread blocks in wait_long for
 * 3 ms out of every 4 ms of blocking and in wait_short for the fourth
 * (nanosleep of 30 ms and 10 ms), so the off-CPU time splits 3:1 between
 * the two functions. Each calls the libc wrapper through a helper of its
 * own: the helper (the wrapper's caller) is what a frame-pointer walk loses
 * under a libc built without frame pointers, the function above it stays.
 * A second thread burns CPU, which must not show as off-CPU time.
 * Usage: blocker SECONDS
 */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

static volatile int stop;

__attribute__((noinline)) static void sleep_ns(long ns) {
  struct timespec t = {0, ns};
  nanosleep(&t, NULL);
  __asm__ volatile("" ::: "memory"); /* no tail call */
}

__attribute__((noinline)) void wait_long(void) {
  sleep_ns(30000000);
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void wait_short(void) {
  sleep_ns(10000000);
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void *burn(void *arg) {
  volatile unsigned long x = 0;
  while (!stop)
    x++;
  return arg;
}

int main(int argc, char **argv) {
  int secs = argc > 1 ? atoi(argv[1]) : 10;
  pthread_t t;
  pthread_create(&t, NULL, burn, NULL);
  time_t end = time(NULL) + secs;
  while (time(NULL) < end) {
    wait_long();
    wait_short();
  }
  stop = 1;
  pthread_join(t, NULL);
  return 0;
}
