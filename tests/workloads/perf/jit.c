/*
 * Test workload: a "JIT" that copies machine code into anonymous executable
 * memory, announces it in /tmp/perf-<pid>.map (the perf convention Node,
 * the JVM agents and LuaJIT use) and runs it.
 *
 *   jit SECONDS
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
  double secs = argc > 1 ? atof(argv[1]) : 5;
#if defined(__x86_64__)
  /* mov ecx, 10000000; 1: dec ecx; jnz 1b; ret */
  static const unsigned char code[] = {0xb9, 0x80, 0x96, 0x98, 0x00, 0xff, 0xc9, 0x75, 0xfc, 0xc3};
#else
#error "x86-64 only"
#endif
  size_t len = 4096;
  unsigned char *mem =
      mmap(NULL, len, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return 1;
  memcpy(mem + 256, code, sizeof(code));
  char path[64];
  snprintf(path, sizeof(path), "/tmp/perf-%d.map", getpid());
  FILE *f = fopen(path, "w");
  if (!f) return 1;
  fprintf(f, "%lx %zx jit_warmup_stub\n", (unsigned long)(uintptr_t)mem, (size_t)16);
  fprintf(f, "%lx %zx LazyCompile:*jitHotLoop app.js:42\n", (unsigned long)(uintptr_t)(mem + 256),
          sizeof(code));
  fclose(f);
  void (*fn)(void) = (void (*)(void))(uintptr_t)(mem + 256);
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    fn();
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while ((double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
  unlink(path);
  return 0;
}
