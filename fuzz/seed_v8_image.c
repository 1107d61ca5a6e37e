/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Records v8_walk seeds from a real Node process (run by hand, the output
 * committed to fuzz/seeds/v8_walk/, docs/fuzzing.md):
 *   seed_v8_image OUTDIR [NODE]
 * Node runs a small program (recursion through a class method and a
 * closure, a string built at run time as a function name); its V8 layout is
 * read from the executable's metadata and its main thread sampled by perf
 * as the v8 mode does. For the first samples with JS frames, the stack
 * copy and registers form the header and what the walk read of the heap
 * is kept (fuzz_memimage.h).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuzz_memimage.h"
#include "fuzz_v8_walk.h"
#include "polyprof/kit/remote.h"
#include "v8_sample.h"
#include "v8_walk.h"

#define WANT 3

static const char program[] =
    "function leaf(n) { let s = 0; for (let i = 0; i < n; i++) s += Math.sqrt(i); return s; }\n"
    "const named = { ['dyn' + 'Name']: function (d) { return d ? named.dynName(d - 1) : "
    "leaf(1e5); } };\n"
    "class Runner { go(d) { return named.dynName(d); } }\n"
    "const end = Date.now() + 20000;\n"
    "while (Date.now() < end) new Runner().go(6);\n";

struct rec {
  struct v8_reader rd;
  const char *dir, *tag;
  int written;
};

static struct pp_frame frames[V8_MAX_FRAMES];

static void on_sample(void *ctx, const struct v8_raw_sample *s) {
  struct rec *rc = ctx;
  if (rc->written >= WANT || s->stack_len == 0) return;
  pp_fuzz_image_record_start();
  int n = v8_walk(&rc->rd, s, frames, V8_MAX_FRAMES);
  /* the header: layout, registers, then the stack as the first segment */
  size_t hlen = sizeof(struct v8_image_hdr) + 12 + s->stack_len;
  unsigned char *hdr = malloc(hlen);
  if (!hdr) abort();
  struct v8_image_hdr h = {.L = rc->rd.L, .bp = s->regs.bp, .ip = s->regs.ip};
  uint32_t len = (uint32_t)s->stack_len;
  memcpy(hdr, &h, sizeof(h));
  memcpy(hdr + sizeof(h), &s->regs.sp, 8);
  memcpy(hdr + sizeof(h) + 8, &len, 4);
  memcpy(hdr + sizeof(h) + 12, s->stack, s->stack_len);
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s-%d.img", rc->dir, rc->tag, rc->written);
  /* written even when the walk found nothing (to free the recording);
   * overwritten by the next sample then */
  if (pp_fuzz_image_record_write(path, hdr, hlen) == 0 && n > 0) {
    printf("%s: %d frames, leaf %s\n", path, n, frames[0].name);
    rc->written++;
  }
  free(hdr);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: seed_v8_image OUTDIR [NODE]\n");
    return 2;
  }
  const char *node = argc > 2 ? argv[2] : "node";
  pid_t pid = fork();
  if (pid == 0) {
    execlp(node, node, "-e", program, (char *)NULL);
    _exit(127);
  }
  usleep(1500000); /* past startup, the loop optimised */
  struct rec rc = {.dir = argv[1], .tag = "node"};
  struct pp_module m = {.fd = -1};
  char why[256] = "";
  int r = pp_find_module((uint32_t)pid, "libnode.so*", &m, why, sizeof(why));
  if (r == -ENOENT) {
    const char *base = strrchr(node, '/');
    r = pp_find_module((uint32_t)pid, base ? base + 1 : node, &m, why, sizeof(why));
  }
  struct v8_layout L;
  if (r == 0) r = v8_layout_load((uint32_t)pid, m.fd, m.bias, &L, why, sizeof(why));
  pp_module_close(&m);
  struct v8_sampler smp;
  if (r == 0 && (r = v8_reader_init(&rc.rd, (uint32_t)pid, &L, 16)) == 0) {
    r = v8_sampler_open(&smp, (uint32_t)pid, 97, 16384, 4, 0);
    for (int i = 0; r == 0 && i < 100 && rc.written < WANT; i++) {
      usleep(50000);
      v8_sampler_drain(&smp, on_sample, &rc);
    }
    if (r == 0) v8_sampler_close(&smp);
    v8_reader_free(&rc.rd);
  }
  if (r < 0) fprintf(stderr, "%s: %s (%s)\n", node, why[0] ? why : "failed", strerror(-r));
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  return rc.written == WANT ? 0 : 1;
}
