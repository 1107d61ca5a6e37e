/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Records ruby_walk seeds from a real Ruby process (run by hand, the
 * output committed to fuzz/seeds/ruby_walk/, docs/fuzzing.md):
 *   seed_ruby_image OUTDIR [RUBY]
 * Ruby runs a small program (a method, recursion, a block, a C method at
 * the leaf); once the plugin's attach found its VM, the GVL holder's
 * execution context is walked twice and every segment read is kept, with
 * the version and the EC as the header (fuzz_memimage.h).
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuzz_memimage.h"
#include "fuzz_ruby_walk.h"
#include "polyprof/kit/remote.h"
#include "polyprof/kit/target_table.h"

static void host_log(const struct pp_host *host, int level, const char *fmt, ...) {
  (void)host, (void)level;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

static const char program[] =
    "class Runner\n"
    "  def leaf(n) = loop { n = [n, 7, 3].sort.first + 1 }\n"
    "  def mid(d) = d.zero? ? [1].each { leaf(0) } : mid(d - 1)\n"
    "  def go = mid(4)\n"
    "end\n"
    "Runner.new.go\n";

int main(int argc, char **argv) {
  const char *ruby = argc > 2 ? argv[2] : "ruby";
  pid_t pid = fork();
  if (pid == 0) {
    execlp(ruby, ruby, "-e", program, (char *)NULL);
    _exit(127);
  }
  struct pp_host host = {.struct_size = sizeof(host), .abi_major = PP_ABI_MAJOR, .log = host_log};
  struct ruby_state *st = fuzz_ruby_state_new();
  st->host = &host;
  st->max_threads = 8;
  struct pp_target_entry e = {.pid = (uint32_t)pid};
  int rc = -1;
  for (int i = 0; i < 40 && rc != 0; i++) {
    usleep(100000);
    e.attempts = 0;
    rc = ruby_attach(st, &e);
  }
  if (rc == 0) {
    struct ruby_target *t = e.data;
    usleep(300000);
    uint64_t ec = 0;
    uint64_t at = t->main_ractor ? t->main_ractor + (uint64_t)t->running_ec_off : t->ec_ptr_addr;
    pp_remote_read(pid, at, &ec, sizeof(ec));
    pp_fuzz_image_record_start();
    int total = 0;
    for (int i = 0; i < 2; i++) {
      bool truncated;
      int n = ruby_walk(st, t, ec, &truncated);
      if (n > 0) total += n;
    }
    struct ruby_image_hdr h = {.ec = ec, .global_symbols = t->global_symbols};
    snprintf(h.version, sizeof(h.version), "%s", t->version);
    char path[4096];
    snprintf(path, sizeof(path), "%s/ruby-%s.img", argv[1], t->version);
    rc = pp_fuzz_image_record_write(path, &h, sizeof(h));
    printf("%s: %s, %d frames\n", ruby, rc == 0 ? path : "write failed", total);
    ruby_target_release(st, &e);
  } else {
    fprintf(stderr, "%s: not attached: %s\n", ruby, e.reason);
  }
  fuzz_ruby_state_free(st);
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  return rc != 0;
}
