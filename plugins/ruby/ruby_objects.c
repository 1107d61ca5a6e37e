/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Decoding Ruby heap objects read from another process: String and Array
 * (RString / RArray of each layout), the pc -> line table of an iseq and
 * method names through the global symbol table (rb_id2str's path, as rbspy
 * reads it). Every length and
 * index comes from the target and is bounded here before use.
 */
#include <errno.h>
#include <string.h>

#include "polyprof/kit/remote.h"
#include "ruby.h"

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
  uint64_t flags = ruby_rd64(h);
  if ((flags & T_MASK) != T_STRING) return -EINVAL;
  uint64_t len;
  const unsigned char *inline_chars = NULL;
  size_t inline_avail = 0;
  uint64_t src = 0;
  if (t->L->string_kind == RUBY_STR_FLAGS_LEN) {
    if (flags & FL_USER1) {
      len = ruby_rd64(h + 16);
      src = ruby_rd64(h + 24);
    } else {
      len = (flags >> 14) & 0x1f;
      inline_chars = h + 16;
      inline_avail = 24;
      if (len > inline_avail) return -EINVAL;
    }
  } else {
    len = ruby_rd64(h + 16);
    if (flags & FL_USER1) {
      src = ruby_rd64(h + 24);
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
  uint64_t flags = ruby_rd64(h);
  if ((flags & T_MASK) != T_ARRAY) return -EINVAL;
  uint64_t len, base;
  if (flags & FL_USER1) {
    len = (flags >> 15) & 0x7f;
    base = value + 16;
  } else {
    len = ruby_rd64(h + 16);
    base = ruby_rd64(h + 32);
    if (len > ARRAY_MAX_LEN || !plausible_ptr(base)) return -EINVAL;
  }
  if (i >= len) return -ERANGE;
  return pp_remote_read((pid_t)t->pid, base + 8 * i, out, sizeof(*out));
}

bool ruby_lines_parse(const struct ruby_target *t, const unsigned char *body, size_t body_len,
                      struct ruby_lines *out) {
  const struct ruby_layout *L = t->L;
  memset(out, 0, sizeof(*out));
  if (body_len < (size_t)L->first_lineno + 8) return false;
  int64_t first = (int64_t)ruby_rd64(body + L->first_lineno);
  if (L->first_lineno_value)
    first >>= 1;
  else
    first = (int32_t)first;
  if (first > 0 && first < (1 << 30)) out->first_line = (uint32_t)first;
  size_t need = (size_t)L->ii_size + 4;
  if (L->ii_succ >= 0 && (size_t)L->ii_succ + 8 > need) need = (size_t)L->ii_succ + 8;
  if (body_len < need) return false;
  out->iseq_size = rd32(body + 4);
  out->encoded = ruby_rd64(body + 8);
  out->entries = ruby_rd64(body + L->ii_body);
  out->nentries = rd32(body + L->ii_size);
  out->succ = L->ii_succ >= 0 ? ruby_rd64(body + L->ii_succ) : 0;
  if (!plausible_ptr(out->entries) || out->nentries == 0 || out->nentries > LINES_MAX_ENTRIES ||
      !out->encoded) {
    out->nentries = 0; /* no table: every pc falls back to the first line */
    return false;
  }
  return true;
}

bool ruby_lines_has(const struct ruby_lines *ln, uint64_t pc) {
  return pc >= ln->encoded && (pc - ln->encoded) / 8 <= ln->iseq_size;
}

int64_t ruby_lines_pos(const struct ruby_lines *ln, uint64_t pc) {
  if (!pc || !ln->nentries || !ruby_lines_has(ln, pc)) return -1;
  uint64_t pos = (pc - ln->encoded) / 8;
  return pos > 0 ? (int64_t)pos - 1 : 0; /* pc points past the insn being run (calc_pos) */
}

void ruby_lines_succ_read(const struct ruby_lines *ln, uint64_t pos, uint64_t *addr,
                          uint32_t *len) {
  *addr = 0;
  *len = 0;
  if (ln->nentries == 1) return; /* entry 1, nothing to read */
  if (!plausible_ptr(ln->succ)) return;
  if (pos < SUCC_IMM_ENTRIES) {
    *addr = ln->succ + 8 * (pos / 9);
    *len = 8;
  } else {
    *addr = ln->succ + 48 + SUCC_BLOCK_BYTES * ((pos - SUCC_IMM_ENTRIES) / 512);
    *len = SUCC_BLOCK_BYTES;
  }
}

/* Index (1-based) of the insn-info entry for an instruction position, from
 * Ruby's succinct bit-vector (iseq.c succ_index_lookup), out of the bytes
 * ruby_lines_succ_read said to read. 0 if invalid. */
uint64_t ruby_lines_succ_index(const struct ruby_lines *ln, uint64_t pos, const unsigned char *buf,
                               uint32_t len) {
  uint64_t idx;
  if (ln->nentries == 1) {
    idx = 1;
  } else if (pos < SUCC_IMM_ENTRIES) {
    if (len < 8) return 0;
    idx = (ruby_rd64(buf) >> (7 * (pos % 9))) & 0x7f;
  } else {
    if (len < SUCC_BLOCK_BYTES) return 0;
    uint64_t k = (pos - SUCC_IMM_ENTRIES) % 512, s = k / 64;
    uint32_t rank = rd32(buf);
    uint64_t small_ranks = ruby_rd64(buf + 8);
    uint64_t bits = ruby_rd64(buf + 16 + 8 * s);
    uint64_t small = s == 0 ? 0 : (small_ranks >> (9 * (s - 1))) & 0x1ff;
    idx = rank + small + (uint64_t)__builtin_popcountll(bits << (63 - k % 64));
  }
  return idx >= 1 && idx <= ln->nentries ? idx : 0;
}

uint64_t ruby_lines_entry_line(const struct ruby_target *t, const struct ruby_lines *ln,
                               uint64_t idx) {
  if (idx == 0 || idx > ln->nentries) return 0;
  return ln->entries + (idx - 1) * (uint64_t)t->L->ii_entry_size + (uint64_t)t->L->ii_entry_line;
}

/* 2.5: last entry whose position is <= pos; read in small chunks */
static uint64_t positions_index(const struct ruby_target *t, const struct ruby_lines *ln,
                                uint64_t pos) {
  unsigned char chunk[12 * 64];
  uint64_t found = 0;
  bool have = false;
  for (uint32_t i = 0; i < ln->nentries; i += 64) {
    uint32_t n = ln->nentries - i < 64 ? ln->nentries - i : 64;
    if (pp_remote_read((pid_t)t->pid, ln->entries + (uint64_t)i * 12, chunk, n * 12ull) < 0)
      return 0;
    for (uint32_t j = 0; j < n; j++) {
      if (rd32(chunk + 12 * j) > pos) return have ? found + 1 : 0;
      found = i + j;
      have = true;
    }
  }
  return have ? found + 1 : 0;
}

uint32_t ruby_lines_lookup(const struct ruby_target *t, const struct ruby_lines *ln, uint64_t pc) {
  int64_t pos = ruby_lines_pos(ln, pc);
  if (pos < 0) return 0;
  uint64_t idx;
  if (t->L->line_kind == RUBY_LINES_POSITIONS) {
    idx = positions_index(t, ln, (uint64_t)pos);
  } else {
    uint64_t addr;
    uint32_t len;
    unsigned char buf[SUCC_BLOCK_BYTES];
    ruby_lines_succ_read(ln, (uint64_t)pos, &addr, &len);
    if (ln->nentries != 1 && (!len || pp_remote_read((pid_t)t->pid, addr, buf, len) < 0)) return 0;
    idx = ruby_lines_succ_index(ln, (uint64_t)pos, buf, len);
  }
  uint64_t at = ruby_lines_entry_line(t, ln, idx);
  int32_t line = 0;
  if (!at || pp_remote_read((pid_t)t->pid, at, &line, sizeof(line)) < 0) return 0;
  return line > 0 ? (uint32_t)line : 0;
}

uint32_t ruby_line_of(const struct ruby_target *t, const unsigned char *body, size_t body_len,
                      uint64_t pc) {
  struct ruby_lines ln;
  if (!ruby_lines_parse(t, body, body_len, &ln)) return 0;
  return ruby_lines_lookup(t, &ln, pc);
}

int ruby_id_name(const struct ruby_target *t, uint64_t id, char *buf, size_t cap) {
  if (!t->global_symbols) return -ENOENT;
  unsigned char gs[24];
  int rc = pp_remote_read((pid_t)t->pid, t->global_symbols, gs, sizeof(gs));
  if (rc < 0) return rc;
  uint32_t last_id = rd32(gs);
  uint64_t ids = ruby_rd64(gs + 16);
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
