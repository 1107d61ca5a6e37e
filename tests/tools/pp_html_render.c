/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pp_html_render: writes a flame graph page from a synthetic profile, for the
 * browser test (tests/integration/test_html_browser.py).
 *
 * Input (file or stdin), one stack per line, root first:
 *
 *   pid;comm;container;appid;frame;...;frame count
 *
 * container and appid may be empty. A frame's kind comes from a .col-style
 * suffix: _[k] kernel, _[p] python, _[pn], _[pe], _[j], _[i], _[0], _[1],
 * _[rb], _[php], _[net], plus _[js], _[pseudo] and _[err] (which .col does
 * not have); no suffix = native. "\xHH" and "\\" escapes allow any byte
 * (invalid UTF-8, separators). Lines starting with '#' are comments.
 *
 * Usage: pp_html_render [-o out.html] [-t title] [--start ISO] [--end ISO]
 *        [--duration S] [--host H] [--plugin name:samples:rate:status]...
 *        [--heatmap HREF] (frames with a source line link to HREF)
 *        [input]
 * Prints the write time to stderr.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "output/html.h"
#include "profile.h"

static const struct {
  const char *sfx;
  unsigned kind;
} suffixes[] = {
    {"_[k]", PP_FRAME_KERNEL},
    {"_[p]", PP_FRAME_PYTHON},
    {"_[pn]", PP_FRAME_PYTHON_NATIVE},
    {"_[pe]", PP_FRAME_PYTHON_ERROR},
    {"_[j]", PP_FRAME_JAVA_JIT},
    {"_[i]", PP_FRAME_JAVA_INLINED},
    {"_[0]", PP_FRAME_JAVA_INTERPRETED},
    {"_[1]", PP_FRAME_JAVA_C1},
    {"_[rb]", PP_FRAME_RUBY},
    {"_[php]", PP_FRAME_PHP},
    {"_[net]", PP_FRAME_DOTNET},
    {"_[js]", PP_FRAME_JS},
    {"_[pseudo]", PP_FRAME_PSEUDO},
    {"_[err]", PP_FRAME_ERROR},
};

/* Decodes "\xHH" and "\\" in place; returns the new length. */
static size_t unescape(char *s, size_t n) {
  size_t w = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '\\' && i + 1 < n && s[i + 1] == '\\') {
      s[w++] = '\\';
      i++;
    } else if (s[i] == '\\' && i + 3 < n && s[i + 1] == 'x') {
      char hex[3] = {s[i + 2], s[i + 3], 0};
      s[w++] = (char)strtoul(hex, NULL, 16);
      i += 3;
    } else {
      s[w++] = s[i];
    }
  }
  return w;
}

static unsigned strip_kind(char *s, size_t *n) {
  for (size_t k = 0; k < sizeof(suffixes) / sizeof(suffixes[0]); k++) {
    size_t l = strlen(suffixes[k].sfx);
    if (*n > l && memcmp(s + *n - l, suffixes[k].sfx, l) == 0) {
      *n -= l;
      return suffixes[k].kind;
    }
  }
  return PP_FRAME_NATIVE;
}

static uint32_t intern_field(struct pp_profile *p, char *s, size_t n) {
  n = unescape(s, n);
  return n ? pp_profile_intern(p, s, n) : PP_NO_STR;
}

static int parse_line(struct pp_profile *p, char *line, size_t len, uint32_t *frames, int lineno) {
  char *sp = memrchr(line, ' ', len);
  if (!sp) {
    fprintf(stderr, "line %d: no count\n", lineno);
    return -EINVAL;
  }
  uint64_t count = strtoull(sp + 1, NULL, 10);
  len = (size_t)(sp - line);
  char *fields[PP_MAX_FRAMES + 8];
  size_t flen[PP_MAX_FRAMES + 8];
  size_t nf = 0;
  char *start = line;
  for (size_t i = 0; i <= len && nf < PP_MAX_FRAMES + 8; i++) {
    if (i == len || line[i] == ';') {
      fields[nf] = start;
      flen[nf++] = (size_t)(line + i - start);
      start = line + i + 1;
    }
  }
  if (nf < 4) {
    fprintf(stderr, "line %d: need pid;comm;container;appid;frames\n", lineno);
    return -EINVAL;
  }
  uint32_t pid = (uint32_t)strtoul(fields[0], NULL, 10);
  uint32_t comm = intern_field(p, fields[1], flen[1]);
  uint32_t container = intern_field(p, fields[2], flen[2]);
  uint32_t appid = intern_field(p, fields[3], flen[3]);
  struct pp_pid_rec *r = pp_profile_pid_upsert(p, pid);
  if (!r) return -ENOMEM;
  uint32_t stack_comm = PP_NO_STR;
  if (r->comm == PP_NO_STR)
    r->comm = comm;
  else if (r->comm != comm)
    stack_comm = comm; /* a different comm for the same pid: a thread name */
  if (container != PP_NO_STR) r->container = container;
  if (appid != PP_NO_STR) r->appid = appid;

  uint32_t n = 0;
  for (size_t i = 4; i < nf; i++) {
    size_t l = unescape(fields[i], flen[i]);
    unsigned kind = strip_kind(fields[i], &l);
    uint32_t name = pp_profile_intern(p, fields[i], l);
    frames[n++] = pp_profile_intern_frame(p, name, PP_NO_STR, 0, kind);
  }
  return pp_profile_add_stack(p, pid, stack_comm, frames, n, count);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
  const char *out_path = NULL, *in_path = NULL;
  struct pp_html_info info = {.title = "polyprof synthetic profile",
                              .start_time = "2026-11-22T03:00:00Z",
                              .end_time = "2026-11-22T03:01:00Z",
                              .duration_s = 60,
                              .hostname = "testhost"};
  struct pp_html_plugin_stat plugins[16];
  size_t nplugins = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-o") && v)
      out_path = argv[++i];
    else if (!strcmp(a, "-t") && v)
      info.title = argv[++i];
    else if (!strcmp(a, "--start") && v)
      info.start_time = argv[++i];
    else if (!strcmp(a, "--end") && v)
      info.end_time = argv[++i];
    else if (!strcmp(a, "--duration") && v)
      info.duration_s = atof(argv[++i]);
    else if (!strcmp(a, "--heatmap") && v)
      info.heatmap_href = argv[++i];
    else if (!strcmp(a, "--host") && v)
      info.hostname = argv[++i];
    else if (!strcmp(a, "--plugin") && v && nplugins < 16) {
      /* name:samples:rate:status; the strings stay in argv */
      char *s = argv[++i];
      struct pp_html_plugin_stat *ps = &plugins[nplugins++];
      ps->name = strsep(&s, ":");
      ps->samples = s ? strtoull(strsep(&s, ":"), NULL, 10) : 0;
      ps->rate_hz = s ? atof(strsep(&s, ":")) : 0;
      ps->status = s ? s : "ok";
    } else if (a[0] != '-' && !in_path)
      in_path = a;
    else {
      fprintf(stderr, "usage: %s [-o out.html] [-t title] [--plugin n:s:r:st] [input]\n", argv[0]);
      return 2;
    }
  }
  info.plugins = plugins;
  info.plugin_count = nplugins;

  FILE *in = in_path ? fopen(in_path, "rb") : stdin;
  if (!in) {
    perror(in_path);
    return 1;
  }
  struct pp_profile *p = pp_profile_new();
  static uint32_t frames[PP_MAX_FRAMES + 8];
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  int lineno = 0, rc = 0;
  while ((len = getline(&line, &cap, in)) >= 0) {
    lineno++;
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
      len--;
    if (!len || line[0] == '#') continue;
    if ((rc = parse_line(p, line, (size_t)len, frames, lineno)) < 0) break;
  }
  free(line);
  if (in != stdin) fclose(in);
  if (rc < 0) return 1;

  FILE *out = out_path ? fopen(out_path, "wb") : stdout;
  if (!out) {
    perror(out_path);
    return 1;
  }
  double t0 = now_ms();
  rc = pp_html_write(out, p, &info);
  double t1 = now_ms();
  long bytes = ftell(out);
  if (out != stdout && fclose(out) != 0) rc = -errno;
  fprintf(stderr,
          "pp_html_render: %zu stacks, %zu frames, %llu samples -> %ld bytes in %.1f ms (rc %d)\n",
          pp_profile_stack_count(p), pp_profile_frame_count(p),
          (unsigned long long)pp_profile_total(p), bytes, t1 - t0, rc);
  pp_profile_free(p);
  return rc < 0 ? 1 : 0;
}
