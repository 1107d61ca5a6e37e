/* SPDX-License-Identifier: Apache-2.0 */
/* Binary encoding of a pp_profile (format in profile_codec.h). */
#include "profile_codec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Fixed record sizes on the wire, used to check counts against the bytes
 * left before allocating anything for them. */
#define FRAME_BYTES 16u
#define PID_BYTES (8u * 4u + 8u)
#define STACK_MIN_BYTES (3u * 4u + 8u)
#define COUNTER_BYTES 12u

int pp_profile_encode(const struct pp_profile *p, struct pp_wbuf *b) {
  size_t nstr = pp_profile_str_count(p), nfr = pp_profile_frame_count(p);
  size_t npid = pp_profile_pid_count(p), nst = pp_profile_stack_count(p);
  size_t nctr = pp_profile_counter_count(p);

  /* Size it exactly first: one allocation, and -E2BIG before any copying. */
  uint64_t size = 8 + 5 * 4;
  for (size_t i = 0; i < nstr; i++)
    size += 4 + (uint64_t)pp_profile_str_len(p, (uint32_t)i);
  size += (uint64_t)nfr * FRAME_BYTES + (uint64_t)npid * PID_BYTES;
  for (size_t i = 0; i < nst; i++)
    size += STACK_MIN_BYTES + 4ull * pp_profile_stack(p, i)->nframes;
  size += (uint64_t)nctr * COUNTER_BYTES;
  if (size > SIZE_MAX) return -E2BIG;
  size_t start = b->len;
  if (!pp_wbuf_reserve(b, (size_t)size)) return b->err ? b->err : -ENOMEM;
  b->len = start;

  pp_wbuf_u32(b, PP_CODEC_MAGIC);
  pp_wbuf_u32(b, PP_CODEC_VERSION);

  pp_wbuf_u32(b, (uint32_t)nstr);
  for (size_t i = 0; i < nstr; i++)
    pp_wbuf_strn(b, pp_profile_str(p, (uint32_t)i), pp_profile_str_len(p, (uint32_t)i));

  pp_wbuf_u32(b, (uint32_t)nfr);
  for (size_t i = 0; i < nfr; i++) {
    const struct pp_frame_rec *f = pp_profile_frame(p, (uint32_t)i);
    uint32_t v[4] = {f->name, f->file, f->line, f->kind};
    pp_wbuf_put(b, v, sizeof(v));
  }

  pp_wbuf_u32(b, (uint32_t)npid);
  for (size_t i = 0; i < npid; i++) {
    const struct pp_pid_rec *r = pp_profile_pid_at(p, i);
    uint32_t v[8] = {r->pid,       r->comm,   r->appid,  r->app_meta,
                     r->container, r->status, r->reason, r->app_meta_index};
    pp_wbuf_put(b, v, sizeof(v));
    pp_wbuf_u64(b, r->start_time);
  }

  pp_wbuf_u32(b, (uint32_t)nst);
  for (size_t i = 0; i < nst; i++) {
    const struct pp_stack_rec *s = pp_profile_stack(p, i);
    uint32_t v[3] = {s->pid, s->comm, s->nframes};
    pp_wbuf_put(b, v, sizeof(v));
    pp_wbuf_u64(b, s->count);
    pp_wbuf_put(b, pp_profile_stack_frames(p, s), (size_t)s->nframes * 4);
  }

  pp_wbuf_u32(b, (uint32_t)nctr);
  for (size_t i = 0; i < nctr; i++) {
    const struct pp_counter_rec *c = pp_profile_counter_at(p, i);
    pp_wbuf_u32(b, c->name);
    pp_wbuf_u64(b, c->value);
  }
  return b->err;
}

/* Decoding state: maps from wire ids to ids in the destination. */
struct dec {
  struct pp_rbuf r;
  struct pp_profile *out;
  uint32_t *strmap, nstr;
  uint32_t *framemap, nframe;
};

/* A count that must be followed by at least count * min_bytes bytes. */
static int read_count(struct dec *d, size_t min_bytes, uint32_t *n) {
  *n = pp_rbuf_u32(&d->r);
  if (d->r.err) return -EINVAL;
  if (min_bytes && *n > pp_rbuf_left(&d->r) / min_bytes) return -EINVAL;
  return 0;
}

/* Wire string id -> destination id; `optional` allows PP_NO_STR. */
static int map_str(const struct dec *d, uint32_t id, int optional, uint32_t *out) {
  if (id == PP_NO_STR) {
    if (!optional) return -EINVAL;
    *out = PP_NO_STR;
    return 0;
  }
  if (id >= d->nstr) return -EINVAL;
  *out = d->strmap[id];
  return 0;
}

static int dec_strings(struct dec *d) {
  uint32_t n;
  if (read_count(d, 4, &n)) return -EINVAL;
  d->strmap = malloc(((size_t)n + 1) * sizeof(uint32_t));
  if (!d->strmap) return -ENOMEM;
  for (uint32_t i = 0; i < n; i++) {
    const char *s;
    size_t len;
    if (pp_rbuf_str(&d->r, PP_CODEC_MAX_STR, &s, &len) || !s) return -EINVAL;
    uint32_t id = pp_profile_intern(d->out, s, len);
    if (id == PP_NO_STR) return -ENOMEM;
    d->strmap[i] = id;
  }
  d->nstr = n;
  return 0;
}

static int dec_frames(struct dec *d) {
  uint32_t n;
  if (read_count(d, FRAME_BYTES, &n)) return -EINVAL;
  d->framemap = malloc(((size_t)n + 1) * sizeof(uint32_t));
  if (!d->framemap) return -ENOMEM;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t v[4];
    memcpy(v, pp_rbuf_bytes(&d->r, sizeof(v)), sizeof(v)); /* count was checked */
    uint32_t name, file;
    if (map_str(d, v[0], 0, &name) || map_str(d, v[1], 1, &file)) return -EINVAL;
    if (v[3] >= PP_FRAME_KIND_COUNT) return -EINVAL;
    uint32_t id = pp_profile_intern_frame(d->out, name, file, v[2], v[3]);
    if (id == UINT32_MAX) return -ENOMEM;
    d->framemap[i] = id;
  }
  d->nframe = n;
  return 0;
}

static int dec_pids(struct dec *d) {
  uint32_t n;
  if (read_count(d, PID_BYTES, &n)) return -EINVAL;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t v[8];
    memcpy(v, pp_rbuf_bytes(&d->r, sizeof(v)), sizeof(v));
    uint64_t start_time = pp_rbuf_u64(&d->r);
    uint32_t comm, appid, meta, container, reason;
    if (map_str(d, v[1], 1, &comm) || map_str(d, v[2], 1, &appid) || map_str(d, v[3], 1, &meta) ||
        map_str(d, v[4], 1, &container) || map_str(d, v[6], 1, &reason))
      return -EINVAL;
    if (v[5] > PP_PID_SKIPPED) return -EINVAL;
    struct pp_pid_rec *r = pp_profile_pid_upsert(d->out, v[0]);
    if (!r) return -ENOMEM;
    r->comm = comm;
    r->appid = appid;
    r->app_meta = meta;
    r->container = container;
    r->status = v[5];
    r->reason = reason;
    r->app_meta_index = v[7];
    r->start_time = start_time;
  }
  return 0;
}

static int dec_stacks(struct dec *d) {
  uint32_t n;
  if (read_count(d, STACK_MIN_BYTES, &n)) return -EINVAL;
  /* One scratch array for all stacks: no allocation per stack. */
  uint32_t *ids = malloc(PP_MAX_FRAMES * sizeof(uint32_t));
  if (!ids) return -ENOMEM;
  int rc = 0;
  for (uint32_t i = 0; i < n && !rc; i++) {
    uint32_t v[3];
    const void *hdr = pp_rbuf_bytes(&d->r, sizeof(v));
    uint64_t count = pp_rbuf_u64(&d->r);
    if (!hdr || d->r.err) {
      rc = -EINVAL;
      break;
    }
    memcpy(v, hdr, sizeof(v));
    uint32_t comm;
    if (map_str(d, v[1], 1, &comm) || v[2] > PP_MAX_FRAMES) {
      rc = -EINVAL;
      break;
    }
    const uint8_t *raw = pp_rbuf_bytes(&d->r, (size_t)v[2] * 4);
    if (!raw) {
      rc = -EINVAL;
      break;
    }
    for (uint32_t j = 0; j < v[2]; j++) {
      uint32_t f;
      memcpy(&f, raw + 4 * j, 4);
      if (f >= d->nframe) {
        rc = -EINVAL;
        break;
      }
      ids[j] = d->framemap[f];
    }
    if (!rc) rc = pp_profile_add_stack(d->out, v[0], comm, ids, v[2], count);
  }
  free(ids);
  return rc;
}

static int dec_counters(struct dec *d) {
  uint32_t n;
  if (read_count(d, COUNTER_BYTES, &n)) return -EINVAL;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t name = pp_rbuf_u32(&d->r);
    uint64_t value = pp_rbuf_u64(&d->r);
    uint32_t id;
    if (d->r.err || map_str(d, name, 0, &id)) return -EINVAL;
    int rc = pp_profile_add_counter(d->out, pp_profile_str(d->out, id), value);
    if (rc) return rc;
  }
  return 0;
}

int pp_profile_decode(struct pp_profile *out, const void *buf, size_t len) {
  struct dec d = {.out = out};
  pp_profile_clear(out);
  pp_rbuf_init(&d.r, buf, len);
  int rc = -EINVAL;
  if (pp_rbuf_u32(&d.r) != PP_CODEC_MAGIC || pp_rbuf_u32(&d.r) != PP_CODEC_VERSION) goto out;
  if ((rc = dec_strings(&d)) || (rc = dec_frames(&d)) || (rc = dec_pids(&d)) ||
      (rc = dec_stacks(&d)) || (rc = dec_counters(&d)))
    goto out;
  /* Trailing bytes mean the two sides disagree about the format. */
  rc = pp_rbuf_left(&d.r) ? -EINVAL : 0;
out:
  free(d.strmap);
  free(d.framemap);
  return rc;
}
