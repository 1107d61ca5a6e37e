/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A plugin's configuration on the wire (host.h): the core sends it with
 * INIT, so a worker process needs nothing of the agent's configuration code
 * and keeps no pointer into the agent's memory.
 *
 *   str plugin | str mode | u32 enabled | u32 count |
 *   count * (str key | u32 type | str scalar | u32 n or PP_WIRE_NULL | n * str item)
 *
 * The caps below bound what a corrupt message can make the worker allocate
 * long before the message size cap does.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "host.h"

#define MAX_OPTIONS 1024
#define MAX_ITEMS 65536
#define MAX_KEY 256
#define MAX_VALUE (64u << 10)

void pp_host_config_encode(struct pp_wbuf *b, const struct pp_host_config *c) {
  pp_wbuf_str(b, c->plugin);
  pp_wbuf_str(b, c->mode);
  pp_wbuf_u32(b, c->enabled ? 1 : 0);
  pp_wbuf_u32(b, (uint32_t)c->count);
  for (size_t i = 0; i < c->count; i++) {
    const struct pp_host_option *o = &c->options[i];
    pp_wbuf_str(b, o->key);
    pp_wbuf_u32(b, o->type);
    pp_wbuf_str(b, o->scalar);
    if (!o->items) {
      pp_wbuf_u32(b, PP_WIRE_NULL);
      continue;
    }
    pp_wbuf_u32(b, (uint32_t)o->item_count);
    for (size_t k = 0; k < o->item_count; k++)
      pp_wbuf_str(b, o->items[k]);
  }
}

static int decode_items(struct pp_rbuf *r, struct pp_host_option *o) {
  uint32_t n = pp_rbuf_u32(r);
  if (r->err) return -EINVAL;
  if (n == PP_WIRE_NULL) return 0;
  /* Every item takes at least its 4-byte length: a count the rest of the
   * message cannot hold is a lie, refused before allocating for it. */
  if (n > MAX_ITEMS || n > pp_rbuf_left(r) / 4) return -EINVAL;
  o->items = calloc((size_t)n + 1, sizeof(*o->items));
  if (!o->items) return -ENOMEM;
  for (uint32_t k = 0; k < n; k++) {
    int rc = pp_rbuf_strdup(r, MAX_VALUE, true, &o->items[k]);
    if (rc) return rc;
    o->item_count = k + 1;
  }
  return 0;
}

int pp_host_config_decode(struct pp_rbuf *r, struct pp_host_config *out) {
  memset(out, 0, sizeof(*out));
  int rc = pp_rbuf_strdup(r, MAX_KEY, true, &out->plugin);
  if (!rc) rc = pp_rbuf_strdup(r, MAX_VALUE, false, &out->mode);
  if (rc) goto fail;
  uint32_t enabled = pp_rbuf_u32(r), count = pp_rbuf_u32(r);
  /* key length + type + scalar length + item count: 16 bytes at least */
  if (r->err || enabled > 1 || count > MAX_OPTIONS || count > pp_rbuf_left(r) / 16) {
    rc = -EINVAL;
    goto fail;
  }
  out->enabled = enabled;
  if (count && !(out->options = calloc(count, sizeof(*out->options)))) {
    rc = -ENOMEM;
    goto fail;
  }
  for (uint32_t i = 0; i < count; i++) {
    struct pp_host_option *o = &out->options[i];
    out->count = i + 1; /* so a failure frees what this one holds so far */
    if ((rc = pp_rbuf_strdup(r, MAX_KEY, true, &o->key))) goto fail;
    o->type = pp_rbuf_u32(r);
    if ((rc = pp_rbuf_strdup(r, MAX_VALUE, false, &o->scalar))) goto fail;
    if ((rc = decode_items(r, o))) goto fail;
  }
  if (r->err) {
    rc = -EINVAL;
    goto fail;
  }
  return 0;
fail:
  pp_host_config_free(out);
  return rc == -ENOMEM ? -ENOMEM : -EINVAL;
}
