/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `polyprof diff BASE NEW [-o diff.html] [--format html|table]`: compares two
 * profiles. BASE and NEW are each a .col file or a directory of sessions
 * (its profile_*.col files, summed).
 *
 * The page is the flame graph viewer itself in its differential mode
 * (output/html.h: the new profile with the base beside it), so search,
 * zoom, tooltips, process filters, icicle and dark mode are the flame
 * graph's. Processes are matched by what they are (comm, container, appid),
 * not by pid: the two sides come from different runs. `--format table`
 * prints the functions whose share of samples grew most, each side
 * normalised by its own total so a longer or busier NEW does not read as a
 * regression.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "cmd_tools.h"
#include "output/col.h"
#include "output/html.h"
#include "profile.h"
#include "support/safe_file.h"

#define MAX_DIR_FILES 10000
#define TABLE_ROWS 25

/* Stacks of src into dst, each process given dst's pid for its identity
 * (comm, container, appid), shared by both sides through `ids`. */
static int absorb(struct pp_profile *dst, const struct pp_profile *src, json_t *ids) {
  size_t nfr = pp_profile_frame_count(src);
  uint32_t *fmap = malloc((nfr ? nfr : 1) * sizeof(*fmap));
  uint32_t *frames = malloc(PP_MAX_FRAMES * sizeof(*frames));
  int rc = fmap && frames ? 0 : -ENOMEM;
  if (fmap) memset(fmap, 0xff, (nfr ? nfr : 1) * sizeof(*fmap));
  for (size_t i = 0; rc == 0 && i < pp_profile_stack_count(src); i++) {
    const struct pp_stack_rec *s = pp_profile_stack(src, i);
    if (!s->count) continue;
    const struct pp_pid_rec *r = pp_profile_pid(src, s->pid);
    uint32_t comm = s->comm != PP_NO_STR ? s->comm : r ? r->comm : PP_NO_STR;
    uint32_t container = r ? r->container : PP_NO_STR, appid = r ? r->appid : PP_NO_STR;
    char key[1024];
    snprintf(key, sizeof(key), "%s\x1f%s\x1f%s", pp_profile_str(src, comm),
             pp_profile_str(src, container), pp_profile_str(src, appid));
    json_t *known = json_object_get(ids, key);
    uint32_t pid =
        known ? (uint32_t)json_integer_value(known) : (uint32_t)json_object_size(ids) + 1;
    if (!known) json_object_set_new(ids, key, json_integer(pid));
    if (!pp_profile_pid(dst, pid)) { /* each side describes the process too */
      struct pp_pid_rec *d = pp_profile_pid_upsert(dst, pid);
      if (!d) {
        rc = -ENOMEM;
        break;
      }
      d->comm = pp_profile_import_str(dst, src, comm);
      d->container = pp_profile_import_str(dst, src, container);
      d->appid = pp_profile_import_str(dst, src, appid);
    }
    const uint32_t *fr = pp_profile_stack_frames(src, s);
    uint32_t n = s->nframes < PP_MAX_FRAMES ? s->nframes : PP_MAX_FRAMES;
    for (uint32_t k = 0; k < n; k++) {
      const struct pp_frame_rec *f = pp_profile_frame(src, fr[k]);
      if (!f) {
        rc = -EINVAL;
        break;
      }
      if (fmap[fr[k]] == UINT32_MAX)
        fmap[fr[k]] =
            pp_profile_intern_frame(dst, pp_profile_import_str(dst, src, f->name),
                                    pp_profile_import_str(dst, src, f->file), f->line, f->kind);
      frames[k] = fmap[fr[k]];
    }
    if (rc == 0) rc = pp_profile_add_stack(dst, pid, PP_NO_STR, frames, n, s->count);
  }
  free(fmap);
  free(frames);
  return rc;
}

static int absorb_file(struct pp_profile *dst, const char *path, json_t *ids) {
  struct pp_profile *p = pp_cmd_load_col(path, NULL);
  if (!p) return -1; /* said why */
  int rc = absorb(dst, p, ids);
  pp_profile_free(p);
  if (rc < 0) fprintf(stderr, "polyprof: diff: %s: %s\n", path, strerror(-rc));
  return rc;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One side: a .col file, or every session .col of a directory. */
static int load_side(struct pp_profile *dst, const char *path, json_t *ids) {
  struct stat st;
  if (stat(path, &st) < 0) {
    fprintf(stderr, "polyprof: diff: %s: %s\n", path, strerror(errno));
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) return absorb_file(dst, path, ids);
  DIR *d = opendir(path);
  if (!d) {
    fprintf(stderr, "polyprof: diff: %s: %s\n", path, strerror(errno));
    return -1;
  }
  char **names = NULL;
  size_t n = 0;
  int rc = 0;
  for (struct dirent *de; rc == 0 && (de = readdir(d));) {
    size_t l = strlen(de->d_name);
    /* the sessions themselves, not the last_profile.col link to one */
    if (l < 5 || strcmp(de->d_name + l - 4, ".col") || strncmp(de->d_name, "profile_", 8)) continue;
    if (n == MAX_DIR_FILES) {
      fprintf(stderr, "polyprof: diff: %s: more than %d sessions\n", path, MAX_DIR_FILES);
      rc = -1;
      break;
    }
    char **g = realloc(names, (n + 1) * sizeof(*g));
    char *full = g ? malloc(strlen(path) + l + 2) : NULL;
    if (!full) {
      if (g) names = g;
      rc = -1;
      break;
    }
    names = g;
    sprintf(full, "%s/%s", path, de->d_name);
    names[n++] = full;
  }
  closedir(d);
  if (rc == 0 && n == 0) {
    fprintf(stderr, "polyprof: diff: %s: no profile_*.col in this directory\n", path);
    rc = -1;
  }
  if (names) qsort(names, n, sizeof(*names), by_name);
  for (size_t i = 0; i < n; i++) {
    if (rc == 0) rc = absorb_file(dst, names[i], ids);
    free(names[i]);
  }
  free(names);
  return rc;
}

/* --- the table ------------------------------------------------------------ */

struct fn_row {
  const char *name;
  uint64_t self[2], total[2];
  double dself;
  size_t stamp; /* the last stack its total counted, + 1 */
};

static int by_regression(const void *a, const void *b) {
  const struct fn_row *x = a, *y = b;
  if (x->dself != y->dself) return x->dself > y->dself ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* Self and total samples per function text on each side. */
static int collect(const struct pp_profile *p, int side, json_t *index, struct fn_row **rows,
                   size_t *nrows, size_t *cap) {
  char text[2048];
  for (size_t i = 0; i < pp_profile_stack_count(p); i++) {
    const struct pp_stack_rec *s = pp_profile_stack(p, i);
    if (!s->count) continue;
    const uint32_t *fr = pp_profile_stack_frames(p, s);
    size_t stamp = (i + 1) * 2 + (size_t)side;
    for (uint32_t k = s->nframes; k > 0; k--) {
      size_t n = pp_frame_format(p, fr[k - 1], text, sizeof(text), true);
      json_t *ix = json_object_getn(index, text, n);
      size_t r;
      if (ix) {
        r = (size_t)json_integer_value(ix);
      } else {
        if (*nrows == *cap) {
          size_t nc = *cap ? *cap * 2 : 1024;
          struct fn_row *nr = realloc(*rows, nc * sizeof(*nr));
          if (!nr) return -ENOMEM;
          *rows = nr;
          *cap = nc;
        }
        r = (*nrows)++;
        json_object_setn_new(index, text, n, json_integer((json_int_t)r));
        memset(&(*rows)[r], 0, sizeof(**rows));
      }
      struct fn_row *row = &(*rows)[r];
      if (k == s->nframes) row->self[side] += s->count;
      if (row->stamp != stamp) { /* once per stack, however deep it recurses */
        row->stamp = stamp;
        row->total[side] += s->count;
      }
    }
  }
  return 0;
}

static int print_table(FILE *out, const struct pp_profile *base, const struct pp_profile *cur,
                       const char *base_name, const char *new_name) {
  json_t *index = json_object();
  struct fn_row *rows = NULL;
  size_t n = 0, cap = 0;
  int rc = index ? collect(base, 0, index, &rows, &n, &cap) : -ENOMEM;
  if (rc == 0) rc = collect(cur, 1, index, &rows, &n, &cap);
  if (rc < 0) {
    json_decref(index);
    free(rows);
    return rc;
  }
  const char *key;
  json_t *v;
  json_object_foreach(index, key, v) rows[json_integer_value(v)].name = key;
  double bt = (double)pp_profile_total(base), nt = (double)pp_profile_total(cur);
  for (size_t i = 0; i < n; i++)
    rows[i].dself = (nt ? 100.0 * (double)rows[i].self[1] / nt : 0) -
                    (bt ? 100.0 * (double)rows[i].self[0] / bt : 0);
  qsort(rows, n, sizeof(*rows), by_regression);
  fprintf(out, "base: %s (%llu samples)\nnew:  %s (%llu samples)\n\n", base_name,
          (unsigned long long)bt, new_name, (unsigned long long)nt);
  fprintf(out, "%8s %8s %8s %8s %8s  %s\n", "ΔSelf", "BaseSelf", "NewSelf", "BaseTot", "NewTot",
          "Function");
  size_t shown = 0;
  for (size_t i = 0; i < n && shown < TABLE_ROWS; i++) {
    if (rows[i].dself <= 0.005) break; /* regressions only: the rest shrank or held */
    const struct fn_row *r = &rows[i];
    fprintf(out, "%+7.2f%% %7.2f%% %7.2f%% %7.2f%% %7.2f%%  %s\n", r->dself,
            bt ? 100.0 * (double)r->self[0] / bt : 0, nt ? 100.0 * (double)r->self[1] / nt : 0,
            bt ? 100.0 * (double)r->total[0] / bt : 0, nt ? 100.0 * (double)r->total[1] / nt : 0,
            r->name);
    shown++;
  }
  if (!shown) fprintf(out, "(no function's share of samples grew)\n");
  free(rows);
  json_decref(index);
  return ferror(out) ? -EIO : 0;
}

/* --- the page ------------------------------------------------------------- */

struct diff_job {
  const struct pp_profile *cur;
  const struct pp_html_info *info;
};

static int write_page(FILE *f, void *ctx) {
  const struct diff_job *j = ctx;
  return pp_html_write(f, j->cur, j->info);
}

int pp_cmd_diff(struct pp_config *cfg, const char *const *operands, size_t n, const char *format) {
  bool table = format && !strcmp(format, "table");
  if (n != 2 || (format && !table && strcmp(format, "html"))) {
    fprintf(stderr,
            "polyprof: usage: polyprof diff BASE NEW [-o diff.html] [--format html|table] "
            "(BASE, NEW: a .col file or a directory of sessions)\n");
    return 2;
  }
  struct pp_profile *base = pp_profile_new(), *cur = pp_profile_new();
  json_t *ids = json_object();
  int rc = base && cur && ids ? 0 : -ENOMEM;
  if (rc == 0 && load_side(base, operands[0], ids) < 0) rc = -1;
  if (rc == 0 && load_side(cur, operands[1], ids) < 0) rc = -1;
  json_decref(ids);
  if (rc == -ENOMEM) fprintf(stderr, "polyprof: diff: out of memory\n");
  if (rc == 0 && table) {
    rc = print_table(stdout, base, cur, operands[0], operands[1]);
    if (rc < 0) fprintf(stderr, "polyprof: diff: %s\n", strerror(-rc));
  } else if (rc == 0) {
    const char *out = cfg->output_dir ? cfg->output_dir : "diff.html";
    char title[1024];
    snprintf(title, sizeof(title), "polyprof diff: %s \xe2\x86\x92 %s", operands[0], operands[1]);
    struct pp_html_info info = {
        .title = title,
        .hostname = "",
        .base = base,
        .base_name = operands[0],
        .new_name = operands[1],
    };
    struct diff_job job = {cur, &info};
    rc = pp_safe_write_file(out, 0644, write_page, &job);
    if (rc < 0)
      fprintf(stderr, "polyprof: diff: %s: %s\n", out, strerror(-rc));
    else
      printf("wrote %s (base %llu samples, new %llu samples)\n", out,
             (unsigned long long)pp_profile_total(base), (unsigned long long)pp_profile_total(cur));
  }
  pp_profile_free(base);
  pp_profile_free(cur);
  return rc < 0 ? 1 : 0;
}
