/* SPDX-License-Identifier: Apache-2.0 */
/* Pins every field of every PHP layout row (plugins/php/php_layout.c) to
 * phpspy's gdb-generated struct headers (one per php-src tag; the 8.2 row
 * also checked on a live Debian 8.2.36 process). Written out here independently of the
 * plugin's table, one version per line, so a typo in either fails.
 *
 * op_array.last / opcodes are not in those headers (phpspy never reads
 * them); their values come from each series' zend_op_array declaration and
 * are checked below against the headers' last_var and vars offsets,
 * which sit right around them in every series. */
#include <string.h>

#include "../../plugins/php/php_layout.c"
#include "testlib.h"

struct pinned {
  int major, minor;
  /* from phpspy's headers */
  int eg_current_execute_data, ed_opline, ed_func, ed_prev;
  int op_last_var, op_vars, op_filename, op_line_start, op_sizeof_copied;
  /* from the zend_op_array declarations */
  int op_last, op_opcodes;
  int tested;
};

/* clang-format off */
static const struct pinned pins[] = {
  /* M  m   EG   opline func prev | last_var vars filename line_start sizeof | last opcodes | tested */
  {7, 0, 480, 0, 24, 56,  72,  80, 120, 128, 208,  60,  64, 0},
  {7, 1, 480, 0, 24, 48,  72,  80, 120, 128, 208,  56,  64, 0},
  {7, 2, 480, 0, 24, 48,  72,  80, 120, 128, 224,  56,  64, 0},
  {7, 3, 488, 0, 24, 48,  52,  88, 128, 136, 216,  60,  64, 0},
  {7, 4, 488, 0, 24, 48,  52,  96, 136, 144, 224,  60,  64, 0},
  {8, 0, 488, 0, 24, 48,  60, 104, 144, 152, 232,  68,  72, 0},
  {8, 1, 488, 0, 24, 48,  60, 104, 144, 152, 240,  68,  72, 0},
  {8, 2, 488, 0, 24, 48,  76, 112, 152, 160, 248,  80,  88, 1},
  {8, 3, 488, 0, 24, 48,  72, 104, 144, 152, 240,  76,  80, 0},
  {8, 4, 488, 0, 24, 48,  92, 128, 168, 176, 240,  96, 104, 0},
  {8, 5, 512, 0, 24, 48,  92, 128, 168, 176, 240,  96, 104, 0},
};
/* clang-format on */

#define PIN(field) CHECK_EQ_INT(L->field, p->field)

static void check_row(const struct pinned *p) {
  const struct php_layout *L = php_layout_find(p->major, p->minor);
  CHECK(L != NULL);
  if (!L) {
    fprintf(stderr, "  (PHP %d.%d missing from the table)\n", p->major, p->minor);
    return;
  }
  int before = pp_test_failures;
  PIN(eg_current_execute_data);
  PIN(ed_opline);
  PIN(ed_func);
  PIN(ed_prev);
  PIN(op_filename);
  PIN(op_line_start);
  PIN(op_last);
  PIN(op_opcodes);
  PIN(tested);
  /* the copies cover what is read, and never more than the struct */
  CHECK(L->ed_size >= L->ed_prev + 8 && L->ed_size >= L->ed_func + 8);
  CHECK(L->ed_size <= 80); /* sizeof(zend_execute_data) in 7.x/8.x */
  CHECK(L->op_size >= L->op_line_start + 4 && L->op_size >= L->op_filename + 8);
  CHECK(L->op_size >= L->op_opcodes + 8 && L->op_size >= L->op_last + 4);
  CHECK(L->op_size <= p->op_sizeof_copied);
  CHECK(L->op_size <= 256); /* the walker's buffer per frame */
  /* last/opcodes where the declarations put them relative to the
   * headers' fields: 7.0-7.2 "last, opcodes, last_var, T, vars";
   * 7.3-8.1 "last_var, T, last, opcodes"; 8.2+ (T in the common part)
   * "last_var, last, opcodes" */
  CHECK_EQ_INT(L->op_opcodes % 8, 0);
  if (p->major == 7 && p->minor <= 2) {
    CHECK_EQ_INT(L->op_opcodes + 8, p->op_last_var);
    CHECK_EQ_INT(L->op_last, p->minor == 0 ? 60 : 56); /* 7.0: this_var before last */
  } else {
    int t_between = p->major == 7 || (p->major == 8 && p->minor <= 1);
    CHECK_EQ_INT(L->op_last, p->op_last_var + (t_between ? 8 : 4));
    CHECK_EQ_INT(L->op_opcodes, (L->op_last + 4 + 7) / 8 * 8);
  }
  CHECK(L->op_opcodes < p->op_vars && p->op_vars < L->op_filename);
  if (pp_test_failures != before)
    fprintf(stderr, "  (in the row of PHP %d.%d)\n", p->major, p->minor);
}

int main(void) {
  size_t rows = sizeof(layouts) / sizeof(layouts[0]);
  CHECK_EQ_INT(rows, sizeof(pins) / sizeof(pins[0])); /* no row without a pin */
  for (size_t i = 0; i < sizeof(pins) / sizeof(pins[0]); i++)
    check_row(&pins[i]);
  CHECK(php_layout_find(6, 0) == NULL);
  CHECK(php_layout_find(8, 6) == NULL);
  CHECK(php_layout_find(9, 0) == NULL);
  /* the struct has exactly the fields pinned above: a field added to
   * php_layout without a pin here changes its size and fails this */
  CHECK_EQ_INT(sizeof(struct php_layout), 32);
  return pp_test_finish("test_php_offsets");
}
