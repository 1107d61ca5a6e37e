/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The output formats, in one table: the name a user gives (output.formats,
 * --output-format, convert --to), the file extension, the last_* link the
 * agent re-points each session, and the writer. The session writer,
 * `polyprof convert` and config validation all read this table, so a format
 * is accepted, written and converted the same way everywhere.
 */
#ifndef PP_OUTPUT_FORMATS_H
#define PP_OUTPUT_FORMATS_H

#include <stddef.h>
#include <stdio.h>
#include <time.h>

#include "profile.h"

struct pp_col_opts;
struct pp_html_info;

/* Everything a writer may need; each one reads only its own fields, so a
 * caller fills in what the formats it writes use. */
struct pp_output_input {
  const struct pp_profile *profile;
  const char *header_json;         /* col: line-0 JSON text, without "# " */
  const struct pp_col_opts *col;   /* col: NULL for the writer's defaults */
  const struct pp_html_info *html; /* html */
  time_t start, end;               /* pprof: session; 0 if unknown */
  int frequency;                   /* pprof: Hz (0: sample counts only) */
  /* pprof: sample type and unit of a profile that is not cpu samples
   * (profile_mode.h); NULL: cpu */
  const char *sample_type, *sample_unit;
  const char *name; /* speedscope, gecko: the file's "name" */
  /* heatmap: the directory a relative source path is read from (the
   * profiled program's, as its user gave it); NULL: such files get no text */
  const char *source_root;
};

struct pp_output_format {
  const char *name;      /* "pprof" */
  const char *ext;       /* ".pb.gz", appended to the file name stem */
  const char *last_link; /* "last_profile.pb.gz" */
  int (*write)(FILE *f, const struct pp_output_input *in); /* 0 or -errno */
};

#define PP_OUTPUT_FORMAT_COUNT 8

/* In the order the session writes them (.col first: it is what users and
 * servers read). */
extern const struct pp_output_format pp_output_formats[PP_OUTPUT_FORMAT_COUNT];
/* The names of the table, NULL-terminated, for config validation. */
extern const char *const pp_output_format_names[PP_OUTPUT_FORMAT_COUNT + 1];

/* The format called name, or NULL. */
const struct pp_output_format *pp_output_format_find(const char *name);

#endif
