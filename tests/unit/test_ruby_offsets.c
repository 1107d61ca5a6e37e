/* SPDX-License-Identifier: Apache-2.0 */
/* Pins every field of every Ruby layout row to the values of rbspy's
 * bindgen bindings of each release (the 3.1 row checked live on Debian
 * 3.1.2). Written out
 * here independently of ruby_layout.c, so a change to how that table is
 * written (rows, deltas, macros) cannot silently change a number: one
 * version per line, every field spelled out. The tids of 3.1+ follow the
 * struct order (rb_thread_t.tid, rb_native_thread.tid after thread_id) and
 * are checked at attach time against the main thread; thread_id (pthread_t)
 * is the bindings' "thread id" row. */
#include <string.h>

#include "../../plugins/ruby/ruby_layout.c"
#include "testlib.h"

struct pinned {
  const char *version, *series;
  int major, minor, min_patch, max_patch;
  int ec_thread_ptr, cfp_size, first_lineno, first_lineno_value, line_kind;
  int ii_body, ii_positions, ii_size, ii_succ, ii_entry_size, ii_entry_line;
  int vm_main_thread, vm_living_threads, vm_main_ractor, vm_ractor_main_thread;
  int ractor_threads_set, ractor_running_ec, ractor_main;
  int thread_ec, thread_tid, thread_nt, thread_pthread;
  int string_kind, last_op_id;
};

/* clang-format off */
static const struct pinned pins[] = {
  /* version   series maj min patches  | ec.thread_ptr cfp first_lineno VALUE? lines | insns_info body pos size succ entry line | vm.main_thread living main_ractor main_thread | ractor set running_ec main | thread ec tid nt pthread_t | string last_op_id */
  {"2.5.9",  "2.5", 2, 5, -1, -1, 72, 48, 88, 1, RUBY_LINES_POSITIONS, 112, -1, 200, -1, 12, 4, 280, 320, -1, -1, -1, -1, -1, 32, -1, -1, 72, RUBY_STR_FLAGS_LEN, 166},
  {"2.6.10", "2.6", 2, 6, -1, -1, 56, 56, 88, 1, RUBY_LINES_SUCCINCT, 120, 128, 136, 144, 8, 0, 192, -1, -1, -1, -1, -1, -1, 32, -1, -1, 72, RUBY_STR_FLAGS_LEN, 164},
  {"2.7.8",  "2.7", 2, 7, -1, -1, 56, 56, 88, 1, RUBY_LINES_SUCCINCT, 120, 128, 136, 144, 8, 0, 192, 312, -1, -1, -1, -1, -1, 32, -1, -1, 72, RUBY_STR_FLAGS_LEN, 168},
  {"3.0.7",  "3.0", 3, 0, -1, -1, 56, 56, 88, 1, RUBY_LINES_SUCCINCT, 120, 128, 136, 144, 8, 0, -1, -1, 32, 40, 304, 520, 528, 40, -1, -1, 80, RUBY_STR_FLAGS_LEN, 168},
  {"3.1.2",  "3.1", 3, 1, -1, -1, 48, 64, 88, 1, RUBY_LINES_SUCCINCT, 120, 128, 136, 144, 12, 0, -1, -1, 32, 40, 304, 520, 528, 40, 88, -1, 80, RUBY_STR_FLAGS_LEN, 169},
  {"3.2.4",  "3.2", 3, 2, -1, -1, 48, 64, 88, 0, RUBY_LINES_SUCCINCT, 112, 120, 128, 136, 12, 0, -1, -1, 32, 40, 304, 520, 528, 48, 16, 40, -1, RUBY_STR_LEN_FIELD, 169},
  {"3.3.6",  "3.3", 3, 3, -1, -1, 48, 56, 88, 0, RUBY_LINES_SUCCINCT, 112, 120, 128, 136, 12, 0, -1, -1, 32, 40, 256, 384, 392, 48, 24, 40, -1, RUBY_STR_LEN_FIELD, 169},
  {"3.4.1",  "3.4", 3, 4, -1, -1, 48, 56, 88, 0, RUBY_LINES_SUCCINCT, 112, 120, 128, 136, 12, 0, -1, -1, 32, 40, 256, 384, 392, 48, 24, 40, -1, RUBY_STR_LEN_FIELD, 170},
  {"4.0.5",  "4.0", 4, 0,  0,  5, 48, 56, 88, 0, RUBY_LINES_SUCCINCT, 112, 120, 128, 136, 12, 0, -1, -1, 32, 40, -1, 312, 320, 48, -1, -1, -1, RUBY_STR_LEN_FIELD, 170},
  {"4.0.6",  "4.0", 4, 0,  6, 99, 48, 56, 88, 0, RUBY_LINES_SUCCINCT, 112, 120, 128, 136, 12, 0, -1, -1, 32, 40, -1, 320, 328, 48, -1, -1, -1, RUBY_STR_LEN_FIELD, 170},
};
/* clang-format on */

#define PIN(field) CHECK_EQ_INT(L->field, p->field)

static void check_row(const struct pinned *p) {
  const struct ruby_layout *L = ruby_layout_for(p->version, NULL);
  CHECK(L != NULL);
  if (!L) return;
  int before = pp_test_failures;
  CHECK_EQ_STR(L->series, p->series);
  PIN(major);
  PIN(minor);
  PIN(min_patch);
  PIN(max_patch);
  PIN(ec_thread_ptr);
  PIN(cfp_size);
  PIN(first_lineno);
  PIN(first_lineno_value);
  PIN(line_kind);
  PIN(ii_body);
  PIN(ii_positions);
  PIN(ii_size);
  PIN(ii_succ);
  PIN(ii_entry_size);
  PIN(ii_entry_line);
  PIN(vm_main_thread);
  PIN(vm_living_threads);
  PIN(vm_main_ractor);
  PIN(vm_ractor_main_thread);
  PIN(ractor_threads_set);
  PIN(ractor_running_ec);
  PIN(ractor_main);
  PIN(thread_ec);
  PIN(thread_tid);
  PIN(thread_nt);
  PIN(thread_pthread);
  PIN(string_kind);
  PIN(last_op_id);
  if (pp_test_failures != before) fprintf(stderr, "  (in the row of Ruby %s)\n", p->version);
}

int main(void) {
  for (size_t i = 0; i < sizeof(pins) / sizeof(pins[0]); i++)
    check_row(&pins[i]);
  /* every patch of a series resolves to the same row, except 4.0's split */
  CHECK(ruby_layout_for("3.1.0", NULL) == ruby_layout_for("3.1.7", NULL));
  CHECK(ruby_layout_for("4.0.0", NULL) == ruby_layout_for("4.0.5", NULL));
  CHECK(ruby_layout_for("4.0.5", NULL) != ruby_layout_for("4.0.6", NULL));
  /* the struct has exactly the fields pinned above: a field added to
   * ruby_layout without a pin here changes its size and fails this */
  CHECK_EQ_INT(sizeof(struct ruby_layout), 72);
  return pp_test_finish("test_ruby_offsets");
}
