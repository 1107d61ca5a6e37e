/*
 * Test workload: two busy threads named by the program ("burner" and
 * "spinner", pthread_setname_np), each in a function of its own, for
 * SECONDS (default 30), then exit.
 *
 *   named_threads [SECONDS]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;
static double seconds = 30;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void burn_loop(void) {
  double end = now() + seconds;
  while (now() < end)
    for (int i = 0; i < 100000; i++)
      sink += (uint64_t)i * 7;
}

__attribute__((noinline)) static void spin_loop(void) {
  double end = now() + seconds;
  while (now() < end)
    for (int i = 0; i < 100000; i++)
      sink ^= (uint64_t)i * 13;
}

static void *burner(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "burner");
  burn_loop();
  return NULL;
}

static void *spinner(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "spinner");
  spin_loop();
  return NULL;
}

int main(int argc, char **argv) {
  if (argc > 1) seconds = atof(argv[1]);
  pthread_t a, b;
  pthread_create(&a, NULL, burner, NULL);
  pthread_create(&b, NULL, spinner, NULL);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  return 0;
}
