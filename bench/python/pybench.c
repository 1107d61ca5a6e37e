/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pybench: the python plugin's sampler alone, against one live process.
 *
 *   pybench PID [SECONDS] [HZ] [wall|cpu|gil] [-v]
 *
 * Locates CPython in PID (timed), then samples it with the plugin's own
 * walker and code cache into the kit's stack table (as the plugin does),
 * in wall mode (every thread), for
 * SECONDS. HZ = 0 (default) samples back to back: the highest sustained
 * rate. Prints one line per figure: locate time, samples, failed samples,
 * achieved rate, CPU microseconds per sample (user + system of this
 * process, from getrusage), frames per sample.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../../plugins/python/python.h"
#include "polyprof/kit/log.h"
#include "polyprof/kit/proc.h"

static double now_s(void) {
  return (double)pp_clock_ns() / 1e9;
}

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec / 1e6;
}

static uint64_t frames_seen;
static struct pp_stack_table *stacks;
static struct pp_frame frames_buf[1024 + 1];
static uint32_t g_pid;

static int verbose;

static bool pred_running(void *ctx, uint32_t tid) {
  (void)ctx;
  char st = 0;
  if (tid) pp_proc_state(g_pid, tid, &st);
  if (verbose) printf("thread tid %u state %c\n", tid, st ? st : '?');
  return !tid || st == 'R';
}

static void on_stack(void *ctx, uint32_t tid, const struct py_frame_ref *f, uint32_t n,
                     bool truncated) {
  (void)ctx;
  frames_seen += n;
  if (verbose)
    printf("stack of tid %u: %u frames, leaf %s:%d caller %s\n", tid, n, f[0].code->name, f[0].line,
           n > 1 ? f[1].code->name : "-");
  /* what the plugin does with a stack (sampler.c) */
  for (uint32_t i = 0; i < n && i < 1024; i++)
    frames_buf[i] = f[i].code ? (struct pp_frame){.name = f[i].code->name,
                                                  .file = f[i].code->file,
                                                  .line = f[i].line,
                                                  .kind = PP_FRAME_PYTHON}
                              : (struct pp_frame){.name = f[i].pseudo, .kind = PP_FRAME_PSEUDO};
  if (n > 1024) n = 1024;
  if (truncated)
    frames_buf[n++] = (struct pp_frame){.name = "[Truncated Stack]", .kind = PP_FRAME_PYTHON_ERROR};
  pp_stack_table_add(stacks, g_pid, 0, NULL, frames_buf, n, 1);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(
        stderr,
        "usage: pybench PID [SECONDS] [HZ] [wall|cpu|gil|exception[+gc][+async][+opcodes]] [-v]\n");
    return 2;
  }
  g_pid = (uint32_t)atoi(argv[1]);
  double seconds = argc > 2 ? atof(argv[2]) : 5;
  double hz = argc > 3 ? atof(argv[3]) : 0;
  const char *mode = argc > 4 ? argv[4] : "wall";
  verbose = argc > 5;
  /* MODE[+gc][+async][+opcodes]: the thread filter, <GC> frames (the
   * plugin's default), asyncio task chains, <op: NAME> leaves */
  bool gc = strstr(mode, "+gc") != NULL, async = strstr(mode, "+async") != NULL;
  bool opcodes = strstr(mode, "+opcodes") != NULL;
  enum py_thread_filter filter = !strncmp(mode, "cpu", 3)         ? PY_RUNNING_THREADS
                                 : !strncmp(mode, "gil", 3)       ? PY_GIL_THREAD
                                 : !strncmp(mode, "exception", 9) ? PY_EXCEPTION_THREADS
                                                                  : PY_ALL_THREADS;
  struct py_proc p;
  char why[160];
  double t0 = now_s(), c0 = cpu_s();
  int rc = python_locate(g_pid, &p, why, sizeof(why));
  double t1 = now_s(), c1 = cpu_s();
  if (rc < 0) {
    fprintf(stderr, "locate: %s (%d)\n", why[0] ? why : strerror(-rc), rc);
    return 1;
  }
  printf("python_version %s\n", p.version);
  if (filter == PY_RUNNING_THREADS && python_discover_tid_offset(&p) < 0)
    printf("tid offset not found\n");
  if (verbose) printf("pthread tid offset %d\n", p.pthread_tid_off);
  printf("locate_ms %.2f (cpu %.2f)\n", (t1 - t0) * 1e3, (c1 - c0) * 1e3);
  struct py_codecache *cc = python_codecache_new(8192);
  struct py_walker *w = python_walker_new(1024);
  if (w) {
    python_walker_set_gc(w, gc);
    python_walker_set_async(w, async);
    python_walker_set_opcodes(w, opcodes);
  }
  struct pp_stack_table_limits lim = {.max_stacks = 65536,
                                      .max_string_bytes = 16u << 20,
                                      .max_frame_refs = 8u << 20,
                                      .max_depth = 1025};
  stacks = pp_stack_table_new(&lim);
  uint64_t samples = 0, failed = 0;
  double start = now_s(), cstart = cpu_s(), next = start;
  while (now_s() - start < seconds) {
    if (hz > 0) {
      next += 1.0 / hz;
      double d = next - now_s();
      if (d > 0) usleep((useconds_t)(d * 1e6));
    }
    struct py_sample_result res;
    rc = python_sample(w, &p, cc, filter, pred_running, on_stack, NULL, &res);
    samples++;
    if (rc < 0 || res.failed) failed++;
  }
  double el = now_s() - start, cpu = cpu_s() - cstart;
  printf("samples %llu\n", (unsigned long long)samples);
  printf("failed %llu (%.2f%%)\n", (unsigned long long)failed, 100.0 * failed / samples);
  printf("rate_hz %.0f\n", samples / el);
  printf("cpu_us_per_sample %.2f\n", cpu * 1e6 / samples);
  printf("frames_per_sample %.1f\n", (double)frames_seen / samples);
  return 0;
}
