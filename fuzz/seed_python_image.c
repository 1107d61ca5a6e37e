/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Records python_walk seeds from real CPython processes (run by hand, the
 * output committed to fuzz/seeds/python_walk/, docs/fuzzing.md):
 *   seed_python_image OUTDIR PYTHON...
 * Each interpreter runs a small recursive program; once it is located,
 * what one validation and two samples read of its memory is kept, with
 * the locate results as the header (fuzz_memimage.h). 3.6-3.13 also run
 * an asyncio program (cpython-VERSION-asyncio.img): a running task (of a
 * class derived from asyncio.Task) awaited through a helper coroutine,
 * tasks waiting in a TaskGroup (3.11+; a gather() before) and a gather();
 * its samples are async-aware, in wall mode (the waiting tasks, from the
 * task registry) and on the GIL holder (the running chain), with the
 * options the fuzzer's last pass uses.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuzz_memimage.h"
#include "fuzz_python_walk.h"
#include "polyprof/kit/remote.h"
#include "python.h"

static void on_stack(void *ctx, uint32_t tid, const struct py_frame_ref *frames, uint32_t n,
                     bool truncated) {
  (void)tid, (void)truncated, (void)frames;
  *(uint32_t *)ctx += n;
}

static const char program[] =
    "import time\n"
    "def leaf(n):\n"
    "    end = time.time() + 30\n"
    "    while time.time() < end: n = (n * 7 + 1) % 1000003\n"
    "def mid(d):\n"
    "    return leaf(d) if d == 0 else mid(d - 1)\n"
    "class Runner:\n"
    "    def go(self): mid(5)\n"
    "Runner().go()\n";

static const char async_program[] =
    "import asyncio, sys, time\n"
    "def named(n): return {'name': n} if sys.version_info >= (3, 8) else {}\n"
    "def run(c):\n"
    "    if hasattr(asyncio, 'run'): return asyncio.run(c)\n"
    "    return asyncio.get_event_loop().run_until_complete(c)\n"
    "async def spin():\n"
    "    await asyncio.sleep(0.05)\n" /* every other task starts first */
    "    end = time.time() + 30\n"
    "    n = 1\n"
    "    while time.time() < end: n = (n * 7 + 1) % 1000003\n"
    "async def helper(t): await t\n"
    "class Sub(asyncio.Task): pass\n"
    "async def nested():\n"
    "    await helper(Sub(spin(), **named('hot')))\n"
    "async def sleeper(): await asyncio.sleep(30)\n"
    "async def group():\n"
    "    if not hasattr(asyncio, 'TaskGroup'):\n"
    "        return await asyncio.gather(asyncio.ensure_future(sleeper()))\n"
    "    async with asyncio.TaskGroup() as tg: tg.create_task(sleeper(), name='s1')\n"
    "async def main(): await asyncio.gather(nested(), group(), sleeper())\n"
    "run(main())\n";

static int record(const char *outdir, const char *exe, bool async) {
  pid_t pid = fork();
  if (pid == 0) {
    execlp(exe, exe, "-c", async ? async_program : program, (char *)NULL);
    _exit(127);
  }
  struct py_proc p;
  char why[160] = "";
  int rc = -1;
  for (int i = 0; i < 40 && rc != 0; i++) {
    usleep(100000);
    rc = python_locate((uint32_t)pid, &p, why, sizeof(why));
  }
  uint32_t frames = 0;
  if (rc == 0) {
    usleep(300000); /* into the loop */
    pp_fuzz_image_record_start();
    if (p.major == 3 && p.minor >= 13) {
      uint8_t dbg[PY_DEBUG_OFFSETS_READ];
      (void)pp_remote_read(pid, p.runtime, dbg, sizeof(dbg));
    }
    (void)python_validate(&p);
    struct py_walker *w = python_walker_new(64);
    struct py_codecache *cc = python_codecache_new(32);
    python_walker_set_async(w, async);
    python_walker_set_gc(w, async);
    python_walker_set_opcodes(w, async);
    python_walker_set_main_only(w, async);
    for (int i = 0; i < 2; i++) {
      struct py_sample_result res;
      python_sample(w, &p, cc, i ? PY_GIL_THREAD : PY_ALL_THREADS, NULL, on_stack, &frames, &res);
    }
    python_codecache_free(cc);
    python_walker_free(w);
    struct py_image_hdr h = {.major = (uint8_t)p.major,
                             .minor = (uint8_t)p.minor,
                             .micro = (uint8_t)p.micro,
                             .runtime = p.runtime,
                             .interp_head = p.interp_head,
                             .tstate_cur = p.tstate_cur,
                             .pycode_type = p.pycode_type,
                             .map_lo = p.map_lo,
                             .map_hi = p.map_hi};
    char path[4096];
    snprintf(path, sizeof(path), "%s/cpython-%s%s.img", outdir, p.version, async ? "-asyncio" : "");
    rc = pp_fuzz_image_record_write(path, &h, sizeof(h));
    printf("%s: %s, %u frames\n", exe, rc == 0 ? path : "write failed", frames);
  } else {
    fprintf(stderr, "%s: not located: %s\n", exe, why);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  return rc;
}

int main(int argc, char **argv) {
  int failed = 0;
  for (int i = 2; i < argc; i++) {
    failed |= record(argv[1], argv[i], false) != 0;
    /* asyncio images where the task readers apply (3.6-3.13) */
    if (strstr(argv[i], "3.6") || strstr(argv[i], "3.7") || strstr(argv[i], "3.8") ||
        strstr(argv[i], "3.9") || strstr(argv[i], "3.10") || strstr(argv[i], "3.11") ||
        strstr(argv[i], "3.12") || strstr(argv[i], "3.13"))
      failed |= record(argv[1], argv[i], true) != 0;
  }
  return failed;
}
