/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Time to encode one large session in each output format.
 *
 * Builds a synthetic merged profile (default 50,000 distinct stacks over 300
 * processes, 8-40 frames deep, frames drawn from 20,000 distinct ones of
 * mixed runtime kinds, Zipf-ish reuse), then times each writer into memory:
 * .col (the gProfiler-compatible reference), HTML, pprof (.pb.gz including
 * gzip), speedscope, Firefox Profiler (gecko), the line heatmap, and the
 * studio upload body (.col text in gzipped JSON).
 * Median CPU time of --runs runs; one line per figure with the ratio to .col.
 *
 *   build/bench/upload/encode [--stacks N] [--runs R]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "output/col.h"
#include "output/gecko.h"
#include "output/heatmap.h"
#include "output/html.h"
#include "output/pprof.h"
#include "output/speedscope.h"
#include "profile.h"
#include "support/gzip.h"
#include "upload/otlp.h"
#include "upload/studio.h"

static uint64_t rng = 88172645463325252ULL;
static uint32_t rnd(uint32_t n) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (uint32_t)(rng % n);
}

/* CPU time of this process: the figure that matters for an agent, and
 * stable on a shared machine where wall time is not */
static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmpd(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

enum fmt { F_COL, F_HTML, F_PPROF, F_SPEEDSCOPE, F_GECKO, F_HEATMAP, F_STUDIO, F_OTLP, F_N };
static const char *const names[F_N] = {
    "col",   "html",    "pprof (.pb.gz)",     "speedscope",
    "gecko", "heatmap", "studio upload body", "OTLP request (gz)"};

static size_t encode(enum fmt f, const struct pp_profile *p) {
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  struct pp_html_info hi = {.title = "bench", .start_time = "", .end_time = "", .hostname = "h"};
  struct pp_pprof_info pi = {.start = 1, .end = 61, .frequency = 11};
  switch (f) {
    case F_COL:
    case F_STUDIO:
      pp_col_write(m, p, "{\"bench\": true}", NULL);
      break;
    case F_HTML:
      pp_html_write(m, p, &hi);
      break;
    case F_PPROF:
      pp_pprof_write(m, p, &pi);
      break;
    case F_SPEEDSCOPE:
      pp_speedscope_write(m, p, "bench");
      break;
    case F_GECKO: {
      struct pp_gecko_info gi = {.start = 1, .frequency = 11, .product = "bench"};
      pp_gecko_write(m, p, &gi);
      break;
    }
    case F_HEATMAP: {
      struct pp_heatmap_info mi = {.title = "bench"};
      pp_heatmap_write(m, p, &mi);
      break;
    }
    default:
      break;
  }
  fclose(m);
  if (f == F_OTLP) {
    /* the exported request as sent: protobuf, then gzip -6 */
    static const uint8_t seed[16] = {1};
    struct pp_otlp_info oi = {.start = 1,
                              .end = 61,
                              .frequency = 11,
                              .hostname = "h",
                              .service = "bench",
                              .version = "1",
                              .profile_id_seed = seed};
    uint8_t *raw = NULL;
    size_t rl = 0;
    unsigned char *gz = NULL;
    size_t gl = 0;
    if (pp_otlp_encode(p, &oi, &raw, &rl) == 0) pp_gzip(raw, rl, 6, &gz, &gl);
    free(raw);
    free(gz);
    len = gl;
  }
  if (f == F_STUDIO) {
    unsigned char *gz = NULL;
    size_t gl = 0;
    pp_studio_body(buf, len, 1, 61, 10.0, 20.0, 1, "", &gz, &gl);
    free(gz);
    len = gl;
  }
  free(buf);
  return len;
}

int main(int argc, char **argv) {
  int nstacks = 50000, runs = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--stacks")) nstacks = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "--runs")) runs = atoi(argv[i + 1]);
  }
  static const unsigned kinds[] = {PP_FRAME_NATIVE,   PP_FRAME_KERNEL, PP_FRAME_PYTHON,
                                   PP_FRAME_JAVA_JIT, PP_FRAME_RUBY,   PP_FRAME_JS};
  struct pp_profile *p = pp_profile_new();
  enum { NFRAMES = 20000, NPIDS = 300 };
  uint32_t *frames = malloc(NFRAMES * sizeof(*frames));
  char name[128], file[64];
  for (int i = 0; i < NFRAMES; i++) {
    unsigned k = kinds[rnd(6)];
    snprintf(name, sizeof(name), "module%d.Class%d.function_%d", i % 97, i % 331, i);
    snprintf(file, sizeof(file), "/srv/app/pkg%d/file%d.py", i % 53, i % 977);
    frames[i] = pp_profile_intern_frame(
        p, pp_profile_intern_cstr(p, name),
        k == PP_FRAME_PYTHON || k == PP_FRAME_JS ? pp_profile_intern_cstr(p, file) : PP_NO_STR,
        k == PP_FRAME_PYTHON ? (uint32_t)(i % 900 + 1) : 0, k);
  }
  for (int i = 0; i < NPIDS; i++) {
    snprintf(name, sizeof(name), "proc%d", i % 40);
    pp_profile_pid_upsert(p, 1000 + (uint32_t)i)->comm = pp_profile_intern_cstr(p, name);
  }
  uint32_t st[64];
  while ((int)pp_profile_stack_count(p) < nstacks) {
    uint32_t depth = 8 + rnd(33);
    for (uint32_t k = 0; k < depth; k++) /* shallow frames are shared more */
      st[k] = frames[rnd(k < 4 ? 200 : k < 12 ? 4000 : NFRAMES)];
    pp_profile_add_stack(p, 1000 + rnd(NPIDS), PP_NO_STR, st, depth, 1 + rnd(100));
  }
  printf("profile: %zu stacks, %zu frames, %zu processes, %llu samples\n",
         pp_profile_stack_count(p), pp_profile_frame_count(p), pp_profile_pid_count(p),
         (unsigned long long)pp_profile_total(p));
  double med[F_N];
  size_t size[F_N];
  double *t = malloc((size_t)runs * sizeof(*t));
  for (int f = 0; f < F_N; f++) {
    for (int r = 0; r < runs; r++) {
      double t0 = now();
      size[f] = encode((enum fmt)f, p);
      t[r] = now() - t0;
    }
    qsort(t, (size_t)runs, sizeof(*t), cmpd);
    med[f] = t[runs / 2];
    printf("encode %-20s %8.1f ms CPU  %10zu bytes  (%.2fx the .col time)\n", names[f],
           med[f] * 1000, size[f], med[f] / med[F_COL]);
  }
  free(t);
  free(frames);
  pp_profile_free(p);
  return 0;
}
