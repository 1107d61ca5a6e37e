/*
 * Test workload for test_perf_hostile_files: a target that plants something
 * at a path the perf plugin reads, from inside (it runs as root of its own
 * user and mount namespace), then keeps the CPU busy in a named native
 * function and in anonymous executable memory (JIT code that no perf map
 * describes, unless the planted file is read).
 *
 *   PP_HOSTILE_PLANT="shell line" hostile SECONDS
 *
 * The shell line runs with PP_PID set to this process's pid (the perf map
 * is /tmp/perf-$PP_PID.map); "planted <status>" is printed once it ran.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

__attribute__((noinline)) static void hostile_leaf(void) {
  for (volatile int i = 0; i < 2000000; i++) {
  }
}

__attribute__((noinline)) static void hostile_root(void (*jit)(void), double end) {
  while (now() < end) {
    hostile_leaf();
    jit();
  }
}

int main(int argc, char **argv) {
  double secs = argc > 1 ? atof(argv[1]) : 5;
  /* mov ecx, 2000000; 1: dec ecx; jnz 1b; ret */
  static const unsigned char code[] = {0xb9, 0x80, 0x84, 0x1e, 0x00, 0xff, 0xc9, 0x75, 0xfc, 0xc3};
  unsigned char *mem =
      mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return 1;
  memcpy(mem + 256, code, sizeof(code));
  char pid[16];
  snprintf(pid, sizeof(pid), "%d", (int)getpid());
  setenv("PP_PID", pid, 1);
  const char *plant = getenv("PP_HOSTILE_PLANT");
  int rc = plant ? system(plant) : 0;
  printf("planted %d\n", rc);
  fflush(stdout);
  hostile_root((void (*)(void))(uintptr_t)(mem + 256), now() + secs);
  return 0;
}
