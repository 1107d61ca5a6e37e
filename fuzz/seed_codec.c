/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Makes seeds for the codec fuzzer from real profiles: each .col given is
 * parsed and written in the worker->core wire encoding (profile_codec.c),
 * so the fuzzer starts from what a worker really sends.
 *   seed_codec OUTDIR FILE.col...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipc.h"
#include "output/col.h"
#include "profile.h"
#include "profile_codec.h"

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: seed_codec OUTDIR FILE.col...\n");
    return 2;
  }
  int written = 0;
  for (int i = 2; i < argc; i++) {
    FILE *f = fopen(argv[i], "rbe");
    if (!f) continue;
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof(text), f);
    fclose(f);
    struct pp_profile *p = pp_profile_new();
    char err[256];
    if (!p || pp_col_parse(text, n, p, NULL, err, sizeof(err)) < 0) {
      fprintf(stderr, "seed_codec: %s: %s\n", argv[i], err);
      pp_profile_free(p);
      continue;
    }
    /* counters travel too: give the seed one, as perf's snapshot has */
    pp_profile_add_counter(p, "samples", pp_profile_total(p));
    struct pp_wbuf b;
    pp_wbuf_init(&b);
    if (pp_profile_encode(p, &b) == 0) {
      char out[4096];
      const char *base = strrchr(argv[i], '/');
      snprintf(out, sizeof(out), "%s/%s.ppf", argv[1], base ? base + 1 : argv[i]);
      FILE *o = fopen(out, "wbe");
      if (o && fwrite(b.data, 1, b.len, o) == b.len) written++;
      if (o) fclose(o);
    }
    pp_wbuf_free(&b);
    pp_profile_free(p);
  }
  return written ? 0 : 1;
}
