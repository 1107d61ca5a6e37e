/* SPDX-License-Identifier: Apache-2.0 */
/*
 * .col writer (layout: docs/formats.md, docs/gprofiler-compat.md):
 *
 *   # <header json>
 *   <app-meta-idx>;<container>;<comm>;[appid: X;]<root>;...;<leaf> <count>
 *
 * joined by '\n' with no trailing newline, as gProfiler's "\n".join().
 *
 * Output is assembled in one large buffer and handed to stdio in big
 * chunks, and each distinct frame is formatted once per call (frames repeat
 * across stacks far more than they differ), so a 50k-stack profile is
 * mostly memcpy.
 */
#include "output/col.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define OUT_CHUNK (256u * 1024u)
#define FRAME_TEXT_MAX 8192 /* longer frame texts are truncated by pp_frame_format */
#define NO_TEXT UINT32_MAX

struct writer {
  FILE *f;
  char *buf;
  size_t len;
  int err;
  /* formatted frame texts: frame id -> offset/length in `arena` */
  uint32_t *off;
  uint32_t *flen;
  char *arena;
  size_t arena_len, arena_cap;
  char tmp[FRAME_TEXT_MAX];
};

static void flush(struct writer *w) {
  errno = 0;
  if (w->len && !w->err && fwrite(w->buf, 1, w->len, w->f) != w->len) w->err = errno ? errno : EIO;
  w->len = 0;
}

static void put(struct writer *w, const char *s, size_t n) {
  while (n) {
    if (w->len == OUT_CHUNK) flush(w);
    size_t k = OUT_CHUNK - w->len;
    if (k > n) k = n;
    memcpy(w->buf + w->len, s, k);
    w->len += k;
    s += k;
    n -= k;
  }
}

static void putc_(struct writer *w, char c) {
  if (w->len == OUT_CHUNK) flush(w);
  w->buf[w->len++] = c;
}

/* comm, container and appid come from processes and container runtimes;
 * a ';' or newline in them would shift every field of the line. Same
 * replacement as frame texts get. */
static void put_field(struct writer *w, const char *s, size_t n) {
  size_t a = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c != ';' && c != '\n' && c != '\r') continue;
    put(w, s + a, i - a);
    putc_(w, c == ';' ? '|' : ' ');
    a = i + 1;
  }
  put(w, s + a, n - a);
}

static void put_u64(struct writer *w, uint64_t v) {
  char d[24];
  size_t i = sizeof(d);
  do {
    d[--i] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  put(w, d + i, sizeof(d) - i);
}

static int put_frame(struct writer *w, const struct pp_profile *p, uint32_t id) {
  if (w->off[id] == NO_TEXT) {
    size_t n = pp_frame_format(p, id, w->tmp, sizeof(w->tmp), true);
    /* allocated even for an empty first text: NULL + 0 is undefined */
    if (!w->arena || w->arena_len + n > w->arena_cap) {
      size_t cap = w->arena_cap ? w->arena_cap * 2 : 1 << 20;
      while (cap < w->arena_len + n)
        cap *= 2;
      if (cap > UINT32_MAX) return -ENOMEM; /* offsets are 32-bit */
      char *a = realloc(w->arena, cap);
      if (!a) return -ENOMEM;
      w->arena = a;
      w->arena_cap = cap;
    }
    memcpy(w->arena + w->arena_len, w->tmp, n);
    w->off[id] = (uint32_t)w->arena_len;
    w->flen[id] = (uint32_t)n;
    w->arena_len += n;
  }
  put(w, w->arena + w->off[id], w->flen[id]);
  return 0;
}

/* The stack's comm, else its pid's, else what perf script prints for a
 * task whose comm it never saw (":<pid>"), so the line keeps its shape. */
static void put_comm(struct writer *w, const struct pp_profile *p, const struct pp_stack_rec *s,
                     const struct pp_pid_rec *pr) {
  uint32_t c = s->comm != PP_NO_STR ? s->comm : (pr ? pr->comm : PP_NO_STR);
  if (c != PP_NO_STR) {
    put_field(w, pp_profile_str(p, c), pp_profile_str_len(p, c));
    return;
  }
  putc_(w, ':');
  put_u64(w, s->pid);
}

int pp_col_write(FILE *f, const struct pp_profile *merged, const char *header_json,
                 const struct pp_col_opts *opts) {
  static const struct pp_col_opts defaults = {
      .app_metadata_prefix = true, .container_prefix = true, .appids = true};
  if (!opts) opts = &defaults;
  const struct pp_profile *p = merged;
  size_t nframes = pp_profile_frame_count(p);
  struct writer w = {.f = f};
  int rc = -ENOMEM;
  w.buf = malloc(OUT_CHUNK);
  w.off = malloc((nframes ? nframes : 1) * sizeof(uint32_t));
  w.flen = malloc((nframes ? nframes : 1) * sizeof(uint32_t));
  if (!w.buf || !w.off || !w.flen) goto done;
  memset(w.off, 0xff, (nframes ? nframes : 1) * sizeof(uint32_t));

  bool first = true;
  if (header_json) {
    put(&w, "# ", 2);
    put(&w, header_json, strlen(header_json));
    first = false;
  }
  /* Stacks of one pid are usually adjacent: remember the last lookup. */
  uint32_t last_pid = 0;
  const struct pp_pid_rec *pr = NULL;
  bool have_pr = false;
  size_t n = pp_profile_stack_count(p);
  for (size_t i = 0; i < n; i++) {
    const struct pp_stack_rec *s = pp_profile_stack(p, i);
    if (!s->count) continue;
    if (!have_pr || s->pid != last_pid) {
      pr = pp_profile_pid(p, s->pid);
      last_pid = s->pid;
      have_pr = true;
    }
    if (!first) putc_(&w, '\n');
    first = false;
    if (opts->app_metadata_prefix) {
      put_u64(&w, pr ? pr->app_meta_index : 0);
      putc_(&w, ';');
    }
    if (opts->container_prefix) {
      if (pr && pr->container != PP_NO_STR)
        put_field(&w, pp_profile_str(p, pr->container), pp_profile_str_len(p, pr->container));
      putc_(&w, ';');
    }
    put_comm(&w, p, s, pr);
    if (opts->appids && pr && pr->appid != PP_NO_STR) {
      put(&w, ";appid: ", 8);
      put_field(&w, pp_profile_str(p, pr->appid), pp_profile_str_len(p, pr->appid));
    }
    const uint32_t *fr = pp_profile_stack_frames(p, s);
    for (uint32_t k = 0; k < s->nframes; k++) {
      putc_(&w, ';');
      if (fr[k] >= nframes) {
        rc = -EINVAL;
        goto done;
      }
      if ((rc = put_frame(&w, p, fr[k])) < 0) goto done;
    }
    putc_(&w, ' ');
    put_u64(&w, s->count);
  }
  flush(&w);
  errno = 0;
  if (!w.err && fflush(f) != 0) w.err = errno ? errno : EIO;
  rc = w.err ? -w.err : 0;
done:
  free(w.buf);
  free(w.off);
  free(w.flen);
  free(w.arena);
  return rc;
}
