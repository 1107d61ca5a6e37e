/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `polyprof upload-file --file-path X.col`: upload a .col written earlier
 * (by polyprof or gProfiler) with the same client, retries and spool as the
 * agent. start_time / end_time come from the file's header when it has them
 * (gProfiler's README convention), else "now"; cpu_avg / mem_avg from its
 * "metrics".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <jansson.h>

#include "cmd_tools.h"
#include "log.h"
#include "upload/uploader.h"

#define MAX_COL (1u << 30)

int pp_read_whole_file(const char *path, size_t max, char **out, size_t *len) {
  FILE *f = fopen(path, "rbe");
  if (!f) return -errno;
  struct stat st;
  if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > max) {
    fclose(f);
    return S_ISREG(st.st_mode) ? -EFBIG : -EINVAL;
  }
  char *b = malloc((size_t)st.st_size + 1);
  if (!b) {
    fclose(f);
    return -ENOMEM;
  }
  size_t n = fread(b, 1, (size_t)st.st_size, f);
  int err = ferror(f);
  fclose(f);
  if (err) {
    free(b);
    return -EIO;
  }
  b[n] = '\0';
  *out = b;
  *len = n;
  return 0;
}

/* "2022-10-21T13:51:29.640637" (fraction and a trailing Z ignored) */
static time_t iso_time(const json_t *v, time_t fallback) {
  const char *s = json_string_value(v);
  struct tm tm;
  memset(&tm, 0, sizeof(tm));
  if (!s || !strptime(s, "%Y-%m-%dT%H:%M:%S", &tm)) return fallback;
  return timegm(&tm);
}

static double metric(const json_t *header, const char *key) {
  const json_t *v = json_object_get(json_object_get(header, "metrics"), key);
  return json_is_number(v) ? json_number_value(v) : -1;
}

int pp_cmd_upload_file(struct pp_config *cfg, const char *const *operands, size_t n) {
  const char *path = cfg->file_path ? cfg->file_path : n ? operands[0] : NULL;
  if (!path) {
    fprintf(stderr, "polyprof: upload-file needs --file-path FILE\n");
    return 2;
  }
  cfg->upload = true; /* as gProfiler: upload-file forces upload mode */
  if (!cfg->token || !cfg->service_name) {
    fprintf(stderr,
            "polyprof: upload-file needs a token (--token, --token-file, POLYPROF_TOKEN) "
            "and --service-name\n");
    return 2;
  }
  char *text = NULL;
  size_t len = 0;
  int rc = pp_read_whole_file(path, MAX_COL, &text, &len);
  if (rc < 0) {
    fprintf(stderr, "polyprof: upload-file: %s: %s\n", path, strerror(-rc));
    return 1;
  }
  json_t *header = NULL;
  if (len > 2 && text[0] == '#' && text[1] == ' ') {
    size_t eol = strcspn(text, "\n");
    header = json_loadb(text + 2, eol - 2, 0, NULL);
    if (!json_is_object(header)) {
      fprintf(stderr, "polyprof: upload-file: %s: line 1 is not a JSON header\n", path);
      json_decref(header);
      free(text);
      return 1;
    }
  }
  time_t now = time(NULL);
  time_t start = iso_time(json_object_get(header, "start_time"), now);
  time_t end = iso_time(json_object_get(header, "end_time"), now);
  double cpu = metric(header, "cpu_avg"), mem = metric(header, "mem_avg");
  json_decref(header);

  struct pp_uploader *u = pp_uploader_new(cfg, now);
  if (!u) {
    free(text);
    return 1;
  }
  pp_uploader_submit(u, text, len, start, end, cpu, mem);
  free(text);
  rc = pp_uploader_flush(u);
  pp_uploader_free(u);
  if (rc < 0) {
    fprintf(stderr,
            "polyprof: upload-file: %s was not delivered (see the log; it may be in the "
            "spool)\n",
            path);
    return 1;
  }
  printf("uploaded %s\n", path);
  return 0;
}
