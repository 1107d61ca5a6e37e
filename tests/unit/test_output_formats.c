/* SPDX-License-Identifier: Apache-2.0 */
/* The output format table: the names config accepts are the table's, every
 * format has its own extension and last_* link, lookups, and each writer
 * reached through the table writes what its own writer writes. */
#include <stdlib.h>
#include <string.h>

#include "output/col.h"
#include "output/formats.h"
#include "output/html.h"
#include "output/speedscope.h"
#include "profile.h"
#include "testlib.h"

static char *render(int (*fn)(FILE *, const void *), const void *arg, int *rc) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  *rc = fn(f, arg);
  fclose(f);
  return buf;
}

static const struct pp_output_format *cur;
static int through_table(FILE *f, const void *in) {
  return cur->write(f, in);
}

static int col_direct(FILE *f, const void *v) {
  const struct pp_output_input *in = v;
  return pp_col_write(f, in->profile, in->header_json, in->col);
}

static int speedscope_direct(FILE *f, const void *v) {
  const struct pp_output_input *in = v;
  return pp_speedscope_write(f, in->profile, in->name);
}

int main(void) {
  /* names: the table's, in order, NULL-terminated */
  for (size_t i = 0; i < PP_OUTPUT_FORMAT_COUNT; i++) {
    const struct pp_output_format *f = &pp_output_formats[i];
    CHECK_EQ_STR(pp_output_format_names[i], f->name);
    CHECK(pp_output_format_find(f->name) == f);
    CHECK(f->ext[0] == '.' && f->write != NULL);
    CHECK(strncmp(f->last_link, "last_", 5) == 0);
    for (size_t j = 0; j < i; j++) {
      CHECK(strcmp(f->ext, pp_output_formats[j].ext) != 0);
      CHECK(strcmp(f->last_link, pp_output_formats[j].last_link) != 0);
    }
  }
  CHECK(pp_output_format_names[PP_OUTPUT_FORMAT_COUNT] == NULL);
  CHECK(pp_output_format_find("folded") == NULL);
  CHECK(pp_output_format_find(NULL) == NULL);

  /* the names and files users and servers already rely on */
  CHECK_EQ_STR(pp_output_formats[0].name, "col"); /* written first */
  CHECK_EQ_STR(pp_output_format_find("col")->last_link, "last_profile.col");
  CHECK_EQ_STR(pp_output_format_find("html")->last_link, "last_flamegraph.html");
  CHECK_EQ_STR(pp_output_format_find("pprof")->ext, ".pb.gz");
  CHECK_EQ_STR(pp_output_format_find("speedscope")->ext, ".speedscope.json");

  struct pp_profile *p = pp_profile_new();
  uint32_t fa = pp_profile_intern_frame(p, pp_profile_intern_cstr(p, "main"),
                                        pp_profile_intern_cstr(p, "app.py"), 3, PP_FRAME_PYTHON);
  uint32_t fb =
      pp_profile_intern_frame(p, pp_profile_intern_cstr(p, "read"), PP_NO_STR, 0, PP_FRAME_KERNEL);
  uint32_t s[] = {fa, fb};
  pp_profile_add_stack(p, 7, PP_NO_STR, s, 2, 5);
  pp_profile_pid_upsert(p, 7)->comm = pp_profile_intern_cstr(p, "python3");
  struct pp_col_opts col = {.app_metadata_prefix = true, .container_prefix = true};
  struct pp_html_info hi = {.title = "t", .start_time = "", .end_time = "", .hostname = ""};
  struct pp_output_input in = {.profile = p,
                               .header_json = "{\"k\": 1}",
                               .col = &col,
                               .html = &hi,
                               .start = 1795319340,
                               .end = 1795319400,
                               .frequency = 11,
                               .name = "polyprof test"};

  int rc1, rc2;
  cur = pp_output_format_find("col");
  char *a = render(through_table, &in, &rc1), *b = render(col_direct, &in, &rc2);
  CHECK_EQ_INT(rc1, 0);
  CHECK_EQ_STR(a, b);
  CHECK_EQ_STR(a, "# {\"k\": 1}\n0;;python3;main (app.py:3)_[p];read_[k] 5");
  free(a);
  free(b);

  cur = pp_output_format_find("speedscope");
  a = render(through_table, &in, &rc1), b = render(speedscope_direct, &in, &rc2);
  CHECK_EQ_INT(rc1, 0);
  CHECK_EQ_STR(a, b);
  CHECK_CONTAINS(a, "\"name\":\"polyprof test\"");
  free(a);
  free(b);

  /* the others: something written, without error */
  static const char *const rest[] = {"html", "pprof"};
  for (size_t i = 0; i < 2; i++) {
    cur = pp_output_format_find(rest[i]);
    a = render(through_table, &in, &rc1);
    CHECK_EQ_INT(rc1, 0);
    CHECK(a && a[0]);
    free(a);
  }
  pp_profile_free(p);
  return pp_test_finish("test_output_formats");
}
