/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kit's JSON strings (hostile text: controls, quotes, invalid UTF-8,
 * truncation at a character boundary) and option getters (the options
 * table's default when the host has no value).
 */
#include <errno.h>
#include <string.h>

#include "kit_fake_host.h"
#include "polyprof/kit/json.h"
#include "polyprof/kit/options.h"
#include "testlib.h"

static void test_json(void) {
  char out[64];
  pp_json_string(out, sizeof(out), "plain");
  CHECK_EQ_STR(out, "\"plain\"");
  pp_json_string(out, sizeof(out), "a\"b\\c\nd\te\x01");
  CHECK_EQ_STR(out, "\"a\\\"b\\\\c\\nd\\te\\u0001\"");
  pp_json_string(out, sizeof(out), "caf\xc3\xa9 \xe2\x82\xac");
  CHECK_EQ_STR(out, "\"caf\xc3\xa9 \xe2\x82\xac\"");
  /* a lone continuation byte, a cut sequence, an overlong form, a surrogate */
  pp_json_string(out, sizeof(out),
                 "a\x80"
                 "b\xe2\x82"
                 "c\xc0\xaf"
                 "d\xed\xa0\x80");
  CHECK_EQ_STR(out,
               "\"a\xef\xbf\xbd"
               "b\xef\xbf\xbd\xef\xbf\xbd"
               "c\xef\xbf\xbd\xef\xbf\xbd"
               "d\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
  /* too long: cut before a whole character, still a closed string */
  size_t n = pp_json_string(out, 8, "\xe2\x82\xac\xe2\x82\xac");
  CHECK_EQ_STR(out, "\"\xe2\x82\xac\"");
  CHECK_EQ_INT(n, 5);
  pp_json_string(out, sizeof(out), NULL);
  CHECK_EQ_STR(out, "\"\"");
}

static int no_int(const struct pp_host *h, const char *k, int64_t *v) {
  (void)h;
  if (strcmp(k, "set") == 0) {
    *v = 7;
    return 0;
  }
  return -ENOENT;
}
static int no_bool(const struct pp_host *h, const char *k, int *v) {
  (void)h, (void)k, (void)v;
  return -ENOENT;
}
static int no_string(const struct pp_host *h, const char *k, const char **v) {
  (void)h, (void)k, (void)v;
  return -ENOENT;
}

static void test_options(void) {
  static const struct pp_option opts[] = {
      {.key = "set", .type = PP_OPT_INT, .default_value = "1"},
      {.key = "max", .type = PP_OPT_INT, .default_value = "65536"},
      {.key = "on", .type = PP_OPT_BOOL, .default_value = "true"},
      {.key = "mode", .type = PP_OPT_STRING, .default_value = "cpu"},
  };
  struct pp_host h = fake_host;
  h.config_int = no_int;
  h.config_bool = no_bool;
  h.config_string = no_string;
  CHECK_EQ_INT(pp_opt_int(&h, PP_OPTIONS(opts), "set"), 7);     /* the host's value */
  CHECK_EQ_INT(pp_opt_int(&h, PP_OPTIONS(opts), "max"), 65536); /* the table's default */
  CHECK(pp_opt_bool(&h, PP_OPTIONS(opts), "on"));
  CHECK_EQ_STR(pp_opt_string(&h, PP_OPTIONS(opts), "mode"), "cpu");
  fake_reset();
  CHECK_EQ_INT(pp_opt_int(&h, PP_OPTIONS(opts), "undeclared"), 0);
  CHECK(strstr(fake.last_log, "undeclared") != NULL);
}

int main(void) {
  test_json();
  test_options();
  return pp_test_finish("test_kit_text");
}
