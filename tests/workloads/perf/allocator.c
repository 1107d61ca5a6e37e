/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Native allocation workload with a known answer: alloc_big asks for 3
 * bytes for every byte alloc_small asks for. alloc_big calls malloc with
 * sizes spread evenly over 2000..4000 (3000 on average), alloc_small calls
 * calloc for 5..15 elements of 100 bytes (1000 on average), alternately,
 * so the bytes split 3:1 while the calls split 1:1. Both call the
 * allocator directly: at its first instruction their own frame is the one
 * a frame-pointer walk skips. The allocating thread starts a little after
 * the process, as threads a profiler must find later do.
 * Usage: allocator SECONDS
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void *volatile keep[64];
static unsigned seed = 1;

static unsigned next(void) {
  seed = seed * 1103515245u + 12345u;
  return seed >> 16;
}

__attribute__((noinline)) void alloc_big(unsigned i) {
  free(keep[i & 63]);
  keep[i & 63] = malloc(2000 + next() % 2001);
  __asm__ volatile("" ::: "memory"); /* no tail call */
}

__attribute__((noinline)) void alloc_small(unsigned i) {
  free(keep[i & 63]);
  keep[i & 63] = calloc(5 + next() % 11, 100);
  __asm__ volatile("" ::: "memory");
}

static void *run(void *arg) {
  time_t end = *(time_t *)arg;
  for (unsigned i = 0; time(NULL) < end; i += 2) {
    for (unsigned k = 0; k < 1000; k += 2) {
      alloc_big(i + k);
      alloc_small(i + k + 1);
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  int secs = argc > 1 ? atoi(argv[1]) : 10;
  time_t end = time(NULL) + secs;
  usleep(300000);
  pthread_t t;
  pthread_create(&t, NULL, run, &end);
  pthread_join(t, NULL);
  return 0;
}
