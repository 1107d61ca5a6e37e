/* SPDX-License-Identifier: Apache-2.0 */
/* pp_profile: interning, aggregation, pid records, clear/reuse. */
#include <errno.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "output/col.h"
#include "polyprof/kit/proc.h"
#include "profile.h"
#include "testlib.h"

static void test_intern_and_aggregate(void) {
  struct pp_profile *p = pp_profile_new();
  struct pp_frame leaf_first[] = {
      {"leaf", "/a.py", 3, PP_FRAME_PYTHON},
      {"mid", "/a.py", 2, PP_FRAME_PYTHON},
      {"main", NULL, 0, PP_FRAME_NATIVE},
  };
  struct pp_sample s = {.pid = 42, .tid = 42, .frames = leaf_first, .nframes = 3, .count = 2};
  CHECK_EQ_INT(pp_profile_add_sample(p, &s), 0);
  CHECK_EQ_INT(pp_profile_add_sample(p, &s), 0);
  CHECK_EQ_INT(pp_profile_stack_count(p), 1);
  CHECK_EQ_INT(pp_profile_total(p), 4);
  const struct pp_stack_rec *st = pp_profile_stack(p, 0);
  CHECK_EQ_INT(st->count, 4);
  CHECK_EQ_INT(st->nframes, 3);
  const uint32_t *fr = pp_profile_stack_frames(p, st);
  char buf[256];
  pp_frame_format(p, fr[0], buf, sizeof(buf), true);
  CHECK_EQ_STR(buf, "main");
  pp_frame_format(p, fr[2], buf, sizeof(buf), true);
  CHECK_EQ_STR(buf, "leaf (/a.py:3)_[p]");
  pp_frame_format(p, fr[2], buf, sizeof(buf), false);
  CHECK_EQ_STR(buf, "leaf (/a.py:3)");
  CHECK_EQ_INT(pp_profile_pid(p, 42)->total, 4);
  CHECK(pp_profile_pid(p, 43) == NULL);

  /* same frames, other comm: a distinct stack */
  s.comm = "worker";
  CHECK_EQ_INT(pp_profile_add_sample(p, &s), 0);
  CHECK_EQ_INT(pp_profile_stack_count(p), 2);
  CHECK_EQ_INT(pp_profile_frame_count(p), 3);

  pp_profile_clear(p);
  CHECK_EQ_INT(pp_profile_stack_count(p), 0);
  CHECK_EQ_INT(pp_profile_total(p), 0);
  CHECK(pp_profile_pid(p, 42) == NULL);
  CHECK_EQ_INT(pp_profile_add_sample(p, &s), 0);
  CHECK_EQ_INT(pp_profile_stack_count(p), 1);
  pp_profile_free(p);
}

static void test_many(void) {
  /* enough distinct strings/stacks to force several rehashes */
  struct pp_profile *p = pp_profile_new();
  char name[32];
  for (int i = 0; i < 200000; i++) {
    snprintf(name, sizeof(name), "fn_%d", i % 50000);
    struct pp_frame f[2] = {{name, NULL, 0, PP_FRAME_NATIVE}, {"root", NULL, 0, PP_FRAME_NATIVE}};
    struct pp_sample s = {.pid = (uint32_t)(i % 7) + 1, .frames = f, .nframes = 2, .count = 1};
    if (pp_profile_add_sample(p, &s) != 0) {
      CHECK(0);
      break;
    }
  }
  CHECK_EQ_INT(pp_profile_total(p), 200000);
  CHECK_EQ_INT(pp_profile_frame_count(p), 50001);
  CHECK_EQ_INT(pp_profile_pid_count(p), 7);
  uint64_t sum = 0;
  for (size_t i = 0; i < pp_profile_stack_count(p); i++)
    sum += pp_profile_stack(p, i)->count;
  CHECK_EQ_INT(sum, 200000);
  for (size_t i = 0; i < pp_profile_pid_count(p); i++)
    sum -= pp_profile_pid_at(p, i)->total;
  CHECK_EQ_INT(sum, 0);
  CHECK(pp_profile_memory(p) > 0);
  pp_profile_free(p);
}

static void test_formats(void) {
  struct pp_profile *p = pp_profile_new();
  struct {
    struct pp_frame f;
    const char *want;
  } cases[] = {
      {{"do_sys_open", NULL, 0, PP_FRAME_KERNEL}, "do_sys_open_[k]"},
      {{"Foo.bar(Ljava/lang/String;)V", NULL, 0, PP_FRAME_JAVA_JIT},
       "Foo.bar(Ljava/lang/String|)V_[j]"},
      {{"block in work", "/app/x.rb", 7, PP_FRAME_RUBY}, "block in work - /app/x.rb:7_[rb]"},
      {{"Cls::run", "/var/www/a.php", 12, PP_FRAME_PHP}, "Cls::run /var/www/a.php:12_[php]"},
      {{"NS.Type.Method", NULL, 0, PP_FRAME_DOTNET}, "NS.Type.Method_[net]"},
      {{"handler", "file:///srv/a.js", 9, PP_FRAME_JS}, "handler (file:///srv/a.js:9)"},
      {{"a\nb", NULL, 0, PP_FRAME_NATIVE}, "a b"},
      {{"[Profiling error: boom]", NULL, 0, PP_FRAME_ERROR}, "[Profiling error: boom]"},
  };
  char buf[256];
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    uint32_t name = pp_profile_intern_cstr(p, cases[i].f.name);
    uint32_t file = pp_profile_intern_cstr(p, cases[i].f.file);
    uint32_t id = pp_profile_intern_frame(p, name, file, cases[i].f.line, cases[i].f.kind);
    pp_frame_format(p, id, buf, sizeof(buf), true);
    CHECK_EQ_STR(buf, cases[i].want);
  }
  /* truncation stays NUL-terminated */
  uint32_t id = pp_profile_intern_frame(p, pp_profile_intern_cstr(p, "abcdefgh"), PP_NO_STR, 0, 1);
  CHECK_EQ_INT(pp_frame_format(p, id, buf, 5, true), 4);
  CHECK_EQ_STR(buf, "abcd");
  pp_profile_free(p);
}

static void test_proc_self(void) {
  char buf[256];
  uint32_t self = (uint32_t)getpid();
  CHECK_EQ_INT(pp_proc_comm(self, buf, sizeof(buf)), 0);
  CHECK_EQ_STR(buf, "test_profile");
  uint64_t st = 0;
  CHECK_EQ_INT(pp_proc_start_time(self, &st), 0);
  CHECK(st > 0);
  CHECK(pp_proc_same_process(self, st));
  CHECK(!pp_proc_same_process(self, st + 1));
  uint32_t ns = 0;
  CHECK_EQ_INT(pp_proc_ns_pid(self, &ns), 0);
  CHECK(ns > 0);
  char state = 0;
  CHECK_EQ_INT(pp_proc_state(self, 0, &state), 0);
  CHECK_EQ_INT(state, 'R');
  /* start time and state in one read, as the ruby plugin's exit check uses
   * them: the same answers as the two calls above, and a zombie is seen */
  uint64_t st2 = 0;
  state = 0;
  CHECK_EQ_INT(pp_proc_start_state(self, &st2, &state), 0);
  CHECK(st2 == st);
  CHECK_EQ_INT(state, 'R');
  pid_t child = fork();
  if (child == 0) _exit(0);
  CHECK(child > 0);
  for (int i = 0; i < 500 && state != 'Z'; i++) {
    usleep(2000);
    CHECK_EQ_INT(pp_proc_start_state((uint32_t)child, &st2, &state), 0);
  }
  CHECK_EQ_INT(state, 'Z');
  CHECK(st2 >= st);
  waitpid(child, NULL, 0);
  CHECK(pp_proc_start_state((uint32_t)child, &st2, &state) < 0);
  uint64_t rss = 0;
  CHECK_EQ_INT(pp_proc_rss_kb(self, &rss), 0);
  CHECK(rss > 100);
  CHECK_EQ_INT(pp_proc_comm(0x7ffffff0u, buf, sizeof(buf)), -ESRCH);
}

int main(void) {
  test_intern_and_aggregate();
  test_many();
  test_formats();
  test_proc_self();
  return pp_test_finish("test_profile");
}
