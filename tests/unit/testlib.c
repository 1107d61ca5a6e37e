/* SPDX-License-Identifier: Apache-2.0 */
#include "testlib.h"

int pp_test_failures;
int pp_test_checks;

int pp_test_finish(const char *name) {
  printf("%s: %d checks, %d passed, %d failed\n", name, pp_test_checks,
         pp_test_checks - pp_test_failures, pp_test_failures);
  return pp_test_failures ? 1 : 0;
}
