/* SPDX-License-Identifier: Apache-2.0 */
/* Profile codec: round trip, and no crash on any truncation or corruption. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "profile_codec.h"
#include "testlib.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 11);
}

static void fill(struct pp_profile *p) {
  struct pp_frame fr[3] = {{"leaf", "a.py", 3, PP_FRAME_PYTHON},
                           {NULL, NULL, 0, PP_FRAME_NATIVE},
                           {"do_syscall_64", NULL, 0, PP_FRAME_KERNEL}};
  struct pp_sample s = {.pid = 100, .tid = 101, .frames = fr, .nframes = 3, .count = 5};
  CHECK_EQ_INT(pp_profile_add_sample(p, &s), 0);
  s.comm = "worker-thread";
  s.count = 2;
  CHECK_EQ_INT(pp_profile_add_sample(p, &s), 0);
  s.pid = 200;
  s.nframes = 1;
  s.comm = NULL;
  CHECK_EQ_INT(pp_profile_add_sample(p, &s), 0);
  s.nframes = 0; /* a stack of just the comm frame */
  s.pid = 300;
  CHECK_EQ_INT(pp_profile_add_sample(p, &s), 0);
  struct pp_pid_rec *r = pp_profile_pid_upsert(p, 200);
  r->appid = pp_profile_intern_cstr(p, "appid: x.jar");
  r->app_meta = pp_profile_intern_cstr(p, "{\"a\":1}");
  r->container = pp_profile_intern_cstr(p, "");
  r->start_time = 123456789;
  r->app_meta_index = 2;
  r = pp_profile_pid_upsert(p, 400); /* a pid without stacks */
  r->status = PP_PID_SKIPPED;
  r->reason = pp_profile_intern_cstr(p, "not a Python process");
  r->comm = pp_profile_intern_cstr(p, "bash");
  CHECK_EQ_INT(pp_profile_add_counter(p, "lost_samples", 17), 0);
  CHECK_EQ_INT(pp_profile_add_counter(p, "failed_reads", 1ull << 40), 0);
}

static int same_str(const struct pp_profile *a, uint32_t ia, const struct pp_profile *b,
                    uint32_t ib) {
  if ((ia == PP_NO_STR) != (ib == PP_NO_STR)) return 0;
  return ia == PP_NO_STR || strcmp(pp_profile_str(a, ia), pp_profile_str(b, ib)) == 0;
}

static int same_frame(const struct pp_profile *a, uint32_t fa, const struct pp_profile *b,
                      uint32_t fb) {
  const struct pp_frame_rec *x = pp_profile_frame(a, fa), *y = pp_profile_frame(b, fb);
  return x && y && same_str(a, x->name, b, y->name) && same_str(a, x->file, b, y->file) &&
         x->line == y->line && x->kind == y->kind;
}

/* Compare by content, in insertion order (which the codec preserves). */
static int profiles_equal(const struct pp_profile *a, const struct pp_profile *b) {
  if (pp_profile_stack_count(a) != pp_profile_stack_count(b)) return 0;
  if (pp_profile_pid_count(a) != pp_profile_pid_count(b)) return 0;
  if (pp_profile_counter_count(a) != pp_profile_counter_count(b)) return 0;
  if (pp_profile_total(a) != pp_profile_total(b)) return 0;
  for (size_t i = 0; i < pp_profile_stack_count(a); i++) {
    const struct pp_stack_rec *x = pp_profile_stack(a, i), *y = pp_profile_stack(b, i);
    if (x->pid != y->pid || x->count != y->count || x->nframes != y->nframes) return 0;
    if (!same_str(a, x->comm, b, y->comm)) return 0;
    const uint32_t *fx = pp_profile_stack_frames(a, x), *fy = pp_profile_stack_frames(b, y);
    for (uint32_t j = 0; j < x->nframes; j++)
      if (!same_frame(a, fx[j], b, fy[j])) return 0;
  }
  for (size_t i = 0; i < pp_profile_pid_count(a); i++) {
    const struct pp_pid_rec *x = pp_profile_pid_at(a, i), *y = pp_profile_pid_at(b, i);
    if (x->pid != y->pid || x->status != y->status || x->start_time != y->start_time ||
        x->total != y->total || x->app_meta_index != y->app_meta_index)
      return 0;
    if (!same_str(a, x->comm, b, y->comm) || !same_str(a, x->appid, b, y->appid) ||
        !same_str(a, x->app_meta, b, y->app_meta) || !same_str(a, x->container, b, y->container) ||
        !same_str(a, x->reason, b, y->reason))
      return 0;
  }
  for (size_t i = 0; i < pp_profile_counter_count(a); i++) {
    const struct pp_counter_rec *x = pp_profile_counter_at(a, i), *y = pp_profile_counter_at(b, i);
    if (x->value != y->value || !same_str(a, x->name, b, y->name)) return 0;
  }
  return 1;
}

static void test_round_trip(void) {
  struct pp_profile *p = pp_profile_new(), *q = pp_profile_new();
  fill(p);
  struct pp_wbuf b;
  pp_wbuf_init(&b);
  CHECK_EQ_INT(pp_profile_encode(p, &b), 0);
  /* decode into a profile holding junk: it must be cleared first */
  pp_profile_intern_cstr(q, "junk");
  CHECK_EQ_INT(pp_profile_decode(q, b.data, b.len), 0);
  CHECK(profiles_equal(p, q));
  CHECK_EQ_INT(pp_profile_stack_count(q), 4);
  CHECK_EQ_INT(pp_profile_total(q), 5 + 2 + 2 + 2);
  const struct pp_pid_rec *r = pp_profile_pid(q, 200);
  CHECK(r != NULL);
  if (r) CHECK_EQ_STR(pp_profile_str(q, r->appid), "appid: x.jar");
  r = pp_profile_pid(q, 400);
  CHECK(r && r->status == PP_PID_SKIPPED);

  /* Re-encoding the decoded profile gives the same bytes. */
  struct pp_wbuf b2;
  pp_wbuf_init(&b2);
  CHECK_EQ_INT(pp_profile_encode(q, &b2), 0);
  CHECK(b.len == b2.len && memcmp(b.data, b2.data, b.len) == 0);

  /* An empty profile round-trips too. */
  pp_profile_clear(p);
  pp_wbuf_reset(&b);
  CHECK_EQ_INT(pp_profile_encode(p, &b), 0);
  CHECK_EQ_INT(pp_profile_decode(q, b.data, b.len), 0);
  CHECK_EQ_INT(pp_profile_stack_count(q), 0);
  CHECK_EQ_INT(pp_profile_str_count(q), 0);

  /* Over the buffer's limit: -E2BIG, nothing half-written is claimed. */
  fill(p);
  pp_wbuf_reset(&b);
  b.limit = 64;
  CHECK_EQ_INT(pp_profile_encode(p, &b), -E2BIG);
  pp_wbuf_free(&b);
  pp_wbuf_free(&b2);
  pp_profile_free(p);
  pp_profile_free(q);
}

static void test_deep_stack(void) {
  struct pp_profile *p = pp_profile_new(), *q = pp_profile_new();
  static struct pp_frame fr[PP_MAX_FRAMES];
  static char names[PP_MAX_FRAMES][16];
  for (int i = 0; i < PP_MAX_FRAMES; i++) {
    snprintf(names[i], sizeof(names[i]), "f%d", i);
    fr[i] = (struct pp_frame){names[i], NULL, (uint32_t)i, PP_FRAME_NATIVE};
  }
  struct pp_sample s = {.pid = 7, .frames = fr, .nframes = PP_MAX_FRAMES, .count = 1};
  CHECK_EQ_INT(pp_profile_add_sample(p, &s), 0);
  struct pp_wbuf b;
  pp_wbuf_init(&b);
  CHECK_EQ_INT(pp_profile_encode(p, &b), 0);
  CHECK_EQ_INT(pp_profile_decode(q, b.data, b.len), 0);
  CHECK(profiles_equal(p, q));
  /* nframes one over the cap is refused */
  size_t nframes_off = b.len - 4 /* ncounters */ - 4ull * PP_MAX_FRAMES - 8 - 4;
  uint32_t n;
  memcpy(&n, b.data + nframes_off, 4);
  CHECK_EQ_INT(n, PP_MAX_FRAMES);
  n = PP_MAX_FRAMES + 1;
  memcpy(b.data + nframes_off, &n, 4);
  CHECK_EQ_INT(pp_profile_decode(q, b.data, b.len), -EINVAL);
  pp_wbuf_free(&b);
  pp_profile_free(p);
  pp_profile_free(q);
}

static void test_hostile(void) {
  struct pp_profile *p = pp_profile_new(), *q = pp_profile_new();
  fill(p);
  struct pp_wbuf b;
  pp_wbuf_init(&b);
  CHECK_EQ_INT(pp_profile_encode(p, &b), 0);

  /* Every truncation fails cleanly. */
  int bad = 0;
  for (size_t len = 0; len < b.len; len++)
    if (pp_profile_decode(q, b.data, len) != -EINVAL) bad++;
  CHECK_EQ_INT(bad, 0);
  /* Trailing garbage is refused too. */
  uint8_t *longer = malloc(b.len + 1);
  memcpy(longer, b.data, b.len);
  longer[b.len] = 0;
  CHECK_EQ_INT(pp_profile_decode(q, longer, b.len + 1), -EINVAL);
  free(longer);

  /* Random bit flips and byte smashes: decode or fail, never crash (run
   * under ASan to make this meaningful). Decoded results stay consistent. */
  uint8_t *copy = malloc(b.len);
  int ok = 0, failed = 0, weird = 0;
  for (int iter = 0; iter < 5000; iter++) {
    memcpy(copy, b.data, b.len);
    int flips = 1 + (int)(rnd() % 3);
    for (int f = 0; f < flips; f++) {
      size_t at = rnd() % b.len;
      if (iter % 4 == 3)
        copy[at] = (uint8_t)rnd();
      else
        copy[at] ^= (uint8_t)(1u << (rnd() % 8));
    }
    int rc = pp_profile_decode(q, copy, b.len);
    if (rc == 0) {
      ok++;
      for (size_t i = 0; i < pp_profile_stack_count(q); i++) {
        const struct pp_stack_rec *s = pp_profile_stack(q, i);
        const uint32_t *ids = pp_profile_stack_frames(q, s);
        for (uint32_t j = 0; j < s->nframes; j++)
          if (!pp_profile_frame(q, ids[j])) weird++;
      }
    } else if (rc == -EINVAL) {
      failed++;
    } else {
      weird++;
    }
  }
  CHECK_EQ_INT(weird, 0);
  CHECK(failed > 0);
  printf("bit flips: %d decoded, %d refused\n", ok, failed);
  free(copy);

  /* Huge counts are refused before anything is allocated for them. */
  uint8_t evil[16];
  uint32_t v[4] = {PP_CODEC_MAGIC, PP_CODEC_VERSION, 0xfffffff0u, 0};
  memcpy(evil, v, sizeof(evil));
  CHECK_EQ_INT(pp_profile_decode(q, evil, sizeof(evil)), -EINVAL);
  CHECK_EQ_INT(pp_profile_decode(q, NULL, 0), -EINVAL);
  pp_wbuf_free(&b);
  pp_profile_free(p);
  pp_profile_free(q);
}

static double secs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A busy host's snapshot: the codec should not be what a session waits on. */
static void test_speed(void) {
  struct pp_profile *p = pp_profile_new(), *q = pp_profile_new();
  char names[64][24];
  for (int i = 0; i < 64; i++)
    snprintf(names[i], sizeof(names[i]), "function_%d", i);
  struct pp_frame fr[32];
  for (uint32_t i = 0; i < 100000; i++) {
    uint32_t x = rnd();
    for (int j = 0; j < 32; j++)
      fr[j] = (struct pp_frame){names[(x >> (j % 16)) % 64], "file.c", (uint32_t)j, 0};
    struct pp_sample s = {.pid = 1000 + i % 500, .frames = fr, .nframes = 8 + i % 24, .count = 1};
    pp_profile_add_sample(p, &s);
  }
  struct pp_wbuf b;
  pp_wbuf_init(&b);
  double t0 = secs();
  CHECK_EQ_INT(pp_profile_encode(p, &b), 0);
  double t1 = secs();
  CHECK_EQ_INT(pp_profile_decode(q, b.data, b.len), 0);
  double t2 = secs();
  CHECK(profiles_equal(p, q));
  printf("%zu stacks, %zu bytes: encode %.1f ms, decode %.1f ms\n", pp_profile_stack_count(p),
         b.len, (t1 - t0) * 1e3, (t2 - t1) * 1e3);
  pp_wbuf_free(&b);
  pp_profile_free(p);
  pp_profile_free(q);
}

int main(void) {
  test_round_trip();
  test_deep_stack();
  test_hostile();
  test_speed();
  return pp_test_finish("test_profile_codec");
}
