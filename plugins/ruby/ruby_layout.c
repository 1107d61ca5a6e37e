/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Ruby VM layouts per minor series, from rbspy's bindgen bindings of each
 * release's vm_core.h.
 * Kept as data: the walker never branches on a version number, only on the
 * fields of the row it was given.
 */
#include "ruby_layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fields shared by every row: ec.vm_stack/vm_stack_size/cfp at 0/8/16,
 * cfp.pc/iseq/ep at 0/16/32, iseq.body at 16, body.iseq_size/iseq_encoded
 * at 4/8, body.location.pathobj/label at 64/80, me.def at 16,
 * def.original_id at 32. They live in ruby_walk.c as constants.
 *
 * Each series below is the one before it plus what changed in that release
 * (per those bindings), so a reader sees the deltas and adding a version is one
 * more line of them. A later designator in an initializer overrides an
 * earlier one (C11 6.7.9p19); that is the mechanism, hence the pragmas.
 * tests/unit/test_ruby_offsets.c pins every resulting number. */

/* 2.5: rb_execution_context_t split out of rb_thread_t; positions table;
 * no tid of Ruby's own before 3.1: thread_id (the pthread_t) leads to it */
#define RUBY_2_5                                                                                  \
  .series = "2.5", .major = 2, .minor = 5, .min_patch = -1, .max_patch = -1, .ec_thread_ptr = 72, \
  .cfp_size = 48, .first_lineno = 88, .first_lineno_value = 1, .line_kind = RUBY_LINES_POSITIONS, \
  .ii_body = 112, .ii_positions = -1, .ii_size = 200, .ii_succ = -1, .ii_entry_size = 12,         \
  .ii_entry_line = 4, .vm_main_thread = 280, .vm_living_threads = 320, .vm_main_ractor = -1,      \
  .vm_ractor_main_thread = -1, .ractor_threads_set = -1, .ractor_running_ec = -1,                 \
  .ractor_main = -1, .thread_ec = 32, .thread_tid = -1, .thread_nt = -1, .thread_pthread = 72,    \
  .string_kind = RUBY_STR_FLAGS_LEN, .last_op_id = 166

/* 2.6: cfp gains bp; succinct line table of {line_no, events}; the
 * living_threads offset is not in rbspy's bindings (GVL holder only) */
#define RUBY_2_6                                                                                   \
  RUBY_2_5, .series = "2.6", .minor = 6, .ec_thread_ptr = 56, .cfp_size = 56,                      \
            .line_kind = RUBY_LINES_SUCCINCT, .ii_body = 120, .ii_positions = 128, .ii_size = 136, \
            .ii_succ = 144, .ii_entry_size = 8, .ii_entry_line = 0, .vm_main_thread = 192,         \
            .vm_living_threads = -1, .last_op_id = 164

#define RUBY_2_7 RUBY_2_6, .series = "2.7", .minor = 7, .vm_living_threads = 312, .last_op_id = 168

/* 3.0: ractors; the running EC and the thread list hang off the main ractor */
#define RUBY_3_0                                                                        \
  RUBY_2_7, .series = "3.0", .major = 3, .minor = 0, .vm_main_thread = -1,              \
            .vm_living_threads = -1, .vm_main_ractor = 32, .vm_ractor_main_thread = 40, \
            .ractor_threads_set = 304, .ractor_running_ec = 520, .ractor_main = 528,    \
            .thread_ec = 40, .thread_pthread = 80

/* 3.1 (checked live on Debian 3.1.2, including thread.tid at 88): cfp gains
 * jit_return, line entries gain node_id */
#define RUBY_3_1                                                                                   \
  RUBY_3_0, .series = "3.1", .minor = 1, .ec_thread_ptr = 48, .cfp_size = 64, .ii_entry_size = 12, \
            .thread_tid = 88, .last_op_id = 169

/* 3.2: first_lineno an int, insns_info moves up 8, RString.len field; the tid
 * sits in rb_native_thread after the pthread id (from the struct order, not
 * from bindings; checked at attach time against the main thread) */
#define RUBY_3_2                                                                  \
  RUBY_3_1, .series = "3.2", .minor = 2, .first_lineno_value = 0, .ii_body = 112, \
            .ii_positions = 120, .ii_size = 128, .ii_succ = 136, .thread_ec = 48, \
            .thread_tid = 16, .thread_nt = 40, .thread_pthread = -1,              \
            .string_kind = RUBY_STR_LEN_FIELD

/* 3.3: cfp loses bp; the threads fields of rb_ractor_t move */
#define RUBY_3_3                                                                    \
  RUBY_3_2, .series = "3.3", .minor = 3, .cfp_size = 56, .ractor_threads_set = 256, \
            .ractor_running_ec = 384, .ractor_main = 392, .thread_tid = 24

#define RUBY_3_4 RUBY_3_3, .series = "3.4", .minor = 4, .last_op_id = 170

/* 4.0.0-4.0.5: threads.set and the tid are not in rbspy's bindings: only the
 * running thread is sampled */
#define RUBY_4_0                                                                     \
  RUBY_3_4, .series = "4.0", .major = 4, .minor = 0, .min_patch = 0, .max_patch = 5, \
            .ractor_threads_set = -1, .ractor_running_ec = 312, .ractor_main = 320,  \
            .thread_tid = -1, .thread_nt = -1

/* 4.0.6 moved threads.running_ec by 8 */
#define RUBY_4_0_6 \
  RUBY_4_0, .min_patch = 6, .max_patch = 99, .ractor_running_ec = 320, .ractor_main = 328

#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Winitializer-overrides"
#elif defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
#endif
static const struct ruby_layout layouts[] = {
    {RUBY_2_5}, {RUBY_2_6}, {RUBY_2_7}, {RUBY_3_0}, {RUBY_3_1},
    {RUBY_3_2}, {RUBY_3_3}, {RUBY_3_4}, {RUBY_4_0}, {RUBY_4_0_6},
};
#if defined(__clang__)
#pragma clang diagnostic pop
#elif defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

int ruby_parse_version(const char *s, int *major, int *minor, int *patch) {
  int a = -1, b = -1, c = 0;
  char tail = 0;
  int n = sscanf(s, "%d.%d.%d%c", &a, &b, &c, &tail);
  if (n < 2 || a < 1 || a > 99 || b < 0 || b > 99 || c < 0 || c > 999) return -1;
  *major = a;
  *minor = b;
  *patch = n >= 3 ? c : 0;
  return 0;
}

const struct ruby_layout *ruby_layout_for(const char *version, int *patch_ok) {
  int ma, mi, pa;
  if (patch_ok) *patch_ok = 0;
  if (ruby_parse_version(version, &ma, &mi, &pa) < 0) return NULL;
  for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++) {
    const struct ruby_layout *l = &layouts[i];
    if (l->major != ma || l->minor != mi) continue;
    if (l->min_patch >= 0 && (pa < l->min_patch || pa > l->max_patch)) continue;
    if (patch_ok) *patch_ok = 1;
    return l;
  }
  return NULL;
}

const char *ruby_layout_supported(void) {
  return "2.5, 2.6, 2.7, 3.0, 3.1, 3.2, 3.3, 3.4, 4.0";
}
