/* SPDX-License-Identifier: Apache-2.0 */
/* Minimal assertion helpers for the C unit tests. Each test binary prints
 * one line per failed check and exits non-zero if any failed. */
#ifndef PP_TESTLIB_H
#define PP_TESTLIB_H
#include <stdio.h>
#include <string.h>

extern int pp_test_failures;
extern int pp_test_checks;

#define CHECK(cond)                                                            \
  do {                                                                         \
    pp_test_checks++;                                                          \
    if (!(cond)) {                                                             \
      pp_test_failures++;                                                      \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                          \
  } while (0)

#define CHECK_EQ_INT(a, b)                                                                       \
  do {                                                                                           \
    long long pp_a_ = (long long)(a), pp_b_ = (long long)(b);                                    \
    pp_test_checks++;                                                                            \
    if (pp_a_ != pp_b_) {                                                                        \
      pp_test_failures++;                                                                        \
      fprintf(stderr, "%s:%d: %s == %lld, expected %s == %lld\n", __FILE__, __LINE__, #a, pp_a_, \
              #b, pp_b_);                                                                        \
    }                                                                                            \
  } while (0)

#define CHECK_EQ_STR(a, b)                                                              \
  do {                                                                                  \
    const char *pp_a_ = (a), *pp_b_ = (b);                                              \
    pp_test_checks++;                                                                   \
    if (!pp_a_ || !pp_b_ || strcmp(pp_a_, pp_b_) != 0) {                                \
      pp_test_failures++;                                                               \
      fprintf(stderr, "%s:%d: %s == \"%s\", expected \"%s\"\n", __FILE__, __LINE__, #a, \
              pp_a_ ? pp_a_ : "(null)", pp_b_ ? pp_b_ : "(null)");                      \
    }                                                                                   \
  } while (0)

#define CHECK_CONTAINS(hay, needle)                                                  \
  do {                                                                               \
    const char *pp_h_ = (hay), *pp_n_ = (needle);                                    \
    pp_test_checks++;                                                                \
    if (!pp_h_ || !strstr(pp_h_, pp_n_)) {                                           \
      pp_test_failures++;                                                            \
      fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__, \
              pp_h_ ? pp_h_ : "(null)", pp_n_);                                      \
    }                                                                                \
  } while (0)

/* Prints "N passed, M failed" and returns the exit code. */
int pp_test_finish(const char *name);

#endif
