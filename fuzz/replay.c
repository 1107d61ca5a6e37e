/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Replays inputs through a fuzz target without libFuzzer: the regression
 * corpus (inputs that once crashed, fuzz/regressions/<target>/) and the
 * committed seeds run in the normal gcc build and under ASan/UBSan as unit
 * tests. Arguments are files or directories (every regular file inside),
 * "--optional DIR" for one that may be absent or empty.
 * Fails if a directory is empty or unreadable, so a lost corpus is noticed.
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_input.h"

#define REPLAY_MAX_INPUT (16u << 20)

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rbe");
  if (!f) {
    fprintf(stderr, "replay: %s: cannot open\n", path);
    return -1;
  }
  uint8_t *buf = malloc(REPLAY_MAX_INPUT);
  if (!buf) abort();
  size_t n = fread(buf, 1, REPLAY_MAX_INPUT, f);
  fclose(f);
  /* an exact-size copy, so ASan sees reads past the input's end */
  uint8_t *exact = malloc(n ? n : 1);
  if (!exact) abort();
  memcpy(exact, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(exact, n);
  free(exact);
  return 0;
}

int main(int argc, char **argv) {
  size_t total = 0;
  int failed = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    /* "--optional DIR": a corpus that may not exist yet (the regression
     * corpus of a target no fuzzer has broken), so adding its first file
     * needs no CMake reconfigure */
    bool optional = strcmp(argv[i], "--optional") == 0 && i + 1 < argc;
    if (optional) i++;
    if (optional && stat(argv[i], &st) < 0) continue;
    if (stat(argv[i], &st) < 0) {
      fprintf(stderr, "replay: %s: missing\n", argv[i]);
      return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
      failed |= replay_file(argv[i]) < 0;
      total++;
      continue;
    }
    struct dirent **list;
    int n = scandir(argv[i], &list, NULL, alphasort);
    if (n < 0) {
      fprintf(stderr, "replay: %s: unreadable\n", argv[i]);
      return 1;
    }
    size_t here = 0;
    for (int k = 0; k < n; k++) {
      char path[4096];
      snprintf(path, sizeof(path), "%s/%s", argv[i], list[k]->d_name);
      if (list[k]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
        printf("replay %s\n", path);
        failed |= replay_file(path) < 0;
        here++;
      }
      free(list[k]);
    }
    free(list);
    if (!here && !optional) {
      fprintf(stderr, "replay: %s: no inputs (the corpus is missing)\n", argv[i]);
      return 1;
    }
    total += here;
  }
  if (!total) {
    fprintf(stderr, "replay: no inputs given\n");
    return 1;
  }
  printf("replayed %zu inputs without a crash\n", total);
  return failed;
}
