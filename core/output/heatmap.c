/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Line heatmap writer (see heatmap.h). The page is assets/heatmap.html with
 * {{TITLE}} and {{DATA}} filled in; DATA is one JSON object in an inert
 * <script type="application/json"> element:
 *
 *   v       1
 *   title   string;  total  samples in the profile
 *   files   [{path, self, total, lines: flat [line, self, total, ...]
 *            ascending, src: the text or null, why: why src is null}]
 *            by total samples, highest first
 *
 * Strings are escaped so that nothing in them can end the script element.
 */
#include "output/heatmap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "polyprof/kit/json.h"

extern const unsigned char pp_asset_heatmap_html[];
extern const size_t pp_asset_heatmap_html_len;

#define NONE UINT32_MAX
#define MAX_SOURCE_BYTES (4u << 20)  /* one file's text */
#define MAX_SOURCE_TOTAL (64u << 20) /* all files' text in one page */
#define MAX_PATH_BYTES 4096

/* --- frames to (file, line) --------------------------------------------- */

static bool parse_line(const char *s, size_t n, uint32_t *line) {
  if (n == 0 || n > 9) return false;
  uint32_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (uint32_t)(s[i] - '0');
  }
  *line = v;
  return v > 0;
}

/* "file:line" at s[0..n) */
static bool split_file_line(const char *s, size_t n, const char **file, size_t *flen,
                            uint32_t *line) {
  const char *colon = NULL;
  for (size_t i = n; i > 0; i--)
    if (s[i - 1] == ':') {
      colon = s + i - 1;
      break;
    }
  if (!colon || colon == s) return false;
  if (!parse_line(colon + 1, (size_t)(s + n - colon - 1), line)) return false;
  *file = s;
  *flen = (size_t)(colon - s);
  return true;
}

static const char *last_of(const char *s, size_t n, const char *pat) {
  size_t m = strlen(pat);
  for (size_t i = n >= m ? n - m + 1 : 0; i > 0; i--)
    if (memcmp(s + i - 1, pat, m) == 0) return s + i - 1;
  return NULL;
}

bool pp_frame_source_line(const struct pp_profile *p, uint32_t frame_id, const char **file,
                          size_t *file_len, uint32_t *line) {
  const struct pp_frame_rec *f = pp_profile_frame(p, frame_id);
  if (!f) return false;
  if (f->file != PP_NO_STR && f->line && pp_profile_str_len(p, f->file)) {
    if (f->kind != PP_FRAME_NATIVE && f->kind != PP_FRAME_KERNEL &&
        f->kind != PP_FRAME_PYTHON_NATIVE) {
      *file = pp_profile_str(p, f->file);
      *file_len = pp_profile_str_len(p, f->file);
      *line = f->line;
      return true;
    }
  }
  if (f->file != PP_NO_STR) return false; /* a record without a line */
  const char *s = pp_profile_str(p, f->name);
  size_t n = pp_profile_str_len(p, f->name);
  const char *at;
  switch (f->kind) {
    case PP_FRAME_PYTHON:
    case PP_FRAME_JS:
    case PP_FRAME_JS_INTERPRETED:
    case PP_FRAME_JS_BASELINE:
    case PP_FRAME_JS_OPTIMIZED:
    case PP_FRAME_JS_INLINED:
    case PP_FRAME_JS_BUILTIN:
      if (n < 5 || s[n - 1] != ')' || !(at = last_of(s, n, " ("))) return false;
      return split_file_line(at + 2, (size_t)(s + n - 1 - (at + 2)), file, file_len, line);
    case PP_FRAME_RUBY:
      if (!(at = last_of(s, n, " - "))) return false;
      return split_file_line(at + 3, (size_t)(s + n - (at + 3)), file, file_len, line);
    case PP_FRAME_PHP:
      if (!(at = last_of(s, n, " "))) return false;
      return split_file_line(at + 1, (size_t)(s + n - (at + 1)), file, file_len, line);
    default:
      return false;
  }
}

/* --- tables ------------------------------------------------------------- */

struct file_ent {
  const char *path;
  size_t len;
  uint64_t self, total;
  size_t stamp; /* last stack counted + 1 */
};

struct line_ent {
  uint32_t file, line;
  uint64_t self, total;
  size_t stamp;
};

struct model {
  uint32_t *floc, *fline; /* per profile frame: file index (NONE) and line */
  uint8_t *fdone;
  struct file_ent *files;
  uint32_t nfiles, *file_ix, file_mask;
  struct line_ent *lines;
  uint32_t nlines, *line_ix, line_mask;
};

static uint64_t hash_bytes(const char *s, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
  return h ^ (h >> 29);
}

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x ^ (x >> 29);
}

static uint32_t *slots(size_t entries, uint32_t *mask) {
  size_t cap = 64;
  while (cap < entries * 2)
    cap *= 2;
  uint32_t *v = malloc(cap * sizeof(*v));
  if (v) memset(v, 0xff, cap * sizeof(*v));
  *mask = (uint32_t)(cap - 1);
  return v;
}

static uint32_t file_of(struct model *m, const char *path, size_t len) {
  uint32_t pos = (uint32_t)hash_bytes(path, len) & m->file_mask;
  for (uint32_t id; (id = m->file_ix[pos]) != NONE; pos = (pos + 1) & m->file_mask)
    if (m->files[id].len == len && memcmp(m->files[id].path, path, len) == 0) return id;
  uint32_t id = m->nfiles++;
  m->files[id] = (struct file_ent){.path = path, .len = len};
  m->file_ix[pos] = id;
  return id;
}

static uint32_t line_of(struct model *m, uint32_t file, uint32_t line) {
  uint32_t pos = (uint32_t)mix(((uint64_t)file << 32) | line) & m->line_mask;
  for (uint32_t id; (id = m->line_ix[pos]) != NONE; pos = (pos + 1) & m->line_mask)
    if (m->lines[id].file == file && m->lines[id].line == line) return id;
  uint32_t id = m->nlines++;
  m->lines[id] = (struct line_ent){.file = file, .line = line};
  m->line_ix[pos] = id;
  return id;
}

static void model_free(struct model *m) {
  free(m->floc);
  free(m->fline);
  free(m->fdone);
  free(m->files);
  free(m->file_ix);
  free(m->lines);
  free(m->line_ix);
}

static int model_build(struct model *m, const struct pp_profile *p) {
  size_t nfr = pp_profile_frame_count(p), nst = pp_profile_stack_count(p);
  if (nfr >= NONE / 2) return -EOVERFLOW;
  size_t nf = nfr ? nfr : 1;
  m->floc = malloc(nf * sizeof(uint32_t));
  m->fline = malloc(nf * sizeof(uint32_t));
  m->fdone = calloc(nf, 1);
  m->files = malloc(nf * sizeof(*m->files));
  m->lines = malloc(nf * sizeof(*m->lines));
  m->file_ix = slots(nf, &m->file_mask);
  m->line_ix = slots(nf, &m->line_mask);
  if (!m->floc || !m->fline || !m->fdone || !m->files || !m->lines || !m->file_ix || !m->line_ix)
    return -ENOMEM;
  for (size_t i = 0; i < nst; i++) {
    const struct pp_stack_rec *s = pp_profile_stack(p, i);
    if (!s->count) continue;
    const uint32_t *fr = pp_profile_stack_frames(p, s);
    bool self_done = false;
    for (uint32_t k = s->nframes; k > 0; k--) { /* leaf first */
      uint32_t fid = fr[k - 1];
      if (fid >= nfr) continue;
      if (!m->fdone[fid]) {
        const char *path;
        size_t len;
        uint32_t line;
        m->fdone[fid] = 1;
        m->floc[fid] = NONE;
        if (pp_frame_source_line(p, fid, &path, &len, &line) && len < MAX_PATH_BYTES) {
          m->floc[fid] = line_of(m, file_of(m, path, len), line);
          m->fline[fid] = line;
        }
      }
      uint32_t le = m->floc[fid];
      if (le == NONE) continue;
      struct line_ent *l = &m->lines[le];
      if (!self_done) {
        l->self += s->count;
        m->files[l->file].self += s->count;
        self_done = true;
      }
      if (l->stamp != i + 1) {
        l->stamp = i + 1;
        l->total += s->count;
      }
      struct file_ent *fe = &m->files[l->file];
      if (fe->stamp != i + 1) {
        fe->stamp = i + 1;
        fe->total += s->count;
      }
    }
  }
  return 0;
}

/* --- output ------------------------------------------------------------- */

/* A JSON string that may sit inside a <script> element: '<', '>', '&', '/'
 * and U+2028/2029 escaped, invalid UTF-8 replaced. */
static void put_json(FILE *f, const char *s, size_t n) {
  putc('"', f);
  size_t i = 0;
  while (i < n) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x80) {
      uint32_t cp = 0;
      size_t l = pp_utf8_decode(s + i, n - i, &cp);
      if (!l) {
        fputs("\\ufffd", f);
        i++;
      } else if (cp == 0x2028 || cp == 0x2029) {
        fprintf(f, "\\u%04x", cp);
        i += l;
      } else {
        fwrite(s + i, 1, l, f);
        i += l;
      }
      continue;
    }
    if (c == '"' || c == '\\')
      putc('\\', f), putc(c, f);
    else if (c == '\n')
      fputs("\\n", f);
    else if (c < 0x20 || c == 0x7f || c == '<' || c == '>' || c == '&' || c == '/' || c == '\'')
      fprintf(f, "\\u%04x", c);
    else
      putc(c, f);
    i++;
  }
  putc('"', f);
}

static void put_html_text(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '<')
      fputs("&lt;", f);
    else if (*s == '>')
      fputs("&gt;", f);
    else if (*s == '&')
      fputs("&amp;", f);
    else if (*s == '"')
      fputs("&quot;", f);
    else if ((unsigned char)*s < 0x20)
      putc(' ', f);
    else
      putc(*s, f);
  }
}

/* The file's text into *out, or NULL with *why saying why not. */
static char *read_source(const char *path, size_t len, const char *root, size_t budget,
                         size_t *out_len, const char **why) {
  char p[MAX_PATH_BYTES];
  if (len == 0 || len >= sizeof(p) || memchr(path, '\0', len)) return *why = "unusable path", NULL;
  size_t rlen = 0;
  if (path[0] != '/') {
    if (!root || !root[0])
      return *why = "relative path: the process's directory is unknown here (--source-root)", NULL;
    rlen = strlen(root);
    if (rlen + 1 + len >= sizeof(p)) return *why = "unusable path", NULL;
    memcpy(p, root, rlen);
    p[rlen++] = '/';
  }
  memcpy(p + rlen, path, len);
  p[rlen + len] = '\0';
  if (p[0] != '/') return *why = "relative path: the process's directory is unknown here", NULL;
  if (!strncmp(p, "/proc/", 6) || !strncmp(p, "/sys/", 5) || !strncmp(p, "/dev/", 5))
    return *why = "not a source file", NULL;
  int fd = open(p, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return *why = "not readable here", NULL;
  struct stat st;
  char *buf = NULL;
  *why = NULL;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
    *why = "not a regular file";
  else if (!(st.st_mode & S_IROTH))
    *why = "not world-readable: left out of the page";
  else if (st.st_size <= 0 || (uint64_t)st.st_size > MAX_SOURCE_BYTES)
    *why = "empty or too large";
  else if ((size_t)st.st_size > budget)
    *why = "the page's source budget is spent";
  if (!*why) {
    size_t want = (size_t)st.st_size, got = 0;
    buf = malloc(want + 1);
    while (buf && got < want) {
      ssize_t r = read(fd, buf + got, want - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += (size_t)r;
    }
    if (!buf)
      *why = "out of memory";
    else if (memchr(buf, '\0', got))
      *why = "binary file";
    *out_len = got;
  }
  close(fd);
  if (*why) {
    free(buf);
    return NULL;
  }
  return buf;
}

static int by_file_line(const void *a, const void *b) {
  const struct line_ent *x = a, *y = b;
  if (x->file != y->file) return x->file < y->file ? -1 : 1;
  return x->line < y->line ? -1 : x->line > y->line;
}

/* files by total, highest first; an index array sorted with the model */
static __thread const struct model *sort_model;
static int by_total(const void *a, const void *b) {
  const struct file_ent *x = &sort_model->files[*(const uint32_t *)a];
  const struct file_ent *y = &sort_model->files[*(const uint32_t *)b];
  if (x->total != y->total) return x->total > y->total ? -1 : 1;
  return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

static int write_data(FILE *f, struct model *m, const struct pp_profile *p, const char *title,
                      const char *root) {
  /* line entries grouped by file: sort them, then find each file's run */
  qsort(m->lines, m->nlines, sizeof(*m->lines), by_file_line);
  uint32_t *first = malloc(((size_t)m->nfiles + 1) * sizeof(uint32_t));
  uint32_t *order = malloc(((size_t)m->nfiles + 1) * sizeof(uint32_t));
  if (!first || !order) {
    free(first);
    free(order);
    return -ENOMEM;
  }
  for (uint32_t i = 0, l = 0; i <= m->nfiles; i++) {
    while (l < m->nlines && m->lines[l].file < i)
      l++;
    first[i] = l;
  }
  for (uint32_t i = 0; i < m->nfiles; i++)
    order[i] = i;
  sort_model = m;
  qsort(order, m->nfiles, sizeof(*order), by_total);
  fputs("{\"v\":1,\"title\":", f);
  put_json(f, title, strlen(title));
  fprintf(f, ",\"total\":%llu,\"files\":[", (unsigned long long)pp_profile_total(p));
  size_t budget = MAX_SOURCE_TOTAL;
  for (uint32_t k = 0; k < m->nfiles; k++) {
    uint32_t i = order[k];
    const struct file_ent *fe = &m->files[i];
    fputs(k ? ",\n{\"path\":" : "\n{\"path\":", f);
    put_json(f, fe->path, fe->len);
    fprintf(f, ",\"self\":%llu,\"total\":%llu,\"lines\":[", (unsigned long long)fe->self,
            (unsigned long long)fe->total);
    for (uint32_t l = first[i]; l < first[i + 1]; l++)
      fprintf(f, "%s%u,%llu,%llu", l > first[i] ? "," : "", m->lines[l].line,
              (unsigned long long)m->lines[l].self, (unsigned long long)m->lines[l].total);
    fputs("],\"src\":", f);
    size_t n = 0;
    const char *why = NULL;
    char *src = read_source(fe->path, fe->len, root, budget, &n, &why);
    if (src) {
      put_json(f, src, n);
      budget -= n;
      fputs(",\"why\":null}", f);
    } else {
      fputs("null,\"why\":", f);
      put_json(f, why, strlen(why));
      putc('}', f);
    }
    free(src);
  }
  fputs("]}", f);
  free(first);
  free(order);
  return 0;
}

int pp_heatmap_write(FILE *f, const struct pp_profile *p, const struct pp_heatmap_info *info) {
  if (!f || !p) return -EINVAL;
  struct model m;
  memset(&m, 0, sizeof(m));
  int rc = model_build(&m, p);
  const char *title = info && info->title && info->title[0] ? info->title : "polyprof heatmap";
  const char *t = (const char *)pp_asset_heatmap_html;
  size_t n = pp_asset_heatmap_html_len, run = 0;
  for (size_t i = 0; rc == 0 && i + 1 < n;) {
    if (t[i] != '{' || t[i + 1] != '{') {
      i++;
      continue;
    }
    bool is_title = n - i >= 9 && !memcmp(t + i, "{{TITLE}}", 9);
    bool is_data = n - i >= 8 && !memcmp(t + i, "{{DATA}}", 8);
    if (!is_title && !is_data) {
      i += 2;
      continue;
    }
    fwrite(t + run, 1, i - run, f);
    if (is_title)
      put_html_text(f, title);
    else
      rc = write_data(f, &m, p, title, info ? info->source_root : NULL);
    i += is_title ? 9 : 8;
    run = i;
  }
  if (rc == 0) fwrite(t + run, 1, n - run, f);
  model_free(&m);
  if (rc) return rc;
  errno = 0;
  if (fflush(f) != 0 || ferror(f)) return -(errno ? errno : EIO);
  return 0;
}
