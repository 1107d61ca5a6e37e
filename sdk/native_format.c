/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NativeFormat decoding. See native_format.h. Integers: the low bits of
 * the first byte say how many bytes follow (x0: none, 7 value bits; x01:
 * one, 14 bits; x011: two, 21 bits; x0111: three, 28 bits; x01111: a
 * 32-bit value in the next four bytes). A NativeArray is a header
 * (count << 2 | index size), an index of one offset per block of 16
 * elements, and per block a small binary tree walked with the index's
 * bits. A NativeHashtable is a header byte (log2 buckets << 2 | index
 * size), bucket offsets (one more than buckets), and per bucket entries of
 * a low hash byte and a signed offset relative to itself.
 */
#include "native_format.h"

#define NF_BLOCK 16u

static bool in(const struct nf_reader *r, uint32_t off, uint32_t len) {
  return off >= r->base && (uint64_t)off - r->base + len <= r->size;
}

static const uint8_t *at(const struct nf_reader *r, uint32_t off) {
  return r->data + (off - r->base);
}

bool nf_unsigned(const struct nf_reader *r, uint32_t *off, uint32_t *v) {
  if (!in(r, *off, 1)) return false;
  const uint8_t *p = at(r, *off);
  uint32_t b = p[0];
  unsigned n;
  if ((b & 1) == 0) {
    *v = b >> 1;
    n = 1;
  } else if ((b & 2) == 0) {
    if (!in(r, *off, 2)) return false;
    *v = (b >> 2) | ((uint32_t)p[1] << 6);
    n = 2;
  } else if ((b & 4) == 0) {
    if (!in(r, *off, 3)) return false;
    *v = (b >> 3) | ((uint32_t)p[1] << 5) | ((uint32_t)p[2] << 13);
    n = 3;
  } else if ((b & 8) == 0) {
    if (!in(r, *off, 4)) return false;
    *v = (b >> 4) | ((uint32_t)p[1] << 4) | ((uint32_t)p[2] << 12) | ((uint32_t)p[3] << 20);
    n = 4;
  } else if ((b & 16) == 0) {
    if (!in(r, *off, 5)) return false;
    *v = (uint32_t)p[1] | ((uint32_t)p[2] << 8) | ((uint32_t)p[3] << 16) | ((uint32_t)p[4] << 24);
    n = 5;
  } else {
    return false;
  }
  *off += n;
  return true;
}

bool nf_signed(const struct nf_reader *r, uint32_t *off, int32_t *v) {
  uint32_t start = *off, u;
  if (!nf_unsigned(r, off, &u)) return false;
  unsigned n = *off - start;
  /* the same layout, sign-extended from the value's bit width */
  if (n == 5) {
    *v = (int32_t)u;
  } else {
    unsigned bits = 7 * n;
    uint32_t sign = 1u << (bits - 1);
    *v = (int32_t)((u ^ sign) - sign);
  }
  return true;
}

static bool read_index(const struct nf_reader *r, uint32_t off, unsigned size, uint32_t *v) {
  unsigned n = size == 0 ? 1 : size == 1 ? 2 : 4;
  if (!in(r, off, n)) return false;
  const uint8_t *p = at(r, off);
  *v = p[0];
  if (n >= 2) *v |= (uint32_t)p[1] << 8;
  if (n == 4) *v |= ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
  return true;
}

bool nf_array_open(const struct nf_reader *r, uint32_t off, struct nf_array *a) {
  uint32_t v;
  if (!nf_unsigned(r, &off, &v)) return false;
  a->r = r;
  a->base = off;
  a->count = v >> 2;
  a->index_size = (uint8_t)(v & 3);
  return a->index_size <= 2;
}

bool nf_array_get(const struct nf_array *a, uint32_t index, uint32_t *out) {
  if (index >= a->count) return false;
  unsigned width = a->index_size == 0 ? 1 : a->index_size == 1 ? 2 : 4;
  uint64_t slot = (uint64_t)a->base + (uint64_t)width * (index / NF_BLOCK);
  uint32_t rel;
  if (slot > UINT32_MAX || !read_index(a->r, (uint32_t)slot, a->index_size, &rel)) return false;
  uint64_t off64 = (uint64_t)a->base + rel;
  if (off64 > UINT32_MAX) return false;
  uint32_t off = (uint32_t)off64;
  for (uint32_t bit = NF_BLOCK >> 1; bit > 0; bit >>= 1) {
    uint32_t next = off, v;
    if (!nf_unsigned(a->r, &next, &v)) return false;
    if (index & bit) {
      if (v & 2) {
        /* a forward jump: the tree only points ahead */
        if ((v >> 2) == 0 || (uint64_t)off + (v >> 2) > UINT32_MAX) return false;
        off += v >> 2;
        continue;
      }
    } else if (v & 1) {
      off = next;
      continue;
    }
    /* a leaf of this block holding one element: is it ours? */
    if ((v & 3) == 0 && (v >> 2) == (index & (NF_BLOCK - 1))) {
      off = next;
      *out = off;
      return true;
    }
    return false;
  }
  *out = off;
  return true;
}

bool nf_hashtable_open(const struct nf_reader *r, uint32_t off, struct nf_hashtable *h) {
  if (!in(r, off, 1)) return false;
  uint8_t header = *at(r, off);
  unsigned shift = header >> 2;
  if (shift > 24 || (header & 3) > 2) return false; /* 16M buckets is past any real image */
  h->r = r;
  h->base = off + 1;
  h->bucket_mask = (1u << shift) - 1;
  h->index_size = header & 3;
  return true;
}

long nf_hashtable_each(const struct nf_hashtable *h, size_t max_entries,
                       bool (*fn)(void *ctx, uint32_t entry_off), void *ctx) {
  unsigned width = h->index_size == 0 ? 1 : h->index_size == 1 ? 2 : 4;
  long seen = 0;
  for (uint64_t b = 0; b <= h->bucket_mask; b++) {
    uint64_t slot = h->base + width * b;
    uint32_t start, end;
    if (slot + width > UINT32_MAX || !read_index(h->r, (uint32_t)slot, h->index_size, &start) ||
        !read_index(h->r, (uint32_t)(slot + width), h->index_size, &end))
      return -1;
    uint64_t off = (uint64_t)h->base + start, stop = (uint64_t)h->base + end;
    if (stop > UINT32_MAX || off > stop) return -1;
    while (off < stop) {
      uint32_t o = (uint32_t)off + 1; /* the low hash byte */
      uint32_t rel_at = o;
      int32_t delta;
      if (!in(h->r, (uint32_t)off, 1) || !nf_signed(h->r, &o, &delta)) return -1;
      int64_t entry = (int64_t)rel_at + delta;
      if (entry < 0 || entry > UINT32_MAX) return -1;
      if ((size_t)seen >= max_entries) return seen;
      seen++;
      if (!fn(ctx, (uint32_t)entry)) return seen;
      off = o;
    }
  }
  return seen;
}

bool nf_method_entry(const struct nf_reader *r, uint32_t off, uint32_t *runtime_function) {
  uint32_t id;
  if (!nf_unsigned(r, &off, &id)) return false;
  /* bit 0: a fixup list follows (bit 1: reached through a backward
   * offset); the code's index is above those bits */
  *runtime_function = (id & 1) ? id >> 2 : id >> 1;
  return true;
}
