/* SPDX-License-Identifier: Apache-2.0 */
/* Protobuf wire writer and bounded reader (see otlp_pb.h). */
#include <stdlib.h>
#include <string.h>

#include "upload/otlp_pb.h"

#define LEN_SLOT 5 /* a varint length of up to 2^35 - 1 */

void pp_pb_free(struct pp_pb *w) {
  free(w->b);
  *w = (struct pp_pb){0};
}

static bool reserve(struct pp_pb *w, size_t more) {
  if (w->oom) return false;
  if (w->cap - w->n >= more) return true;
  size_t cap = w->cap ? w->cap : 4096;
  while (cap - w->n < more) {
    if (cap > SIZE_MAX / 2) {
      w->oom = true;
      return false;
    }
    cap *= 2;
  }
  uint8_t *nb = realloc(w->b, cap);
  if (!nb) {
    w->oom = true;
    return false;
  }
  w->b = nb;
  w->cap = cap;
  return true;
}

static size_t varint_len(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

static void raw_varint(struct pp_pb *w, uint64_t v) {
  if (!reserve(w, 10)) return;
  while (v >= 0x80) {
    w->b[w->n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  w->b[w->n++] = (uint8_t)v;
}

static void tag(struct pp_pb *w, uint32_t field, uint32_t wire) {
  raw_varint(w, (uint64_t)field << 3 | wire);
}

void pp_pb_varint_field(struct pp_pb *w, uint32_t field, uint64_t v) {
  if (!v) return;
  tag(w, field, 0);
  raw_varint(w, v);
}

void pp_pb_varint_always(struct pp_pb *w, uint32_t field, uint64_t v) {
  tag(w, field, 0);
  raw_varint(w, v);
}

void pp_pb_fixed64_field(struct pp_pb *w, uint32_t field, uint64_t v) {
  if (!v) return;
  tag(w, field, 1);
  if (!reserve(w, 8)) return;
  for (int i = 0; i < 8; i++)
    w->b[w->n++] = (uint8_t)(v >> (8 * i));
}

void pp_pb_bytes_field(struct pp_pb *w, uint32_t field, const void *p, size_t len) {
  tag(w, field, 2);
  raw_varint(w, len);
  if (!len || !reserve(w, len)) return;
  memcpy(w->b + w->n, p, len);
  w->n += len;
}

void pp_pb_string_field(struct pp_pb *w, uint32_t field, const char *s) {
  pp_pb_bytes_field(w, field, s, strlen(s));
}

void pp_pb_begin(struct pp_pb *w, uint32_t field) {
  tag(w, field, 2);
  if (w->depth >= PP_PB_MAX_DEPTH) {
    w->oom = true; /* a programming error: fail the whole message */
    return;
  }
  if (!reserve(w, LEN_SLOT)) return;
  w->open[w->depth++] = w->n;
  w->n += LEN_SLOT;
}

void pp_pb_end(struct pp_pb *w) {
  if (w->oom || w->depth <= 0) return;
  size_t slot = w->open[--w->depth];
  size_t body = w->n - slot - LEN_SLOT;
  size_t ll = varint_len(body);
  if (ll > LEN_SLOT) {
    w->oom = true;
    return;
  }
  memmove(w->b + slot + ll, w->b + slot + LEN_SLOT, body);
  uint64_t v = body;
  for (size_t i = 0; i < ll; i++, v >>= 7)
    w->b[slot + i] = (uint8_t)((v & 0x7f) | (i + 1 < ll ? 0x80 : 0));
  w->n = slot + ll + body;
}

void pp_pb_packed_begin(struct pp_pb *w, uint32_t field) {
  pp_pb_begin(w, field);
}

void pp_pb_packed_value(struct pp_pb *w, uint64_t v) {
  raw_varint(w, v);
}

static int read_varint(struct pp_pb_reader *r, uint64_t *v) {
  uint64_t x = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (r->p >= r->end) return -1;
    uint8_t c = *r->p++;
    x |= (uint64_t)(c & 0x7f) << shift;
    if (!(c & 0x80)) {
      *v = x;
      return 0;
    }
  }
  return -1;
}

int pp_pb_read_field(struct pp_pb_reader *r, struct pp_pb_field *f) {
  if (r->p >= r->end) return 0;
  uint64_t key;
  if (read_varint(r, &key) < 0 || key >> 3 == 0 || key >> 3 > UINT32_MAX) return -1;
  *f = (struct pp_pb_field){.number = (uint32_t)(key >> 3), .wire = (uint32_t)(key & 7)};
  switch (f->wire) {
    case 0:
      return read_varint(r, &f->value) < 0 ? -1 : 1;
    case 1:
    case 5: {
      size_t n = f->wire == 1 ? 8 : 4;
      if ((size_t)(r->end - r->p) < n) return -1;
      for (size_t i = 0; i < n; i++)
        f->value |= (uint64_t)r->p[i] << (8 * i);
      r->p += n;
      return 1;
    }
    case 2: {
      uint64_t len;
      if (read_varint(r, &len) < 0 || len > (uint64_t)(r->end - r->p)) return -1;
      f->data = r->p;
      f->len = (size_t)len;
      r->p += len;
      return 1;
    }
    default:
      return -1;
  }
}
