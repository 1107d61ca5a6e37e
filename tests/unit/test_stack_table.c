/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kit's stack table: aggregation by (pid, tid, comm, frames), strings
 * copied at add time, every limit turning into counted drops, truncation
 * keeping the leaf side, and memory that stops growing once warm.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kit_fake_host.h"
#include "polyprof/kit/stack_table.h"
#include "testlib.h"

static void test_aggregate(void) {
  struct pp_stack_table *t = pp_stack_table_new(NULL);
  char leaf[32] = "leaf", file[32] = "a.py";
  struct pp_frame f[3] = {{leaf, file, 3, PP_FRAME_PYTHON},
                          {"mid", "a.py", 2, PP_FRAME_PYTHON},
                          {"main", NULL, 0, PP_FRAME_NATIVE}};
  CHECK_EQ_INT(pp_stack_table_add(t, 10, 11, "worker", f, 3, 1), 0);
  CHECK_EQ_INT(pp_stack_table_add(t, 10, 11, "worker", f, 3, 2), 0);
  CHECK_EQ_INT(pp_stack_table_add(t, 10, 12, "worker", f, 3, 1), 0); /* other thread */
  CHECK_EQ_INT(pp_stack_table_add(t, 10, 11, NULL, f, 3, 1), 0);     /* process comm */
  f[0].line = 4;
  CHECK_EQ_INT(pp_stack_table_add(t, 10, 11, "worker", f, 3, 1), 0); /* other line */
  /* the caller's buffers are reused at once: the table has its copy */
  strcpy(leaf, "XXXX");
  strcpy(file, "YYYY");
  CHECK_EQ_INT(pp_stack_table_count(t), 4);
  CHECK_EQ_INT(pp_stack_table_samples(t), 6);
  fake_reset();
  CHECK_EQ_INT(pp_stack_table_emit(t, &fake_host, NULL), 4);
  CHECK_EQ_INT(fake.nsamples, 4);
  CHECK_EQ_STR(fake.leaf[0], "leaf|a.py|3|2");
  CHECK_EQ_STR(fake.root[0], "main|-|0|0");
  CHECK_EQ_INT(fake.count[0], 3);
  CHECK_EQ_STR(fake.comm[0], "worker");
  CHECK_EQ_INT(fake.tid[1], 12);
  CHECK_EQ_STR(fake.comm[2], "(null)");
  CHECK_EQ_STR(fake.leaf[3], "leaf|a.py|4|2");
  CHECK_EQ_STR(fake.counters, "");
  /* emptied */
  fake_reset();
  CHECK_EQ_INT(pp_stack_table_emit(t, &fake_host, NULL), 0);
  CHECK_EQ_INT(pp_stack_table_samples(t), 0);
  pp_stack_table_free(t);
}

static void test_limits(void) {
  struct pp_stack_table_limits lim = {.max_stacks = 4, .max_depth = 2};
  struct pp_stack_table *t = pp_stack_table_new(&lim);
  char name[16];
  for (int i = 0; i < 6; i++) {
    snprintf(name, sizeof(name), "f%d", i);
    struct pp_frame f[3] = {{name, NULL, 0, 0}, {"b", NULL, 0, 0}, {"root", NULL, 0, 0}};
    int rc = pp_stack_table_add(t, 1, 1, NULL, f, 3, 1);
    CHECK_EQ_INT(rc, i < 4 ? 0 : -ENOSPC);
  }
  CHECK_EQ_INT(pp_stack_table_dropped(t), 2);
  fake_reset();
  pp_stack_table_emit(t, &fake_host, NULL);
  CHECK_EQ_INT(fake.nsamples, 4);
  CHECK_EQ_INT(fake.nframes[0], 2); /* leaf side kept */
  CHECK_EQ_STR(fake.leaf[0], "f0|-|0|0");
  CHECK_EQ_STR(fake.root[0], "b|-|0|0");
  CHECK(strstr(fake.counters, "dropped_stacks=2") != NULL);
  CHECK(strstr(fake.counters, "truncated_stacks=6") != NULL);
  pp_stack_table_free(t);

  /* text budget */
  struct pp_stack_table_limits small = {.max_string_bytes = 64};
  t = pp_stack_table_new(&small);
  char longname[100];
  memset(longname, 'x', sizeof(longname) - 1);
  longname[99] = '\0';
  struct pp_frame big = {longname, NULL, 0, 0};
  CHECK_EQ_INT(pp_stack_table_add(t, 1, 1, NULL, &big, 1, 5), -ENOSPC);
  CHECK_EQ_INT(pp_stack_table_dropped(t), 5);
  pp_stack_table_free(t);
}

/* Sessions of the same workload: memory stops growing after the first. */
static void test_steady(void) {
  struct pp_stack_table *t = pp_stack_table_new(NULL);
  size_t after_first = 0;
  char name[32], file[32];
  for (int session = 0; session < 5; session++) {
    for (int i = 0; i < 20000; i++) {
      snprintf(name, sizeof(name), "fn%d", i % 3000);
      snprintf(file, sizeof(file), "mod%d.py", i % 50);
      struct pp_frame f[4] = {{name, file, (uint32_t)(i % 7), PP_FRAME_PYTHON},
                              {"handler", "app.py", 10, PP_FRAME_PYTHON},
                              {"serve", "app.py", 5, PP_FRAME_PYTHON},
                              {"<module>", "app.py", 1, PP_FRAME_PYTHON}};
      pp_stack_table_add(t, 100 + (uint32_t)(i % 3), 0, NULL, f, 4, 1);
    }
    CHECK_EQ_INT(pp_stack_table_dropped(t), 0);
    fake_reset();
    pp_stack_table_emit(t, &fake_host, NULL);
    if (session == 0) after_first = pp_stack_table_bytes(t);
  }
  CHECK_EQ_INT(pp_stack_table_bytes(t), after_first);
  pp_stack_table_free(t);
}

/* The same stack of two profile types is two entries, each with its type. */
static void test_typed(void) {
  struct pp_stack_table *t = pp_stack_table_new(NULL);
  struct pp_frame f[1] = {{"wait", "a.py", 3, PP_FRAME_PYTHON}};
  CHECK_EQ_INT(pp_stack_table_add(t, 10, 11, NULL, f, 1, 1), 0);
  CHECK_EQ_INT(pp_stack_table_add_typed(t, PP_PROFILE_OFFCPU, 10, 11, NULL, f, 1, 10000), 0);
  CHECK_EQ_INT(pp_stack_table_add_typed(t, PP_PROFILE_OFFCPU, 10, 11, NULL, f, 1, 10000), 0);
  CHECK_EQ_INT(pp_stack_table_count(t), 2);
  fake_reset();
  CHECK_EQ_INT(pp_stack_table_emit(t, &fake_host, NULL), 2);
  CHECK_EQ_INT(fake.type[0], PP_PROFILE_CPU);
  CHECK_EQ_INT(fake.count[0], 1);
  CHECK_EQ_INT(fake.type[1], PP_PROFILE_OFFCPU);
  CHECK_EQ_INT(fake.count[1], 20000);
  pp_stack_table_free(t);
}

int main(void) {
  test_aggregate();
  test_typed();
  test_limits();
  test_steady();
  return pp_test_finish("test_stack_table");
}
