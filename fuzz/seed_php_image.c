/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Records php_walk seeds from a real PHP process (run by hand, the output
 * committed to fuzz/seeds/php_walk/, docs/fuzzing.md):
 *   seed_php_image OUTDIR [PHP]
 * The interpreter runs a small program (a method, recursion, a builtin
 * at the leaf); once attached, what two walks read of its memory is kept,
 * with the attach results as the header (fuzz_memimage.h). The plugin's
 * attach code is compiled in for its locate().
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../plugins/php/php_attach.c"
#include "fuzz_memimage.h"
#include "fuzz_php_walk.h"

/* php.c's list (the descriptor is not compiled in): the CLI's name */
const char *const php_match_exe[] = {"php", "php[0-9]*", NULL};

static const char program[] =
    "function leaf() { $e = microtime(true) + 30; while (microtime(true) < $e) { usleep(1); } }\n"
    "function mid($d) { return $d ? mid($d - 1) : leaf(); }\n"
    "class Runner { function go() { mid(4); } }\n"
    "(new Runner())->go();\n";

int main(int argc, char **argv) {
  const char *php = argc > 2 ? argv[2] : "php";
  pid_t pid = fork();
  if (pid == 0) {
    execlp(php, php, "-r", program, (char *)NULL);
    _exit(127);
  }
  struct php_attach a = {0};
  char why[256] = "";
  int rc = -1;
  for (int i = 0; i < 40 && rc != 0; i++) {
    usleep(100000);
    rc = locate((uint32_t)pid, &a, why, sizeof(why));
  }
  if (rc == 0) {
    usleep(300000);
    pp_fuzz_image_record_start();
    struct php_walker *w = php_walker_new(64, 32);
    uint32_t total = 0;
    for (int i = 0; i < 2; i++) {
      const struct pp_frame *frames;
      uint32_t n = 0;
      if (php_walk(w, (uint32_t)pid, &a, &frames, &n) == PHP_WALK_OK) total += n;
    }
    php_walker_free(w);
    struct php_image_hdr h = {
        .major = (uint8_t)a.major, .minor = (uint8_t)a.minor, .eg_addr = a.eg_addr};
    char path[4096];
    snprintf(path, sizeof(path), "%s/php-%d.%d-cli.img", argv[1], a.major, a.minor);
    rc = pp_fuzz_image_record_write(path, &h, sizeof(h));
    printf("%s: %s, %u frames\n", php, rc == 0 ? path : "write failed", total);
  } else {
    fprintf(stderr, "%s: not attached: %s\n", php, why);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  return rc != 0;
}
