/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The few protobuf wire primitives the OTLP exporter needs, written
 * straight into one growing buffer (no generated code, no text step).
 * A nested message is opened with pp_pb_begin, which leaves room for its
 * length, and closed with pp_pb_end, which writes the length and slides the
 * payload back over the unused room. Out of memory is sticky: every later
 * call is a no-op and pp_pb_failed() says so.
 *
 * pp_pb_read_* walk a received message with every length checked against
 * the bytes that are really there (replies come from the network).
 */
#ifndef PP_UPLOAD_OTLP_PB_H
#define PP_UPLOAD_OTLP_PB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PP_PB_MAX_DEPTH 8

struct pp_pb {
  uint8_t *b;
  size_t n, cap;
  bool oom;
  size_t open[PP_PB_MAX_DEPTH]; /* offsets of the reserved length slots */
  int depth;
};

void pp_pb_free(struct pp_pb *w);
static inline bool pp_pb_failed(const struct pp_pb *w) {
  return w->oom;
}

void pp_pb_varint_field(struct pp_pb *w, uint32_t field, uint64_t v);  /* skipped if 0 */
void pp_pb_varint_always(struct pp_pb *w, uint32_t field, uint64_t v); /* even if 0 (oneof) */
void pp_pb_fixed64_field(struct pp_pb *w, uint32_t field, uint64_t v); /* skipped if 0 */
void pp_pb_bytes_field(struct pp_pb *w, uint32_t field, const void *p, size_t len);
void pp_pb_string_field(struct pp_pb *w, uint32_t field, const char *s); /* written even if "" */
/* A packed repeated varint field from n values (nothing if n == 0). */
void pp_pb_packed_begin(struct pp_pb *w, uint32_t field);
void pp_pb_packed_value(struct pp_pb *w, uint64_t v);
#define pp_pb_packed_end pp_pb_end
/* An embedded message (written even if empty: dictionaries need {} at 0). */
void pp_pb_begin(struct pp_pb *w, uint32_t field);
void pp_pb_end(struct pp_pb *w);

/* Reader. */
struct pp_pb_reader {
  const uint8_t *p, *end;
};
struct pp_pb_field {
  uint32_t number;
  uint32_t wire;       /* 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32 */
  uint64_t value;      /* varint / fixed */
  const uint8_t *data; /* wire 2 */
  size_t len;
};
/* 1 and *f filled, 0 at the end, -1 on malformed input (a length past the
 * end, a varint longer than 10 bytes, an unknown wire type). */
int pp_pb_read_field(struct pp_pb_reader *r, struct pp_pb_field *f);

#endif
