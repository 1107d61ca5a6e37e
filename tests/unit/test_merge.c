/* SPDX-License-Identifier: Apache-2.0 */
/* gProfiler's merge rule (docs/gprofiler-compat.md), checked through the
 * .col text it produces (what a user of the output would see). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "merge.h"
#include "output/col.h"
#include "testlib.h"

/* "a;b;c" root-first, each frame native unless it ends in "_[k]". */
static void add(struct pp_profile *p, uint32_t pid, const char *comm, const char *frames,
                uint64_t count) {
  uint32_t ids[64], n = 0;
  char buf[512];
  snprintf(buf, sizeof(buf), "%s", frames);
  for (char *save = NULL, *t = strtok_r(buf, ";", &save); t; t = strtok_r(NULL, ";", &save)) {
    size_t len = strlen(t);
    uint32_t kind = PP_FRAME_NATIVE;
    if (len > 4 && strcmp(t + len - 4, "_[k]") == 0) {
      kind = PP_FRAME_KERNEL;
      len -= 4;
    }
    ids[n++] = pp_profile_intern_frame(p, pp_profile_intern(p, t, len), PP_NO_STR, 0, kind);
  }
  CHECK_EQ_INT(pp_profile_add_stack(p, pid, pp_profile_intern_cstr(p, comm), ids, n, count), 0);
}

static struct pp_pid_rec *pid_rec(struct pp_profile *p, uint32_t pid, const char *comm) {
  struct pp_pid_rec *r = pp_profile_pid_upsert(p, pid);
  if (comm) r->comm = pp_profile_intern_cstr(p, comm);
  return r;
}

static void set_status(struct pp_profile *p, uint32_t pid, const char *comm, int status,
                       const char *reason) {
  uint32_t rs = pp_profile_intern_cstr(p, reason);
  struct pp_pid_rec *r = pid_rec(p, pid, comm);
  r->status = (uint32_t)status;
  r->reason = rs;
}

/* Render as "comm;frames count" lines (app metadata and container off). */
static char *render(const struct pp_profile *p, bool container) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  struct pp_col_opts o = {.container_prefix = container, .appids = true};
  CHECK_EQ_INT(pp_col_write(f, p, NULL, &o), 0);
  fclose(f);
  return text;
}

static void check_merge(const char *what, const struct pp_profile *base,
                        const struct pp_merge_source *rt, size_t n, const char *expected) {
  struct pp_profile *out = pp_profile_new();
  CHECK_EQ_INT(pp_merge(out, base, rt, n), 0);
  char *text = render(out, false);
  if (strcmp(text, expected) != 0) fprintf(stderr, "-- %s\n", what);
  CHECK_EQ_STR(text, expected);
  free(text);
  pp_profile_free(out);
}

static void test_scaling_and_order(void) {
  struct pp_profile *perf = pp_profile_new(), *py = pp_profile_new();
  add(perf, 1, "bash", "main;read_[k]", 5);
  add(perf, 10, "python3", "_start;PyEval", 60);
  add(perf, 10, "python3", "_start;gc", 40);
  add(perf, 2, "sshd", "main;poll", 7);
  /* runtime: R = 3, P = 100 -> 33.3 / 66.7 -> 33 / 67 (largest remainder) */
  add(py, 10, "python", "main (a.py:1);f (a.py:3)", 1);
  add(py, 10, "python", "main (a.py:1);g (a.py:9)", 2);
  /* perf never saw pid 30: appended, unscaled */
  add(py, 30, "python", "main (b.py:1)", 4);
  struct pp_merge_source rt[] = {{"python", py}};
  check_merge("scaling", perf, rt, 1,
              "bash;main;read_[k] 5\n"
              "python;main (a.py:1);f (a.py:3) 33\n"
              "python;main (a.py:1);g (a.py:9) 67\n"
              "sshd;main;poll 7\n"
              "python;main (b.py:1) 4");
  /* runtime counts equal to perf's: unchanged */
  pp_profile_clear(py);
  add(py, 10, "python", "x", 100);
  check_merge("ratio 1", perf, rt, 1, "bash;main;read_[k] 5\npython;x 100\nsshd;main;poll 7");
  pp_profile_free(perf);
  pp_profile_free(py);
}

static void test_errors(void) {
  struct pp_profile *perf = pp_profile_new(), *java = pp_profile_new();
  add(perf, 7, "java", "[unknown];pthread_getname_np;do_syscall_64_[k]", 3);
  add(perf, 8, "python", "_start;__libc_start_main;Py_Main", 3);
  set_status(java, 7, "java", PP_PID_SKIPPED, "profiled-oom");
  set_status(java, 8, "python", PP_PID_ERROR, "exception CalledProcessError");
  set_status(java, 9, "java", PP_PID_ERROR, "process went down during profiling"); /* P == 0 */
  struct pp_merge_source rt[] = {{"java", java}};
  struct pp_profile *out = pp_profile_new();
  CHECK_EQ_INT(pp_merge(out, perf, rt, 1), 0);
  /* Error and skipped frames land right after the comm of perf's stacks. */
  char *text = render(out, true);
  CHECK_EQ_STR(text,
               ";java;[Profiling skipped: profiled-oom];[unknown];pthread_getname_np;"
               "do_syscall_64_[k] 3\n"
               ";python;[Profiling error: exception CalledProcessError];_start;"
               "__libc_start_main;Py_Main 3");
  free(text);
  CHECK(pp_profile_pid(out, 9) == NULL); /* error + no perf samples: dropped */
  CHECK_EQ_INT(pp_profile_pid(out, 7)->status, PP_PID_SKIPPED);
  CHECK_EQ_INT(
      pp_profile_frame(out, pp_profile_stack_frames(out, pp_profile_stack(out, 0))[0])->kind,
      PP_FRAME_ERROR);
  pp_profile_free(out);
  pp_profile_free(perf);
  pp_profile_free(java);
}

static void test_perfless(void) {
  struct pp_profile *py = pp_profile_new(), *java = pp_profile_new();
  add(py, 5, "python", "a;b", 3);
  add(py, 6, "python", "c", 2);
  set_status(py, 11, "python", PP_PID_ERROR, "exception Foo");
  add(java, 20, "java", "Main.main()V", 9);
  add(java, 5, "java", "claimed twice", 1000); /* python came first: ignored */
  set_status(java, 21, "java", PP_PID_SKIPPED, NULL);
  struct pp_merge_source rt[] = {{"python", py}, {"java", java}};
  check_merge("perf-less", NULL, rt, 2,
              "python;a;b 3\n"
              "python;c 2\n"
              "python;[Profiling error: exception Foo] 1\n"
              "java;Main.main()V 9\n"
              "java;[Profiling skipped: unknown] 1");
  pp_profile_free(py);
  pp_profile_free(java);
}

static void test_records(void) {
  struct pp_profile *perf = pp_profile_new(), *rt1 = pp_profile_new(), *out = pp_profile_new();
  /* perf stacks carry thread names; pid comm from perf's record */
  add(perf, 40, "worker-1", "start_thread;run", 10);
  add(perf, 40, "worker-2", "start_thread;run", 10);
  pid_rec(perf, 40, "java")->container = pp_profile_intern_cstr(perf, "web");
  add(perf, 41, "node", "uv_run", 4);
  pid_rec(perf, 41, NULL)->container = pp_profile_intern_cstr(perf, "api");
  /* pid 40: runtime without container, with appid; pid 41: its own container */
  add(rt1, 40, NULL, "Main.run()V", 1);
  struct pp_pid_rec *r = pid_rec(rt1, 40, "java");
  uint32_t appid = pp_profile_intern_cstr(rt1, "java: app.jar");
  r = pp_profile_pid(rt1, 40);
  r->appid = appid;
  add(rt1, 41, NULL, "main (x.js:1)", 2);
  uint32_t db = pp_profile_intern_cstr(rt1, "db");
  pid_rec(rt1, 41, "node")->container = db;
  /* a pid the runtime only knows an appid of: no samples (.NET's perf map
   * mode), perf's stacks stay, named with the runtime's appid */
  add(perf, 42, "ruby", "rb_main", 3);
  uint32_t rb = pp_profile_intern_cstr(rt1, "rails");
  pid_rec(rt1, 42, "ruby")->appid = rb;
  struct pp_merge_source rt[] = {{"rt", rt1}};
  CHECK_EQ_INT(pp_merge(out, perf, rt, 1), 0);
  char *text = render(out, true);
  CHECK_EQ_STR(text,
               "web;java;appid: java: app.jar;Main.run()V 20\n"
               "db;node;main (x.js:1) 4\n"
               ";ruby;appid: rails;rb_main 3");
  free(text);
  CHECK_EQ_STR(pp_profile_str(out, pp_profile_pid(out, 41)->container), "db");
  CHECK_EQ_STR(pp_profile_str(out, pp_profile_pid(out, 42)->appid), "rails");

  /* error annotation keeps perf's per-thread comms */
  pp_profile_clear(rt1);
  set_status(rt1, 40, "java", PP_PID_ERROR, "exception JattachTimeout");
  CHECK_EQ_INT(pp_merge(out, perf, rt, 1), 0);
  text = render(out, true);
  CHECK_EQ_STR(text,
               "web;worker-1;[Profiling error: exception JattachTimeout];start_thread;run 10\n"
               "web;worker-2;[Profiling error: exception JattachTimeout];start_thread;run 10\n"
               "api;node;uv_run 4\n"
               ";ruby;rb_main 3");
  free(text);
  /* merging into a non-empty profile starts from scratch */
  CHECK_EQ_INT(pp_merge(out, perf, NULL, 0), 0);
  CHECK_EQ_INT(pp_profile_total(out), 27);
  pp_profile_free(out);
  pp_profile_free(perf);
  pp_profile_free(rt1);
}

/* Reference largest-remainder: sort by remainder desc, index asc. */
static int by_rem(const void *a, const void *b, void *ctx) {
  const uint64_t *rem = ctx;
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  if (rem[x] != rem[y]) return rem[x] > rem[y] ? -1 : 1;
  return x < y ? -1 : x > y;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) { /* xorshift64*: deterministic across runs */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 2685821657736338717ull;
}

static void check_scale_against_reference(const uint64_t *c, size_t n, uint64_t target) {
  uint64_t total = 0, sum = 0;
  for (size_t i = 0; i < n; i++)
    total += c[i];
  uint64_t *got = malloc(n * sizeof(*got)), *want = malloc(n * sizeof(*want));
  uint64_t *rem = malloc(n * sizeof(*rem));
  size_t *ix = malloc(n * sizeof(*ix));
  memcpy(got, c, n * sizeof(*c));
  pp_scale_counts(got, n, total, target);
  uint64_t floors = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned __int128 x = (unsigned __int128)c[i] * target;
    want[i] = (uint64_t)(x / total);
    rem[i] = (uint64_t)(x % total);
    floors += want[i];
    ix[i] = i;
  }
  qsort_r(ix, n, sizeof(*ix), by_rem, rem);
  for (uint64_t k = 0; k < target - floors; k++)
    want[ix[k]]++;
  int bad = 0;
  for (size_t i = 0; i < n; i++) {
    sum += got[i];
    bad += got[i] != want[i];
  }
  CHECK_EQ_INT(bad, 0);
  CHECK(sum == target);
  free(got);
  free(want);
  free(rem);
  free(ix);
}

static void test_scale_counts(void) {
  uint64_t a[] = {1, 1, 1};
  pp_scale_counts(a, 3, 3, 2); /* three equal remainders: earlier stacks win */
  CHECK(a[0] == 1 && a[1] == 1 && a[2] == 0);
  uint64_t b[] = {5, 5};
  pp_scale_counts(b, 2, 10, 1);
  CHECK(b[0] == 1 && b[1] == 0);
  uint64_t c[] = {3, 1};
  pp_scale_counts(c, 2, 4, 1000000);
  CHECK(c[0] == 750000 && c[1] == 250000);
  for (int round = 0; round < 300; round++) {
    size_t n = 1 + rnd() % (round < 200 ? 50 : 2000);
    uint64_t c2[2000];
    for (size_t i = 0; i < n; i++)
      c2[i] = 1 + rnd() % (round % 3 ? 10 : 100000);
    check_scale_against_reference(c2, n, rnd() % (round % 2 ? 100 : 1000000));
  }
  /* counts and targets beyond 32 bits: the 128-bit path */
  uint64_t big[] = {1ull << 61, 3ull << 60, 12345, 1};
  check_scale_against_reference(big, 4, (1ull << 62) + 7);
  check_scale_against_reference(big, 4, 3);
}

/* Many random merges: every covered pid sums to perf's count exactly, and
 * the same inputs always give the same bytes. */
static void test_random_totals(void) {
  for (int round = 0; round < 40; round++) {
    struct pp_profile *perf = pp_profile_new(), *rt = pp_profile_new(), *out = pp_profile_new();
    char frames[64];
    uint32_t npids = 1 + rnd() % 20;
    for (uint32_t pid = 1; pid <= npids; pid++) {
      int ns = (int)(rnd() % 30);
      for (int s = 0; s < ns; s++) {
        snprintf(frames, sizeof(frames), "main;f%llu;g%llu", (unsigned long long)(rnd() % 7),
                 (unsigned long long)(rnd() % 5));
        add(perf, pid, "native", frames, 1 + rnd() % 50);
      }
      if (rnd() % 2) {
        int nr = 1 + (int)(rnd() % 40);
        for (int s = 0; s < nr; s++) {
          snprintf(frames, sizeof(frames), "m (x.py:1);h%llu (x.py:%llu)",
                   (unsigned long long)(rnd() % 11), (unsigned long long)(rnd() % 3));
          add(rt, pid, "python", frames, 1 + rnd() % 1000);
        }
      }
    }
    struct pp_merge_source src[] = {{"python", rt}};
    CHECK_EQ_INT(pp_merge(out, perf, src, 1), 0);
    int bad = 0;
    for (size_t i = 0; i < pp_profile_pid_count(perf); i++) {
      const struct pp_pid_rec *p = pp_profile_pid_at(perf, i);
      const struct pp_pid_rec *o = pp_profile_pid(out, p->pid);
      if (p->total && (!o || o->total != p->total)) bad++;
    }
    for (size_t i = 0; i < pp_profile_pid_count(rt); i++) {
      const struct pp_pid_rec *r = pp_profile_pid_at(rt, i);
      const struct pp_pid_rec *p = pp_profile_pid(perf, r->pid);
      const struct pp_pid_rec *o = pp_profile_pid(out, r->pid);
      if (!p || !p->total) bad += !o || o->total != r->total; /* unscaled */
    }
    /* covered pids show only runtime stacks */
    for (size_t i = 0; i < pp_profile_stack_count(out); i++) {
      const struct pp_stack_rec *s = pp_profile_stack(out, i);
      const struct pp_pid_rec *r = pp_profile_pid(rt, s->pid);
      const char *comm = pp_profile_str(out, s->comm);
      if (strcmp(comm, r && r->total ? "python" : "native") != 0) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    char *t1 = render(out, false);
    CHECK_EQ_INT(pp_merge(out, perf, src, 1), 0);
    char *t2 = render(out, false);
    CHECK_EQ_STR(t1, t2);
    free(t1);
    free(t2);
    pp_profile_free(perf);
    pp_profile_free(rt);
    pp_profile_free(out);
  }
}

int main(void) {
  test_scaling_and_order();
  test_errors();
  test_perfless();
  test_records();
  test_scale_counts();
  test_random_totals();
  return pp_test_finish("test_merge");
}
