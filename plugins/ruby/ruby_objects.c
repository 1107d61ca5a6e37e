/*
 * Decoding Ruby heap objects read from another process: String and Array
 * (reference php-ruby-remote.md §5.1, §5.2), the pc -> line table (§5.4) and
 * method names through the global symbol table (§4 step 8). Every length and
 * index comes from the target and is bounded here before use.
 */
#include <errno.h>
#include <string.h>

#include "ruby.h"
#include "support/remote.h"

#define T_MASK 0x1fu
#define T_STRING 0x05u
#define T_ARRAY 0x07u
#define FL_USER1 (1ull << 13)        /* RSTRING_NOEMBED, RARRAY_EMBED_FLAG */
#define QNIL 0x08ull                 /* with flonum, every 64-bit build since 2.0 */
#define RVALUE_HEAD 40               /* the smallest slot: always readable */
#define ARRAY_MAX_LEN (1ull << 28)   /* no id table or path pair is larger */
#define LINES_MAX_ENTRIES (1u << 22) /* iseq instruction count bound */
#define SUCC_IMM_ENTRIES 54          /* IMMEDIATE_TABLE_SIZE */
#define SUCC_BLOCK_BYTES 80          /* {u32 rank; u64 small_block_ranks; u64 bits[8]} */

static inline uint64_t rd64(const unsigned char *p) {
  uint64_t v;
  memcpy(&v, p, sizeof(v));
  return v;
}
static inline uint32_t rd32(const unsigned char *p) {
  uint32_t v;
  memcpy(&v, p, sizeof(v));
  return v;
}

static bool plausible_ptr(uint64_t a) {
  return a >= 4096 && a < (1ull << 47) && (a & 7) == 0;
}

int ruby_read_string(const struct ruby_target *t, uint64_t value, char *buf, size_t cap) {
  if (cap < 2 || !plausible_ptr(value)) return -EINVAL;
  unsigned char h[RVALUE_HEAD];
  int rc = pp_remote_read((pid_t)t->pid, value, h, sizeof(h));
  if (rc < 0) return rc;
  uint64_t flags = rd64(h);
  if ((flags & T_MASK) != T_STRING) return -EINVAL;
  uint64_t len;
  const unsigned char *inline_chars = NULL;
  size_t inline_avail = 0;
  uint64_t src = 0;
  if (t->L->string_kind == RUBY_STR_FLAGS_LEN) {
    if (flags & FL_USER1) {
      len = rd64(h + 16);
      src = rd64(h + 24);
    } else {
      len = (flags >> 14) & 0x1f;
      inline_chars = h + 16;
      inline_avail = 24;
      if (len > inline_avail) return -EINVAL;
    }
  } else {
    len = rd64(h + 16);
    if (flags & FL_USER1) {
      src = rd64(h + 24);
    } else {
      /* variable-width slots: the chars continue past the first 40 bytes */
      inline_chars = h + 24;
      inline_avail = 16;
      src = value + 24;
    }
  }
  if (len > (1u << 20)) return -EINVAL; /* rbspy's bound: a label is never 1 MB */
  size_t n = len < cap - 1 ? (size_t)len : cap - 1;
  if (inline_chars && n <= inline_avail) {
    memcpy(buf, inline_chars, n);
  } else {
    if (!src || src < 4096) return -EINVAL;
    rc = pp_remote_read((pid_t)t->pid, src, buf, n);
    if (rc < 0) return rc;
  }
  buf[n] = '\0';
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)buf[i];
    if (c == 0) {
      n = i; /* labels and paths never hold NUL: stop at a torn tail */
      buf[n] = '\0';
      break;
    }
    if (c < 0x20 || c == 0x7f) buf[i] = '?';
  }
  return (int)n;
}

int ruby_array_at(const struct ruby_target *t, uint64_t value, uint64_t i, uint64_t *out) {
  if (!plausible_ptr(value)) return -EINVAL;
  unsigned char h[RVALUE_HEAD];
  int rc = pp_remote_read((pid_t)t->pid, value, h, sizeof(h));
  if (rc < 0) return rc;
  uint64_t flags = rd64(h);
  if ((flags & T_MASK) != T_ARRAY) return -EINVAL;
  uint64_t len, base;
  if (flags & FL_USER1) {
    len = (flags >> 15) & 0x7f;
    base = value + 16;
  } else {
    len = rd64(h + 16);
    base = rd64(h + 32);
    if (len > ARRAY_MAX_LEN || !plausible_ptr(base)) return -EINVAL;
  }
  if (i >= len) return -ERANGE;
  return pp_remote_read((pid_t)t->pid, base + 8 * i, out, sizeof(*out));
}

/* Index (1-based) of the insn-info entry for an instruction position, from
 * Ruby's succinct bit-vector (iseq.c succ_index_lookup). */
static int succ_lookup(const struct ruby_target *t, uint64_t table, uint64_t pos, uint64_t *idx) {
  if (pos < SUCC_IMM_ENTRIES) {
    uint64_t word;
    int rc = pp_remote_read((pid_t)t->pid, table + 8 * (pos / 9), &word, sizeof(word));
    if (rc < 0) return rc;
    *idx = (word >> (7 * (pos % 9))) & 0x7f;
    return 0;
  }
  uint64_t b = (pos - SUCC_IMM_ENTRIES) / 512, k = (pos - SUCC_IMM_ENTRIES) % 512, s = k / 64;
  unsigned char blk[SUCC_BLOCK_BYTES];
  int rc = pp_remote_read((pid_t)t->pid, table + 48 + SUCC_BLOCK_BYTES * b, blk, sizeof(blk));
  if (rc < 0) return rc;
  uint32_t rank = rd32(blk);
  uint64_t small_ranks = rd64(blk + 8);
  uint64_t bits = rd64(blk + 16 + 8 * s);
  uint64_t small = s == 0 ? 0 : (small_ranks >> (9 * (s - 1))) & 0x1ff;
  *idx = rank + small + (uint64_t)__builtin_popcountll(bits << (63 - k % 64));
  return 0;
}

uint32_t ruby_line_of(const struct ruby_target *t, const unsigned char *body, size_t body_len,
                      uint64_t pc) {
  const struct ruby_layout *L = t->L;
  size_t need = (size_t)L->ii_size + 4;
  if (L->ii_succ >= 0 && (size_t)L->ii_succ + 8 > need) need = (size_t)L->ii_succ + 8;
  if (body_len < need) return 0;
  uint32_t iseq_size = rd32(body + 4);
  uint64_t encoded = rd64(body + 8);
  uint64_t entries = rd64(body + L->ii_body);
  uint32_t size = rd32(body + L->ii_size);
  if (!pc || pc < encoded || !plausible_ptr(entries) || size == 0 || size > LINES_MAX_ENTRIES)
    return 0;
  uint64_t pos = (pc - encoded) / 8;
  if (pos > iseq_size) return 0;
  if (pos > 0) pos--; /* pc points past the instruction being run (calc_pos) */
  int32_t line = 0;
  uint64_t idx = 0;
  if (L->line_kind == RUBY_LINES_POSITIONS) {
    /* 2.5: last entry whose position is <= pos; read in small chunks */
    unsigned char chunk[12 * 64];
    uint64_t found = 0;
    bool have = false;
    for (uint32_t i = 0; i < size; i += 64) {
      uint32_t n = size - i < 64 ? size - i : 64;
      if (pp_remote_read((pid_t)t->pid, entries + (uint64_t)i * 12, chunk, n * 12ull) < 0) return 0;
      bool past = false;
      for (uint32_t j = 0; j < n; j++) {
        uint32_t p = rd32(chunk + 12 * j);
        if (p > pos) {
          past = true;
          break;
        }
        found = i + j;
        have = true;
      }
      if (past) break;
    }
    if (!have) return 0;
    idx = found + 1;
  } else if (size == 1) {
    idx = 1;
  } else {
    uint64_t table = rd64(body + L->ii_succ);
    if (!plausible_ptr(table) || succ_lookup(t, table, pos, &idx) < 0) return 0;
    if (idx == 0 || idx > size) return 0;
  }
  if (pp_remote_read((pid_t)t->pid,
                     entries + (idx - 1) * (uint64_t)L->ii_entry_size + (uint64_t)L->ii_entry_line,
                     &line, sizeof(line)) < 0)
    return 0;
  return line > 0 ? (uint32_t)line : 0;
}

int ruby_id_name(const struct ruby_target *t, uint64_t id, char *buf, size_t cap) {
  if (!t->global_symbols) return -ENOENT;
  unsigned char gs[24];
  int rc = pp_remote_read((pid_t)t->pid, t->global_symbols, gs, sizeof(gs));
  if (rc < 0) return rc;
  uint32_t last_id = rd32(gs);
  uint64_t ids = rd64(gs + 16);
  uint64_t serial = id > (uint64_t)t->L->last_op_id ? id >> 4 : id;
  if (serial == 0 || serial > last_id) return -ERANGE;
  uint64_t chunk, str;
  rc = ruby_array_at(t, ids, serial / 512, &chunk);
  if (rc < 0) return rc;
  rc = ruby_array_at(t, chunk, (serial % 512) * 2, &str);
  if (rc < 0) return rc;
  if (str == QNIL || str == 0) return -ENOENT;
  return ruby_read_string(t, str, buf, cap);
}
