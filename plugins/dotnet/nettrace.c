/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nettrace V4/V5 stream parser. See nettrace.h for the contract and
 * docs/dotnet.md for the format notes this code relies on.
 */
#include "nettrace.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define NT_MAGIC "Nettrace"
#define NT_SERIALIZER "!FastSerialization.1"
#define NT_HEADER_LEN (8 + 4 + 20)

enum { TAG_NULL = 1, TAG_BEGIN_OBJECT = 4, TAG_BEGIN_PRIVATE_OBJECT = 5, TAG_END_OBJECT = 6 };

struct nt_meta {
  uint32_t event_id;
  uint16_t version;
  uint8_t provider;
  uint8_t known; /* defined by a metadata event */
};

struct nt_stack_ref {
  uint32_t off, len;
};

struct dotnet_nt {
  struct dotnet_nt_limits lim;
  dotnet_nt_event_fn fn;
  void *ctx;
  int state;
  const char *error;
  struct dotnet_nt_stats stats;

  uint8_t *buf; /* buffered bytes not yet parsed: buf[0..len) */
  size_t len, cap;
  uint64_t abs; /* stream offset of buf[0]: alignment is absolute */

  uint32_t pointer_size;
  uint64_t qpc_freq, sync_qpc;
  uint32_t expected_sample_ns;
  uint32_t trace_version;

  /* Indexed by metadata id, grown to the highest id seen (ids are dense
   * small integers, a few hundred per stream) up to lim.max_metadata: a
   * table sized for the limit up front and wiped at every stream made
   * 512 KiB resident per session, two sessions per .NET process. */
  struct nt_meta *meta;
  uint32_t meta_cap;

  uint8_t *stack_bytes; /* IPs of the cached stacks */
  uint32_t stack_used;
  struct nt_stack_ref *stacks;
  uint32_t stack_base, nstacks;
};

/* ---- bounded little-endian cursor ------------------------------------- */

struct cur {
  const uint8_t *p, *end;
  bool bad;
};

static bool cur_need(struct cur *c, size_t n) {
  if (c->bad || (size_t)(c->end - c->p) < n) {
    c->bad = true;
    return false;
  }
  return true;
}

static uint8_t rd_u8(struct cur *c) {
  if (!cur_need(c, 1)) return 0;
  return *c->p++;
}

static uint16_t rd_u16(struct cur *c) {
  if (!cur_need(c, 2)) return 0;
  uint16_t v = (uint16_t)(c->p[0] | (c->p[1] << 8));
  c->p += 2;
  return v;
}

static uint32_t rd_u32(struct cur *c) {
  if (!cur_need(c, 4)) return 0;
  uint32_t v = (uint32_t)c->p[0] | ((uint32_t)c->p[1] << 8) | ((uint32_t)c->p[2] << 16) |
               ((uint32_t)c->p[3] << 24);
  c->p += 4;
  return v;
}

static uint64_t rd_u64(struct cur *c) {
  uint64_t lo = rd_u32(c);
  uint64_t hi = rd_u32(c);
  return lo | (hi << 32);
}

/* Unsigned LEB128, at most 10 bytes; overlong encodings are malformed. */
static uint64_t rd_varint(struct cur *c) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 70; shift += 7) {
    uint8_t b = rd_u8(c);
    if (c->bad) return 0;
    v |= (uint64_t)(b & 0x7f) << (shift < 64 ? shift : 63);
    if (!(b & 0x80)) return v;
  }
  c->bad = true;
  return 0;
}

static void skip(struct cur *c, size_t n) {
  if (cur_need(c, n)) c->p += n;
}

/* Skips a NUL-terminated UTF-16 string; false if unterminated. */
static bool skip_utf16z(struct cur *c) {
  while (cur_need(c, 2)) {
    uint16_t u = rd_u16(c);
    if (u == 0) return true;
  }
  return false;
}

long dotnet_utf16z_to_utf8(const uint8_t *src, size_t len, char *out, size_t outcap) {
  size_t o = 0, i = 0;
  if (outcap == 0) return -1;
  for (; i + 1 < len; i += 2) {
    uint32_t u = (uint32_t)src[i] | ((uint32_t)src[i + 1] << 8);
    if (u == 0) {
      out[o] = '\0';
      return (long)(i + 2);
    }
    if (u >= 0xd800 && u <= 0xdbff && i + 3 < len) {
      uint32_t lo = (uint32_t)src[i + 2] | ((uint32_t)src[i + 3] << 8);
      if (lo >= 0xdc00 && lo <= 0xdfff) {
        u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
        i += 2;
      } else {
        u = '?';
      }
    } else if (u >= 0xd800 && u <= 0xdfff) {
      u = '?';
    }
    char tmp[4];
    size_t n;
    if (u < 0x80) {
      tmp[0] = (char)u;
      n = 1;
    } else if (u < 0x800) {
      tmp[0] = (char)(0xc0 | (u >> 6));
      tmp[1] = (char)(0x80 | (u & 0x3f));
      n = 2;
    } else if (u < 0x10000) {
      tmp[0] = (char)(0xe0 | (u >> 12));
      tmp[1] = (char)(0x80 | ((u >> 6) & 0x3f));
      tmp[2] = (char)(0x80 | (u & 0x3f));
      n = 3;
    } else {
      tmp[0] = (char)(0xf0 | (u >> 18));
      tmp[1] = (char)(0x80 | ((u >> 12) & 0x3f));
      tmp[2] = (char)(0x80 | ((u >> 6) & 0x3f));
      tmp[3] = (char)(0x80 | (u & 0x3f));
      n = 4;
    }
    /* truncate on a character boundary; keep scanning for the NUL */
    if (o + n < outcap) {
      memcpy(out + o, tmp, n);
      o += n;
    }
  }
  out[o] = '\0';
  return -1;
}

/* ---- lifecycle -------------------------------------------------------- */

struct dotnet_nt *dotnet_nt_new(const struct dotnet_nt_limits *lim, dotnet_nt_event_fn fn,
                                void *ctx) {
  struct dotnet_nt *p = calloc(1, sizeof(*p));
  if (!p) return NULL;
  p->lim = *lim;
  if (p->lim.max_block < 4096) p->lim.max_block = 4096;
  if (p->lim.max_metadata < 16) p->lim.max_metadata = 16;
  if (p->lim.max_stacks < 16) p->lim.max_stacks = 16;
  if (p->lim.max_stack_bytes < 4096) p->lim.max_stack_bytes = 4096;
  p->fn = fn;
  p->ctx = ctx;
  p->cap = 64 * 1024;
  p->buf = malloc(p->cap);
  p->stack_bytes = malloc(p->lim.max_stack_bytes);
  p->stacks = malloc((size_t)p->lim.max_stacks * sizeof(*p->stacks));
  if (!p->buf || !p->stack_bytes || !p->stacks) {
    dotnet_nt_free(p);
    return NULL;
  }
  dotnet_nt_reset(p);
  return p;
}

void dotnet_nt_reset(struct dotnet_nt *p) {
  p->state = DOTNET_NT_HEADER;
  p->error = NULL;
  memset(&p->stats, 0, sizeof(p->stats));
  p->len = 0;
  p->abs = 0;
  p->pointer_size = 8;
  p->qpc_freq = p->sync_qpc = 0;
  p->expected_sample_ns = 0;
  if (p->meta) memset(p->meta, 0, p->meta_cap * sizeof(*p->meta));
  p->stack_used = p->nstacks = p->stack_base = 0;
}

void dotnet_nt_free(struct dotnet_nt *p) {
  if (!p) return;
  free(p->buf);
  free(p->meta);
  free(p->stack_bytes);
  free(p->stacks);
  free(p);
}

int dotnet_nt_state(const struct dotnet_nt *p) {
  return p->state;
}
const char *dotnet_nt_error(const struct dotnet_nt *p) {
  return p->error ? p->error : "";
}
const struct dotnet_nt_stats *dotnet_nt_stats(const struct dotnet_nt *p) {
  return &p->stats;
}
uint32_t dotnet_nt_pointer_size(const struct dotnet_nt *p) {
  return p->pointer_size;
}
uint64_t dotnet_nt_qpc_frequency(const struct dotnet_nt *p) {
  return p->qpc_freq;
}
uint64_t dotnet_nt_sync_qpc(const struct dotnet_nt *p) {
  return p->sync_qpc;
}
uint32_t dotnet_nt_expected_sample_ns(const struct dotnet_nt *p) {
  return p->expected_sample_ns;
}

static void fail(struct dotnet_nt *p, const char *why) {
  p->state = DOTNET_NT_ERROR;
  p->error = why;
}

/* ---- blocks ----------------------------------------------------------- */

static const char *const provider_names[] = {
    [DOTNET_PROV_SAMPLE_PROFILER] = "Microsoft-DotNETCore-SampleProfiler",
    [DOTNET_PROV_RUNTIME] = "Microsoft-Windows-DotNETRuntime",
    [DOTNET_PROV_RUNDOWN] = "Microsoft-Windows-DotNETRuntimeRundown",
};

/* Makes room for metadata id `id` (< lim.max_metadata). Metadata events
 * come once per event type, not per sample, so growing here is rare. */
static int meta_grow(struct dotnet_nt *p, uint32_t id) {
  uint64_t ncap = p->meta_cap ? p->meta_cap : 256;
  while (ncap <= id)
    ncap *= 2;
  if (ncap > p->lim.max_metadata) ncap = p->lim.max_metadata;
  struct nt_meta *g = realloc(p->meta, (size_t)ncap * sizeof(*g));
  if (!g) return -ENOMEM;
  memset(g + p->meta_cap, 0, (size_t)(ncap - p->meta_cap) * sizeof(*g));
  p->meta = g;
  p->meta_cap = (uint32_t)ncap;
  return 0;
}

static void define_metadata(struct dotnet_nt *p, const uint8_t *payload, uint32_t len) {
  struct cur c = {payload, payload + len, false};
  uint32_t id = rd_u32(&c);
  char provider[64];
  long used = dotnet_utf16z_to_utf8(c.p, (size_t)(c.end - c.p), provider, sizeof(provider));
  if (c.bad || used < 0) {
    p->stats.bad_events++;
    return;
  }
  c.p += used;
  uint32_t event_id = rd_u32(&c);
  if (!skip_utf16z(&c)) {
    p->stats.bad_events++;
    return;
  }
  rd_u64(&c); /* keywords */
  uint32_t version = rd_u32(&c);
  if (c.bad) {
    p->stats.bad_events++;
    return;
  }
  p->stats.metadata++;
  if (id == 0 || id >= p->lim.max_metadata) return; /* not tracked: events stay anonymous */
  if (id >= p->meta_cap && meta_grow(p, id) < 0) return;
  uint8_t prov = DOTNET_PROV_OTHER;
  for (uint8_t i = 1; i < sizeof(provider_names) / sizeof(provider_names[0]); i++)
    if (strcmp(provider, provider_names[i]) == 0) prov = i;
  p->meta[id] = (struct nt_meta){
      .event_id = event_id, .version = (uint16_t)version, .provider = prov, .known = 1};
}

/* Decodes one EventBlock or MetadataBlock body. */
static void parse_event_block(struct dotnet_nt *p, const uint8_t *body, uint32_t size,
                              uint64_t body_abs, bool metadata) {
  struct cur c = {body, body + size, false};
  uint16_t header_size = rd_u16(&c);
  uint16_t flags = rd_u16(&c);
  if (c.bad || header_size < 4 || header_size > size) {
    p->stats.bad_events++;
    return;
  }
  c.p = body + header_size;
  bool compressed = flags & 1;
  /* compressed-header state, reset at each block */
  uint32_t meta_id = 0, stack_id = 0, payload_size = 0;
  uint64_t thread_id = 0, ts = 0;

  while (c.p < c.end && !c.bad) {
    const uint8_t *payload;
    if (compressed) {
      uint8_t f = rd_u8(&c);
      if (f & 1) meta_id = (uint32_t)rd_varint(&c);
      if (f & 2) {
        rd_varint(&c); /* sequence delta */
        rd_varint(&c); /* capture thread id */
        rd_varint(&c); /* processor number */
      }
      if (f & 4) thread_id = rd_varint(&c);
      if (f & 8) stack_id = (uint32_t)rd_varint(&c);
      ts += rd_varint(&c);
      if (f & 16) skip(&c, 16);
      if (f & 32) skip(&c, 16);
      if (f & 128) payload_size = (uint32_t)rd_varint(&c);
      if (c.bad || payload_size > (size_t)(c.end - c.p)) break;
      payload = c.p;
      c.p += payload_size;
    } else {
      rd_u32(&c); /* event size */
      meta_id = rd_u32(&c) & 0x7fffffffu;
      rd_u32(&c); /* sequence */
      thread_id = rd_u64(&c);
      rd_u64(&c); /* capture thread id */
      rd_u32(&c); /* processor */
      stack_id = rd_u32(&c);
      ts = rd_u64(&c);
      skip(&c, 32); /* activity ids */
      payload_size = rd_u32(&c);
      if (c.bad || payload_size > (size_t)(c.end - c.p)) break;
      payload = c.p;
      c.p += payload_size;
      /* uncompressed events are padded to 4 bytes of the stream offset */
      uint64_t off = body_abs + (uint64_t)(c.p - body);
      size_t pad = (size_t)((4 - off % 4) % 4);
      if ((size_t)(c.end - c.p) < pad) break;
      c.p += pad;
    }
    if (metadata || meta_id == 0) {
      define_metadata(p, payload, payload_size);
      continue;
    }
    p->stats.events++;
    if (meta_id >= p->meta_cap || !p->meta[meta_id].known) continue;
    const struct nt_meta *m = &p->meta[meta_id];
    if (m->provider == DOTNET_PROV_OTHER) continue;
    struct dotnet_nt_event ev = {.provider = m->provider,
                                 .event_id = m->event_id,
                                 .version = m->version,
                                 .stack_id = stack_id,
                                 .thread_id = thread_id,
                                 .timestamp = ts,
                                 .payload = payload,
                                 .payload_len = payload_size};
    if (p->fn) p->fn(p->ctx, &ev);
  }
  if (c.bad || c.p != c.end) p->stats.bad_events++;
}

static void flush_stacks(struct dotnet_nt *p) {
  p->stack_used = p->nstacks = 0;
}

static void parse_stack_block(struct dotnet_nt *p, const uint8_t *body, uint32_t size) {
  struct cur c = {body, body + size, false};
  uint32_t first = rd_u32(&c);
  uint32_t count = rd_u32(&c);
  if (c.bad) return;
  /* ids are consecutive between sequence points; a jump starts over */
  if (p->nstacks == 0 || first != p->stack_base + p->nstacks) {
    flush_stacks(p);
    p->stack_base = first;
  }
  for (uint32_t i = 0; i < count && !c.bad; i++) {
    uint32_t len = rd_u32(&c);
    if (!cur_need(&c, len)) break;
    if (p->nstacks < p->lim.max_stacks && len <= p->lim.max_stack_bytes - p->stack_used) {
      memcpy(p->stack_bytes + p->stack_used, c.p, len);
      p->stacks[p->nstacks++] = (struct nt_stack_ref){p->stack_used, len};
      p->stack_used += len;
      p->stats.stacks++;
    } else {
      /* cache full: later ids cannot be placed, so stop caching this window */
      p->stats.dropped_stacks += count - i;
      break;
    }
    c.p += len;
  }
}

int dotnet_nt_stack(const struct dotnet_nt *p, uint32_t stack_id, const uint8_t **ips,
                    uint32_t *nbytes) {
  if (stack_id < p->stack_base || stack_id - p->stack_base >= p->nstacks) return 0;
  const struct nt_stack_ref *r = &p->stacks[stack_id - p->stack_base];
  *ips = p->stack_bytes + r->off;
  *nbytes = r->len;
  return 1;
}

/* ---- top level -------------------------------------------------------- */

enum { NEED_MORE = 1 };

/* Parses the object at buf[0]; returns 0 (consumed *used), NEED_MORE or -1. */
static int parse_object(struct dotnet_nt *p, size_t *used) {
  struct cur c = {p->buf, p->buf + p->len, false};
  uint8_t tag = rd_u8(&c);
  if (c.bad) return NEED_MORE;
  if (tag == TAG_NULL) {
    p->state = DOTNET_NT_END;
    *used = 1;
    return 0;
  }
  if (tag != TAG_BEGIN_PRIVATE_OBJECT && tag != TAG_BEGIN_OBJECT) {
    fail(p, "unexpected tag at top level");
    return -1;
  }
  /* type descriptor: BeginPrivateObject NullReference version minVersion name EndObject */
  uint8_t t1 = rd_u8(&c), t2 = rd_u8(&c);
  int32_t version = (int32_t)rd_u32(&c);
  int32_t min_reader = (int32_t)rd_u32(&c);
  uint32_t name_len = rd_u32(&c);
  if (c.bad) return NEED_MORE;
  if ((t1 != TAG_BEGIN_PRIVATE_OBJECT && t1 != TAG_BEGIN_OBJECT) || t2 != TAG_NULL) {
    fail(p, "malformed type descriptor");
    return -1;
  }
  if (name_len == 0 || name_len > 64) {
    fail(p, "bad type name length");
    return -1;
  }
  if (!cur_need(&c, name_len + 1)) return NEED_MORE;
  char name[65];
  memcpy(name, c.p, name_len);
  name[name_len] = '\0';
  c.p += name_len;
  if (rd_u8(&c) != TAG_END_OBJECT) {
    fail(p, "type descriptor not closed");
    return -1;
  }
  (void)version;
  if (strcmp(name, "Trace") == 0) {
    if (min_reader > 5) {
      fail(p, "unsupported nettrace version (newer than V5)");
      return -1;
    }
    p->trace_version = (uint32_t)version;
    skip(&c, 16); /* SyncTimeUTC */
    p->sync_qpc = rd_u64(&c);
    p->qpc_freq = rd_u64(&c);
    p->pointer_size = rd_u32(&c);
    rd_u32(&c); /* process id */
    rd_u32(&c); /* processors */
    p->expected_sample_ns = rd_u32(&c);
    uint8_t end = rd_u8(&c);
    if (c.bad) return NEED_MORE;
    if (end != TAG_END_OBJECT || (p->pointer_size != 4 && p->pointer_size != 8)) {
      fail(p, "malformed Trace object");
      return -1;
    }
    *used = (size_t)(c.p - p->buf);
    return 0;
  }
  /* every other V4 object is block shaped: size, padding, body, EndObject */
  uint32_t size = rd_u32(&c);
  if (c.bad) return NEED_MORE;
  if (size > p->lim.max_block) {
    fail(p, "block larger than the configured cap");
    return -1;
  }
  uint64_t off = p->abs + (uint64_t)(c.p - p->buf);
  size_t pad = (size_t)((4 - off % 4) % 4);
  if (!cur_need(&c, pad + (size_t)size + 1)) return NEED_MORE;
  c.p += pad;
  const uint8_t *body = c.p;
  uint64_t body_abs = p->abs + (uint64_t)(body - p->buf);
  c.p += size;
  if (rd_u8(&c) != TAG_END_OBJECT) {
    fail(p, "block not closed");
    return -1;
  }
  p->stats.blocks++;
  if (strcmp(name, "EventBlock") == 0)
    parse_event_block(p, body, size, body_abs, false);
  else if (strcmp(name, "MetadataBlock") == 0)
    parse_event_block(p, body, size, body_abs, true);
  else if (strcmp(name, "StackBlock") == 0)
    parse_stack_block(p, body, size);
  else if (strcmp(name, "SPBlock") == 0) {
    p->stats.sequence_points++;
    flush_stacks(p);
  } else
    p->stats.unknown_objects++;
  *used = (size_t)(c.p - p->buf);
  return 0;
}

static void parse_buffered(struct dotnet_nt *p) {
  size_t pos = 0;
  if (p->state == DOTNET_NT_HEADER) {
    if (p->len < NT_HEADER_LEN) return;
    if (memcmp(p->buf, NT_MAGIC, 8) != 0 || p->buf[8] != 20 || p->buf[9] || p->buf[10] ||
        p->buf[11] || memcmp(p->buf + 12, NT_SERIALIZER, 20) != 0) {
      fail(p, "not a nettrace V4/V5 stream (bad magic)");
      return;
    }
    p->state = DOTNET_NT_OBJECTS;
    pos = NT_HEADER_LEN;
  }
  while (p->state == DOTNET_NT_OBJECTS && pos < p->len) {
    /* parse_object works on buf[0..): slide the window (cheap: the parsed
     * prefix is dropped once per call below, not per object) */
    uint8_t *save_buf = p->buf;
    size_t save_len = p->len;
    uint64_t save_abs = p->abs;
    p->buf += pos;
    p->len -= pos;
    p->abs += pos;
    size_t used = 0;
    int r = parse_object(p, &used);
    p->buf = save_buf;
    p->len = save_len;
    p->abs = save_abs;
    if (r != 0) break;
    pos += used;
  }
  if (p->state == DOTNET_NT_ERROR) {
    p->len = 0;
    return;
  }
  if (pos) {
    memmove(p->buf, p->buf + pos, p->len - pos);
    p->len -= pos;
    p->abs += pos;
  }
}

uint8_t *dotnet_nt_space(struct dotnet_nt *p, size_t *room) {
  if (p->state == DOTNET_NT_ERROR || p->state == DOTNET_NT_END) return NULL;
  /* the buffer holds at most one object: the largest block plus framing */
  size_t limit = (size_t)p->lim.max_block + 256;
  if (p->cap - p->len < 16 * 1024 && p->cap < limit) {
    size_t ncap = p->cap * 2 > limit ? limit : p->cap * 2;
    uint8_t *n = realloc(p->buf, ncap);
    if (n) {
      p->buf = n;
      p->cap = ncap;
    }
  }
  if (p->len >= p->cap) {
    fail(p, "object larger than the buffer cap");
    return NULL;
  }
  *room = p->cap - p->len;
  return p->buf + p->len;
}

int dotnet_nt_commit(struct dotnet_nt *p, size_t n) {
  if (p->state == DOTNET_NT_ERROR || p->state == DOTNET_NT_END) return p->state;
  if (n > p->cap - p->len) n = p->cap - p->len;
  p->len += n;
  p->stats.bytes += n;
  parse_buffered(p);
  return p->state;
}

int dotnet_nt_feed(struct dotnet_nt *p, const void *data, size_t n) {
  const uint8_t *d = data;
  while (n > 0) {
    size_t room = 0;
    uint8_t *dst = dotnet_nt_space(p, &room);
    if (!dst) break;
    size_t k = n < room ? n : room;
    memcpy(dst, d, k);
    dotnet_nt_commit(p, k);
    d += k;
    n -= k;
  }
  return p->state;
}
