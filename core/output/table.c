/* SPDX-License-Identifier: Apache-2.0 */
/* The pstats-like table (see table.h). */
#include "output/table.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "output/col.h"

/* One row: the frames that share a name, file and runtime. */
struct fn {
  uint32_t name, file, kind;
  uint32_t line;      /* the line seen most often, for the file:line text */
  uint64_t line_hits; /* samples at `line` */
  uint64_t self, total;
  size_t stamp; /* 1 + the last stack counted in total (a recursion counts once) */
};

struct fn_table {
  struct fn *fns;
  size_t n, cap;
  size_t *slots; /* open addressing: index + 1, 0 empty */
  size_t nslots;
};

static uint64_t fn_hash(uint32_t name, uint32_t file, uint32_t kind) {
  uint64_t h = ((uint64_t)name << 32 | file) * 0x9e3779b97f4a7c15ull;
  return h ^ (kind * 0xff51afd7ed558ccdull) ^ (h >> 29);
}

static int table_grow(struct fn_table *t) {
  size_t nslots = t->nslots ? t->nslots * 2 : 256;
  size_t *slots = calloc(nslots, sizeof(*slots));
  if (!slots) return -ENOMEM;
  for (size_t i = 0; i < t->n; i++) {
    const struct fn *f = &t->fns[i];
    size_t s = fn_hash(f->name, f->file, f->kind) & (nslots - 1);
    while (slots[s])
      s = (s + 1) & (nslots - 1);
    slots[s] = i + 1;
  }
  free(t->slots);
  t->slots = slots;
  t->nslots = nslots;
  return 0;
}

/* The row of a frame, created on first sight. -1 when out of memory. */
static long fn_of(struct fn_table *t, const struct pp_frame_rec *fr) {
  if ((t->n + 1) * 2 > t->nslots && table_grow(t) < 0) return -1;
  size_t s = fn_hash(fr->name, fr->file, fr->kind) & (t->nslots - 1);
  while (t->slots[s]) {
    struct fn *f = &t->fns[t->slots[s] - 1];
    if (f->name == fr->name && f->file == fr->file && f->kind == fr->kind)
      return (long)(t->slots[s] - 1);
    s = (s + 1) & (t->nslots - 1);
  }
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 256;
    struct fn *g = realloc(t->fns, cap * sizeof(*g));
    if (!g) return -1;
    t->fns = g;
    t->cap = cap;
  }
  t->fns[t->n] = (struct fn){.name = fr->name, .file = fr->file, .kind = fr->kind};
  t->slots[s] = t->n + 1;
  return (long)t->n++;
}

static const struct pp_profile *sort_profile; /* qsort has no context argument */
static enum pp_table_sort sort_key;

static int by_key(const void *x, const void *y) {
  const struct fn *a = x, *b = y;
  if (sort_key == PP_TABLE_SORT_NAME) {
    int c = strcmp(pp_profile_str(sort_profile, a->name), pp_profile_str(sort_profile, b->name));
    if (c) return c;
  }
  uint64_t ka = sort_key == PP_TABLE_SORT_TOTAL ? a->total : a->self;
  uint64_t kb = sort_key == PP_TABLE_SORT_TOTAL ? b->total : b->self;
  if (ka != kb) return ka > kb ? -1 : 1;
  if (a->total != b->total) return a->total > b->total ? -1 : 1;
  return strcmp(pp_profile_str(sort_profile, a->name), pp_profile_str(sort_profile, b->name));
}

int pp_table_sort_parse(const char *s, enum pp_table_sort *out) {
  static const char *const names[] = {"self", "total", "name"};
  for (int i = 0; i < 3; i++)
    if (s && !strcmp(s, names[i])) {
      *out = (enum pp_table_sort)i;
      return 0;
    }
  return -1;
}

/* "name (file:line) [runtime]"; ';' and newlines are left to the name. */
static void fn_text(const struct pp_profile *p, const struct fn *f, char *buf, size_t cap) {
  const char *file = f->file == PP_NO_STR ? "" : pp_profile_str(p, f->file);
  const char *kind = pp_frame_kind_name(f->kind);
  int n = snprintf(buf, cap, "%s", pp_profile_str(p, f->name));
  if (n < 0 || (size_t)n >= cap) return;
  size_t at = (size_t)n;
  if (*file && f->line)
    n = snprintf(buf + at, cap - at, " (%s:%u)", file, f->line);
  else if (*file)
    n = snprintf(buf + at, cap - at, " (%s)", file);
  else
    n = 0;
  if (n < 0 || at + (size_t)n >= cap) return;
  at += (size_t)n;
  if (kind && *kind) snprintf(buf + at, cap - at, " [%s]", kind);
}

static double pct(uint64_t part, uint64_t all) {
  return all ? 100.0 * (double)part / (double)all : 0.0;
}

int pp_table_write(FILE *f, const struct pp_profile *p, const struct pp_table_opts *o,
                   uint32_t only_pid) {
  struct fn_table t = {0};
  int rc = 0;
  uint64_t all = 0;
  size_t nstacks = pp_profile_stack_count(p);
  for (size_t i = 0; i < nstacks && rc == 0; i++) {
    const struct pp_stack_rec *s = pp_profile_stack(p, i);
    const uint32_t *ids = pp_profile_stack_frames(p, s);
    if (!s->nframes || !ids || (only_pid && s->pid != only_pid)) continue;
    all += s->count;
    for (uint32_t k = 0; k < s->nframes; k++) {
      const struct pp_frame_rec *fr = pp_profile_frame(p, ids[k]);
      if (!fr) continue;
      long idx = fn_of(&t, fr);
      if (idx < 0) {
        rc = -ENOMEM;
        break;
      }
      struct fn *fn = &t.fns[idx];
      bool leaf = k + 1 == s->nframes;
      if (fn->stamp != i + 1) {
        fn->total += s->count;
        fn->stamp = i + 1;
      }
      if (leaf) fn->self += s->count;
      /* the line where the samples fall most, counted at the leaf and on
       * the way to it alike */
      if (fr->line == fn->line)
        fn->line_hits += s->count;
      else if (s->count > fn->line_hits) {
        fn->line = fr->line;
        fn->line_hits = s->count;
      }
    }
  }
  if (rc == 0 && t.n) {
    sort_profile = p;
    sort_key = o->sort;
    qsort(t.fns, t.n, sizeof(*t.fns), by_key);
  }
  size_t rows = o->limit && o->limit < t.n ? o->limit : t.n;
  char text[1024];
  const char *unit = o->unit ? o->unit : "samples";
  /* a share of the session's time only where every count is a sample */
  bool samples = !strcmp(unit, "samples");
  double duration = samples ? o->duration_s : 0;
  if (rc == 0) {
    fprintf(f, "%llu %s%s, %zu functions%s\n", (unsigned long long)all, unit,
            !samples       ? " (no times)"
            : duration > 0 ? ""
                           : " (no duration: no times)",
            t.n, rows < t.n ? " (the first rows shown; --limit 0 for all)" : "");
    fprintf(f, "%10s %7s %10s %7s %9s  %s\n", "self", "self%", "total", "total%", "self-s",
            "function (file:line) [runtime]");
    for (size_t i = 0; i < rows; i++) {
      const struct fn *fn = &t.fns[i];
      fn_text(p, fn, text, sizeof(text));
      char secs[32] = "-";
      if (samples)
        snprintf(secs, sizeof(secs), "%.3f", all ? duration * (double)fn->self / (double)all : 0.0);
      fprintf(f, "%10llu %6.2f%% %10llu %6.2f%% %9s  %s\n", (unsigned long long)fn->self,
              pct(fn->self, all), (unsigned long long)fn->total, pct(fn->total, all), secs, text);
    }
    /* hot spots: the largest self shares, whatever the sort */
    if (t.n && o->sort != PP_TABLE_SORT_SELF) {
      sort_key = PP_TABLE_SORT_SELF;
      qsort(t.fns, t.n, sizeof(*t.fns), by_key);
    }
    fprintf(f, "hot spots:");
    for (size_t i = 0; i < t.n && i < 3 && t.fns[i].self; i++) {
      fn_text(p, &t.fns[i], text, sizeof(text));
      fprintf(f, "%s %.1f%% %s", i ? ";" : "", pct(t.fns[i].self, all), text);
    }
    fprintf(f, "%s\n", all ? "" : " none (no samples)");
  }
  free(t.fns);
  free(t.slots);
  if (rc == 0 && ferror(f)) rc = -EIO;
  return rc;
}

int pp_collapsed_write(FILE *f, const struct pp_profile *p, uint32_t only_pid) {
  char frame[1024];
  for (size_t i = 0; i < pp_profile_stack_count(p); i++) {
    const struct pp_stack_rec *s = pp_profile_stack(p, i);
    const uint32_t *ids = pp_profile_stack_frames(p, s);
    if (!s->count || !ids || (only_pid && s->pid != only_pid)) continue;
    uint32_t comm = s->comm;
    if (comm == PP_NO_STR) {
      const struct pp_pid_rec *r = pp_profile_pid(p, s->pid);
      comm = r ? r->comm : PP_NO_STR;
    }
    const char *c = pp_profile_str(p, comm);
    /* ';' splits frames and ' ' the count: neither may come from a name */
    for (; *c; c++)
      fputc(*c == ';' ? ':' : *c == '\n' ? ' ' : *c, f);
    if (comm == PP_NO_STR) fprintf(f, "pid %u", s->pid);
    for (uint32_t k = 0; k < s->nframes; k++) {
      pp_frame_format(p, ids[k], frame, sizeof(frame), true);
      fprintf(f, ";%s", frame);
    }
    fprintf(f, " %llu\n", (unsigned long long)s->count);
  }
  return ferror(f) ? -EIO : 0;
}
