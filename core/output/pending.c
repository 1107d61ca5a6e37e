/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bounded in-memory backlog of session files the output directory refused
 * (see pending.h for why memory and what the guarantees are).
 */
#include "output/pending.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kept {
  char stem[64];
  char ext[24];
  char link[48]; /* "" = no link */
  char *data;
  size_t len;
};

struct pp_pending {
  struct kept *v; /* oldest first */
  size_t n, cap_entries;
  size_t bytes, cap_bytes;
  char last_err[512]; /* why the directory refused the last write */
};

struct pp_pending *pp_pending_new(size_t cap_bytes) {
  struct pp_pending *p = calloc(1, sizeof(*p));
  if (p) p->cap_bytes = cap_bytes;
  return p;
}

void pp_pending_set_cap(struct pp_pending *p, size_t cap_bytes) {
  if (p) p->cap_bytes = cap_bytes;
}

void pp_pending_free(struct pp_pending *p) {
  if (!p) return;
  for (size_t i = 0; i < p->n; i++)
    free(p->v[i].data);
  free(p->v);
  free(p);
}

size_t pp_pending_count(const struct pp_pending *p) {
  return p ? p->n : 0;
}

size_t pp_pending_bytes(const struct pp_pending *p) {
  return p ? p->bytes : 0;
}

size_t pp_pending_sessions(const struct pp_pending *p) {
  size_t s = 0;
  for (size_t i = 0; p && i < p->n; i++)
    s += i == 0 || strcmp(p->v[i].stem, p->v[i - 1].stem) != 0;
  return s;
}

static void drop_at(struct pp_pending *p, size_t i) {
  p->bytes -= p->v[i].len;
  free(p->v[i].data);
  memmove(&p->v[i], &p->v[i + 1], (p->n - i - 1) * sizeof(p->v[0]));
  p->n--;
}

struct buf_ctx {
  const char *data;
  size_t len;
};

static int write_buf(FILE *f, void *vctx) {
  const struct buf_ctx *b = vctx;
  if (!b->len) return 0;
  errno = 0;
  if (fwrite(b->data, 1, b->len, f) == b->len) return 0;
  return errno ? -errno : -EIO; /* ENOSPC, EDQUOT: say which */
}

/* The bytes fn writes, in a malloc'd buffer (open_memstream). */
static int render(pp_output_write_fn fn, void *ctx, char **out, size_t *len) {
  char *data = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&data, &n);
  if (!f) return -errno;
  int rc = fn(f, ctx);
  if (fclose(f) != 0 && rc == 0) rc = -ENOMEM;
  if (rc != 0) {
    free(data);
    return rc < 0 ? rc : -EIO;
  }
  *out = data;
  *len = n;
  return 0;
}

static int keep(struct pp_pending *p, const char *stem, const char *ext, const char *link_name,
                bool rotating, char *data, size_t len, size_t *dropped) {
  if (len > p->cap_bytes) {
    free(data);
    return -EFBIG;
  }
  /* With rotation only the newest file of each kind is ever kept on disk:
   * an older pending one would be written just to be deleted. */
  for (size_t i = 0; rotating && i < p->n;) {
    if (strcmp(p->v[i].ext, ext) == 0) {
      drop_at(p, i);
      (*dropped)++;
    } else {
      i++;
    }
  }
  while (p->n && p->bytes + len > p->cap_bytes) {
    drop_at(p, 0);
    (*dropped)++;
  }
  if (p->n == p->cap_entries) {
    size_t nc = p->cap_entries ? p->cap_entries * 2 : 8;
    struct kept *nv = realloc(p->v, nc * sizeof(*nv));
    if (!nv) {
      free(data);
      return -ENOMEM;
    }
    p->v = nv;
    p->cap_entries = nc;
  }
  struct kept *k = &p->v[p->n];
  memset(k, 0, sizeof(*k));
  snprintf(k->stem, sizeof(k->stem), "%s", stem);
  snprintf(k->ext, sizeof(k->ext), "%s", ext ? ext : "");
  snprintf(k->link, sizeof(k->link), "%s", link_name ? link_name : "");
  k->data = data;
  k->len = len;
  p->bytes += len;
  p->n++;
  return 0;
}

int pp_pending_publish(struct pp_pending *p, const char *dir, const char *stem, const char *ext,
                       const char *link_name, bool rotating, pp_output_write_fn fn, void *ctx,
                       size_t *dropped, char *err, size_t errlen) {
  size_t dummy = 0;
  if (!dropped) dropped = &dummy;
  *dropped = 0;
  if (err && errlen) err[0] = '\0';
  if (!p || p->n == 0) {
    int rc = pp_output_publish(dir, stem, ext, link_name, rotating, fn, ctx, err, errlen);
    if (rc == 0 || !p || p->cap_bytes == 0 || rc == -EINVAL || rc == -ENAMETOOLONG) return rc;
    if (err) snprintf(p->last_err, sizeof(p->last_err), "%s", err);
  } else if (err && errlen) {
    /* the flush of the older ones just failed: that is the reason */
    snprintf(err, errlen, "%s", p->last_err[0] ? p->last_err : "older files still waiting");
  }
  /* name checks were done by the first attempt (or will be at flush) */
  if (strlen(stem) >= sizeof(p->v[0].stem) || (ext && strlen(ext) >= sizeof(p->v[0].ext)) ||
      (link_name && strlen(link_name) >= sizeof(p->v[0].link)))
    return -ENAMETOOLONG;
  char *data = NULL;
  size_t len = 0;
  int rc = render(fn, ctx, &data, &len);
  if (rc < 0) return rc;
  rc = keep(p, stem, ext, link_name, rotating, data, len, dropped);
  return rc < 0 ? rc : 1;
}

int pp_pending_flush(struct pp_pending *p, const char *dir, bool rotating, char *err,
                     size_t errlen) {
  int written = 0;
  while (p && p->n) {
    struct kept *k = &p->v[0];
    struct buf_ctx b = {.data = k->data, .len = k->len};
    int rc = pp_output_publish(dir, k->stem, k->ext, k->link[0] ? k->link : NULL, rotating,
                               write_buf, &b, err, errlen);
    if (rc < 0) {
      if (err) snprintf(p->last_err, sizeof(p->last_err), "%s", err);
      return written ? written : rc;
    }
    drop_at(p, 0);
    written++;
  }
  return written;
}
