/* SPDX-License-Identifier: Apache-2.0 */
/* The table of output formats (see formats.h). */
#include "output/formats.h"

#include <string.h>

#include "output/col.h"
#include "output/gecko.h"
#include "output/heatmap.h"
#include "output/html.h"
#include "output/pprof.h"
#include "output/speedscope.h"
#include "output/table.h"

static int write_col(FILE *f, const struct pp_output_input *in) {
  return pp_col_write(f, in->profile, in->header_json, in->col);
}

static int write_html(FILE *f, const struct pp_output_input *in) {
  return pp_html_write(f, in->profile, in->html);
}

static int write_pprof(FILE *f, const struct pp_output_input *in) {
  struct pp_pprof_info info = {.start = in->start,
                               .end = in->end,
                               .frequency = in->frequency,
                               .sample_type = in->sample_type,
                               .sample_unit = in->sample_unit};
  return pp_pprof_write(f, in->profile, &info);
}

static int write_gecko(FILE *f, const struct pp_output_input *in) {
  struct pp_gecko_info info = {.start = in->start, .frequency = in->frequency, .product = in->name};
  return pp_gecko_write(f, in->profile, &info);
}

static int write_heatmap(FILE *f, const struct pp_output_input *in) {
  struct pp_heatmap_info info = {.title = in->html ? in->html->title : in->name,
                                 .source_root = in->source_root};
  return pp_heatmap_write(f, in->profile, &info);
}

static int write_speedscope(FILE *f, const struct pp_output_input *in) {
  return pp_speedscope_write(f, in->profile, in->name ? in->name : "");
}

static int write_table(FILE *f, const struct pp_output_input *in) {
  struct pp_table_opts o = {.limit = 0,
                            .duration_s = in->end > in->start ? (double)(in->end - in->start) : 0};
  return pp_table_write(f, in->profile, &o, 0);
}

static int write_collapsed(FILE *f, const struct pp_output_input *in) {
  return pp_collapsed_write(f, in->profile, 0);
}

/* One line per format; both arrays below are generated from it, so the
 * names config accepts cannot drift from the formats that exist. */
#define FORMATS(X)                                                  \
  X(col, ".col", "last_profile.col")                                \
  X(html, ".html", "last_flamegraph.html")                          \
  X(pprof, ".pb.gz", "last_profile.pb.gz")                          \
  X(speedscope, ".speedscope.json", "last_profile.speedscope.json") \
  X(gecko, ".gecko.json", "last_profile.gecko.json")                \
  X(heatmap, ".heatmap.html", "last_heatmap.html")                  \
  X(table, ".table.txt", "last_profile.table.txt")                  \
  X(collapsed, ".collapsed.txt", "last_profile.collapsed.txt")

#define AS_ENTRY(id, ext, link) {#id, ext, link, write_##id},
#define AS_NAME(id, ext, link) #id,
#define AS_ONE(id, ext, link) +1

_Static_assert(0 FORMATS(AS_ONE) == PP_OUTPUT_FORMAT_COUNT,
               "PP_OUTPUT_FORMAT_COUNT must match the table");

const struct pp_output_format pp_output_formats[PP_OUTPUT_FORMAT_COUNT] = {FORMATS(AS_ENTRY)};
const char *const pp_output_format_names[PP_OUTPUT_FORMAT_COUNT + 1] = {FORMATS(AS_NAME) NULL};

const struct pp_output_format *pp_output_format_find(const char *name) {
  for (size_t i = 0; name && i < PP_OUTPUT_FORMAT_COUNT; i++)
    if (strcmp(pp_output_formats[i].name, name) == 0) return &pp_output_formats[i];
  return NULL;
}
