/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `polyprof convert IN.col --to html|pprof|speedscope|col -o OUT`: re-encode
 * a .col (ours or gProfiler's) with the same writers the agent uses. The
 * .col is parsed into a pp_profile (pp_col_parse), so each distinct
 * (app-metadata index, container, comm, appid) prefix becomes one process.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "cmd_tools.h"
#include "metadata.h"
#include "output/col.h"
#include "output/formats.h"
#include "output/html.h"
#include "profile.h"
#include "profile_mode.h"
#include "support/safe_file.h"

#define MAX_COL (1u << 30)

static time_t header_time(const char *header_json, const char *key) {
  json_t *h = header_json ? json_loads(header_json, 0, NULL) : NULL;
  const char *s = json_string_value(json_object_get(h, key));
  if (!s) s = json_string_value(json_object_get(json_object_get(h, "metadata"), key));
  struct tm tm;
  memset(&tm, 0, sizeof(tm));
  time_t t = s && strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) ? timegm(&tm) : 0;
  json_decref(h);
  return t;
}

/* Parse a .col file into a new profile. NULL with a message on stderr. */
struct pp_profile *pp_cmd_load_col(const char *path, char **header_json) {
  char *text = NULL;
  size_t len = 0;
  int rc = pp_read_whole_file(path, MAX_COL, &text, &len);
  if (rc < 0) {
    fprintf(stderr, "polyprof: %s: %s\n", path, strerror(-rc));
    return NULL;
  }
  struct pp_profile *p = pp_profile_new();
  char err[512] = "";
  if (!p || pp_col_parse(text, len, p, header_json, err, sizeof(err)) < 0) {
    fprintf(stderr, "polyprof: %s: %s\n", path, err[0] ? err : "out of memory");
    pp_profile_free(p);
    p = NULL;
  }
  free(text);
  return p;
}

struct convert_job {
  const struct pp_output_format *fmt;
  const struct pp_output_input *in;
};

static int write_converted(FILE *f, void *ctx) {
  const struct convert_job *j = ctx;
  return j->fmt->write(f, j->in);
}

int pp_cmd_convert(struct pp_config *cfg, const char *const *operands, size_t n) {
  const struct pp_output_format *fmt = pp_output_format_find(cfg->convert_to);
  if (n != 1 || !fmt) {
    fprintf(stderr,
            "polyprof: usage: polyprof convert IN.col --to html|pprof|speedscope|col "
            "[-o OUT]\n");
    return 2;
  }
  const char *in = operands[0];
  char outbuf[4096];
  const char *out = cfg->output_dir;
  if (!out) {
    size_t l = strlen(in);
    if (l > 4 && !strcmp(in + l - 4, ".col")) l -= 4;
    snprintf(outbuf, sizeof(outbuf), "%.*s%s", (int)l, in, fmt->ext);
    out = outbuf;
  }
  char *header = NULL;
  struct pp_profile *p = pp_cmd_load_col(in, &header);
  if (!p) return 1;
  time_t start = header_time(header, "start_time"), end = header_time(header, "end_time");
  if (!end) end = header_time(header, "current_time");
  char st[32] = "", et[32] = "";
  if (start) pp_iso_time(start, st, sizeof(st));
  if (end) pp_iso_time(end, et, sizeof(et));
  /* the profile type the file records: its unit in the HTML and pprof */
  unsigned type = pp_profile_type_of_header(header);
  const struct pp_profile_type_desc *td = pp_profile_type(type);
  struct pp_html_info hi = {.title = in,
                            .start_time = st,
                            .end_time = et,
                            .duration_s = start && end > start ? (double)(end - start) : 0,
                            .hostname = "",
                            .unit = td->unit};
  /* the header is kept as it was read: a converted .col is the input's */
  struct pp_output_input oin = {
      .profile = p,
      .header_json = header,
      .html = &hi,
      .start = start,
      .end = end,
      .name = in,
      .sample_type = type != PP_PROFILE_CPU ? td->pprof_type : NULL,
      .sample_unit = type != PP_PROFILE_CPU ? td->pprof_unit : NULL,
  };
  /* a temp file of OUT's directory renamed over OUT: a symlink planted at
   * OUT or next to it is replaced, never written through */
  struct convert_job job = {fmt, &oin};
  int rc = pp_safe_write_file(out, 0644, write_converted, &job);
  if (rc < 0) {
    fprintf(stderr, "polyprof: convert: %s: %s\n", out, strerror(-rc));
  } else {
    printf("wrote %s\n", out);
  }
  free(header);
  pp_profile_free(p);
  return rc < 0 ? 1 : 0;
}
