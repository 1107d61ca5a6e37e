/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inlined functions of an optimized frame (see v8_inline.h).
 *
 * Every object here is read from a process that runs on: a length is
 * checked against a cap before it sizes a read, an index against the
 * count it indexes, and the inlining chain must strictly decrease (a cycle
 * or a forward link ends it). What does not check out yields no inlined
 * frame; the frame itself is still reported.
 */
#include "v8_inline.h"

#include <string.h>

#include "polyprof/kit/remote.h"
#include "v8_heap.h"

#define CACHE_ENTRIES 16
#define MAX_TABLE (16u << 10) /* bytes of source position table cached */
#define MAX_POSITIONS 256     /* inlining positions per Code */
#define POSITION_SIZE 16      /* struct InliningPosition: u64 position, i32 id, pad */
#define INLINING_ID_SHIFT 31  /* SourcePosition: external 1, offset 30, inlining id 16 */
#define CODE_HEADER_READ 80

struct code_tables {
  uint32_t pid;
  uint64_t code, start;
  uint32_t size;
  uint32_t used;
  int32_t kind;  /* the Code's kind */
  int nsfi;      /* inlined function literals; 0: nothing inlined (cached too) */
  int npos;      /* inlining positions */
  uint32_t tlen; /* source position table bytes */
  uint64_t sfi[V8_MAX_INLINED];
  uint8_t pos[MAX_POSITIONS * POSITION_SIZE];
  uint8_t table[MAX_TABLE];
};

static struct code_tables cache[CACHE_ENTRIES];
static uint32_t clock_;

static uint64_t word(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

static int read_uvlq(const uint8_t *t, size_t len, size_t *at, uint64_t *out) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (*at >= len) return -1;
    uint8_t b = t[(*at)++];
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return 0;
    }
  }
  return -1;
}

static int read_vlq(const uint8_t *t, size_t len, size_t *at, int64_t *out) {
  uint64_t u;
  if (read_uvlq(t, len, at, &u) < 0) return -1;
  *out = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
  return 0;
}

int64_t v8_position_at(const uint8_t *table, size_t len, uint64_t off) {
  /* entries are (code offset, source position) deltas from (-1, 0); a
   * negative code delta marks a statement position and stands for
   * -(delta + 1). Code offsets fit 32 bits (a larger delta is malformed);
   * positions are bit fields, added modulo 2^64 as V8 does. */
  int64_t code = -1;
  uint64_t pos = 0;
  size_t at = 0;
  while (at < len) {
    int64_t dc, dp;
    if (read_vlq(table, len, &at, &dc) < 0) return -1;
    if (dc < -(INT64_C(1) << 32) || dc > (INT64_C(1) << 32)) return -1;
    code += dc >= 0 ? dc : -(dc + 1);
    if (code > (int64_t)off || code > (INT64_C(1) << 40)) break;
    if (read_vlq(table, len, &at, &dp) < 0) return -1;
    pos += (uint64_t)dp;
  }
  return (int64_t)(pos & ~(UINT64_C(1) << 63));
}

/* A fixed array's or byte array's length (a Smi after the map). */
static int array_length(uint32_t pid, const struct v8_layout *L, uint64_t arr, uint64_t *n) {
  uint64_t w;
  if (!v8_is_heap(arr) ||
      pp_remote_read((pid_t)pid, arr - 1 + (uint64_t)L->fixed_array_length, &w, 8) < 0 ||
      !v8_is_smi(w) || v8_smi(L, w) < 0)
    return -1;
  *n = (uint64_t)v8_smi(L, w);
  return 0;
}

/* A deoptimization literal that names a function: a SharedFunctionInfo,
 * or (V8 13) a wrapper holding one in its first field. 0 if neither. */
static uint64_t literal_sfi(uint32_t pid, const struct v8_layout *L, uint64_t lit) {
  uint16_t t;
  if (!v8_is_heap(lit) || v8_type_of(pid, L, lit, &t) < 0) return 0;
  if (t == L->type_sfi) return lit;
  if (L->type_sfi_wrapper < 0 || t != L->type_sfi_wrapper) return 0;
  uint64_t in;
  if (pp_remote_read((pid_t)pid, lit - 1 + 8, &in, 8) < 0 || v8_type_of(pid, L, in, &t) < 0 ||
      t != L->type_sfi)
    return 0;
  return in;
}

/* Reads the tables of code into e. 0, or -1 (nothing usable). */
static int fill(uint32_t pid, const struct v8_layout *L, uint64_t code, const uint8_t *hdr,
                struct code_tables *e) {
  e->nsfi = e->npos = 0;
  e->tlen = 0;
  uint16_t t;
  if (v8_type_of(pid, L, code, &t) < 0 || t != L->type_code) return -1;
  uint64_t deopt = word(hdr + L->code_deopt), table = word(hdr + L->code_positions);
  uint64_t n;
  /* the deoptimization data: a fixed array of Smis and pointers */
  int top = L->deopt_inlining_positions;
  if (L->deopt_literals > top) top = L->deopt_literals;
  if (L->deopt_inlined_count > top) top = L->deopt_inlined_count;
  if (array_length(pid, L, deopt, &n) < 0) return -1;
  if (n <= (uint64_t)top) return 0; /* empty: nothing was inlined (or not optimized code) */
  uint64_t slots[32];
  if (pp_remote_read((pid_t)pid, deopt - 1 + (uint64_t)L->fixed_array_data, slots,
                     (size_t)(top + 1) * 8) < 0)
    return -1;
  uint64_t cw = slots[L->deopt_inlined_count];
  if (!v8_is_smi(cw) || v8_smi(L, cw) < 0) return -1;
  int64_t count = v8_smi(L, cw);
  if (count == 0) return 0;
  if (count > V8_MAX_INLINED) return -1;
  /* the literals: the first `count` are the inlined functions */
  uint64_t lits = slots[L->deopt_literals], ln;
  if (array_length(pid, L, lits, &ln) < 0 || ln < (uint64_t)count) return -1;
  uint64_t raw[V8_MAX_INLINED];
  if (pp_remote_read((pid_t)pid, lits - 1 + (uint64_t)L->fixed_array_data, raw, (size_t)count * 8) <
      0)
    return -1;
  for (int64_t i = 0; i < count; i++)
    e->sfi[i] = literal_sfi(pid, L, raw[i]);
  /* the inlining positions: a byte array of 16-byte records */
  uint64_t positions = slots[L->deopt_inlining_positions], pn;
  if (array_length(pid, L, positions, &pn) < 0 || pn % POSITION_SIZE || pn > sizeof(e->pos))
    return -1;
  if (pn && pp_remote_read((pid_t)pid, positions - 1 + (uint64_t)L->fixed_array_data, e->pos,
                           (size_t)pn) < 0)
    return -1;
  /* the source position table */
  uint64_t tn;
  if (array_length(pid, L, table, &tn) < 0 || tn > MAX_TABLE) return -1;
  if (tn && pp_remote_read((pid_t)pid, table - 1 + (uint64_t)L->fixed_array_data, e->table,
                           (size_t)tn) < 0)
    return -1;
  e->nsfi = (int)count;
  e->npos = (int)(pn / POSITION_SIZE);
  e->tlen = (uint32_t)tn;
  return 0;
}

/* The Code header fields: instruction start and size; returns the kind. */
static int32_t code_fields(const struct v8_layout *L, uint64_t code, const uint8_t *hdr,
                           uint64_t *start, uint32_t *size) {
  uint32_t flags;
  memcpy(&flags, hdr + L->code_flags, 4);
  memcpy(size, hdr + L->code_size, 4);
  *start = L->code_start_field >= 0 ? word(hdr + L->code_start_field)
                                    : code - 1 + (uint64_t)L->code_header_size;
  return (int32_t)((flags >> L->code_kind_shift) & (uint32_t)L->code_kind_mask);
}

/* The tier of a code kind: the kind after the interpreter's is baseline
 * (Sparkplug), the two after it optimized (Maglev, TurboFan; V8 10 has
 * TurboFan alone there). */
static int tier_of(const struct v8_layout *L, int32_t kind) {
  if (kind == L->code_kind_baseline) return V8_TIER_BASELINE;
  if (kind > L->code_kind_baseline && kind <= L->code_kind_baseline + 2) return V8_TIER_OPTIMIZED;
  return V8_TIER_OTHER;
}

static int read_header(uint32_t pid, uint64_t code, uint8_t *hdr);

int v8_code_tier(uint32_t pid, const struct v8_layout *L, uint64_t code) {
  uint8_t hdr[CODE_HEADER_READ];
  uint64_t start;
  uint32_t size;
  uint16_t t;
  if (!L->inline_ok || read_header(pid, code, hdr) < 0 || v8_type_of(pid, L, code, &t) < 0 ||
      t != L->type_code)
    return V8_TIER_UNKNOWN;
  return tier_of(L, code_fields(L, code, hdr, &start, &size));
}

static int read_header(uint32_t pid, uint64_t code, uint8_t *hdr) {
  return v8_is_heap(code) ? pp_remote_read((pid_t)pid, code - 1, hdr, CODE_HEADER_READ) : -1;
}

/* The map of instruction containers (the InstructionStream, or the Code
 * itself in V8 10) per process, once learnt: every container has it. */
#define MAPS 16
static struct {
  uint32_t pid;
  uint64_t map;
} maps[MAPS];
static unsigned next_map;

static uint64_t known_map(uint32_t pid) {
  for (int i = 0; i < MAPS; i++)
    if (maps[i].pid == pid && maps[i].map) return maps[i].map;
  return 0;
}

static void learn_map(uint32_t pid, uint64_t map) {
  maps[next_map % MAPS].pid = pid;
  maps[next_map % MAPS].map = map;
  next_map++;
}

/* Whether map (a tagged pointer) is a map of instance type want. */
static int map_is(uint32_t pid, const struct v8_layout *L, uint64_t map, uint16_t want) {
  uint16_t t;
  return v8_is_heap(map) &&
         pp_remote_read((pid_t)pid, map - 1 + (uint64_t)L->map_instance_type, &t, 2) == 0 &&
         t == want;
}

/* The Code whose instructions hold pc, found by address: on-stack
 * replacement runs a loop in optimized code that is never installed on
 * the function, a deoptimized function's frames still run their old code,
 * and V8 13 reaches a function's code through a dispatch table rather than
 * a field. Instructions follow their container's header at a 32-byte
 * aligned address: scanning down from pc, the first aligned word that is
 * the container map (learnt from the function's current code, or by
 * checking the instance type of the first few map-like words) starts the
 * container that holds pc, or pc is in no heap code. 0 if not found. */
#define SCAN_CHUNK 4096
#define SCAN_MAX (64u << 10)
#define MAP_PROBES 32
static uint64_t code_by_pc(uint32_t pid, const struct v8_layout *L, uint64_t fcode,
                           const uint8_t *fhdr, uint64_t pc, uint8_t *hdr) {
  int inline_insns = L->code_header_size > 0;
  uint64_t hs = (uint64_t)(inline_insns ? L->code_header_size : L->istream_header_size);
  uint16_t ctype = (uint16_t)(inline_insns ? L->type_code : L->type_istream);
  uint64_t map = known_map(pid);
  if (!map && fhdr) {
    uint64_t fstart, m;
    uint32_t fsize;
    code_fields(L, fcode, fhdr, &fstart, &fsize);
    if (fstart >= hs && pp_remote_read((pid_t)pid, fstart - hs, &m, 8) == 0 &&
        map_is(pid, L, m, ctype)) {
      map = m;
      learn_map(pid, map);
    }
  }
  int probes = map ? 0 : MAP_PROBES;
  static uint64_t buf[SCAN_CHUNK / 8];
  if (pc < hs + SCAN_CHUNK) return 0;
  uint64_t top = (pc - hs) & ~(uint64_t)31; /* the highest container start */
  /* page by page downwards, the first one read up to top only: code at
   * the start of a mapping has nothing readable below its page */
  uint64_t hi = top + 32;
  for (uint64_t done = 0; done < SCAN_MAX && hi > SCAN_CHUNK; done += SCAN_CHUNK) {
    uint64_t lo = (hi - 1) & ~(uint64_t)(SCAN_CHUNK - 1);
    size_t len = (size_t)(hi - lo);
    hi = lo;
    if (pp_remote_read((pid_t)pid, lo, buf, len) < 0) return 0;
    for (int i = (int)(len / 8) - 4; i >= 0; i -= 4) {
      if (!map) {
        if (!v8_is_heap(buf[i]) || probes == 0) continue;
        probes--;
        if (!map_is(pid, L, buf[i], ctype)) continue;
        map = buf[i];
        learn_map(pid, map);
      } else if (buf[i] != map) {
        continue;
      }
      uint64_t container = lo + (uint64_t)i * 8;
      uint64_t code = container + 1;
      uint16_t t;
      if (!inline_insns && pp_remote_read((pid_t)pid, container + 8, &code, 8) < 0) return 0;
      if (read_header(pid, code, hdr) < 0 || v8_type_of(pid, L, code, &t) < 0 || t != L->type_code)
        return 0;
      uint64_t start;
      uint32_t size;
      code_fields(L, code, hdr, &start, &size);
      /* the nearest container below pc is the one that holds it, or none */
      return start == container + hs && pc >= start && pc - start < size ? code : 0;
    }
  }
  return 0;
}

/* The cached tables whose instructions hold pc, re-checked against their
 * Code (it may have been freed and its space reused). */
static struct code_tables *cached_at(uint32_t pid, const struct v8_layout *L, uint64_t pc) {
  for (int i = 0; i < CACHE_ENTRIES; i++) {
    struct code_tables *e = &cache[i];
    if (!e->code || e->pid != pid || pc < e->start || pc - e->start >= e->size) continue;
    uint8_t hdr[CODE_HEADER_READ];
    uint64_t start;
    uint32_t size;
    if (read_header(pid, e->code, hdr) < 0 ||
        code_fields(L, e->code, hdr, &start, &size) != e->kind || start != e->start ||
        size != e->size) {
      e->code = 0;
      return NULL;
    }
    e->used = ++clock_;
    return e;
  }
  return NULL;
}

static struct code_tables *tables_for(uint32_t pid, const struct v8_layout *L, uint64_t fcode,
                                      uint64_t pc) {
  struct code_tables *e = cached_at(pid, L, pc);
  if (e) return e;
  uint8_t fhdr[CODE_HEADER_READ], hdr[CODE_HEADER_READ];
  uint64_t start = 0, code = fcode;
  uint32_t size = 0;
  int32_t kind = 0;
  /* no code field (V8 13 has a dispatch handle there): by address */
  int have_f = L->jsfunction_code >= 0 && read_header(pid, fcode, fhdr) == 0;
  if (have_f) kind = code_fields(L, fcode, fhdr, &start, &size);
  if (have_f && pc >= start && pc - start < size) {
    memcpy(hdr, fhdr, sizeof(hdr));
  } else {
    code = code_by_pc(pid, L, fcode, have_f ? fhdr : NULL, pc, hdr);
    if (!code) return NULL;
    kind = code_fields(L, code, hdr, &start, &size);
  }
  struct code_tables *victim = &cache[0];
  for (int i = 1; i < CACHE_ENTRIES; i++)
    if (cache[i].used < victim->used) victim = &cache[i];
  victim->code = 0;
  /* interpreted or baseline code inlines nothing: only its kind is kept */
  if (tier_of(L, kind) != V8_TIER_OPTIMIZED)
    victim->nsfi = victim->npos = 0, victim->tlen = 0;
  else if (fill(pid, L, code, hdr, victim) < 0)
    return NULL;
  victim->kind = kind;
  victim->pid = pid;
  victim->code = code;
  victim->start = start;
  victim->size = size;
  victim->used = ++clock_;
  return victim;
}

int v8_inlined_at(uint32_t pid, const struct v8_layout *L, uint64_t code, uint64_t pc,
                  int is_return, uint64_t *sfis, int max, int *tier) {
  *tier = V8_TIER_UNKNOWN;
  if (!L->inline_ok || max <= 0) return 0;
  int32_t last = L->code_size > L->code_flags ? L->code_size : L->code_flags;
  if (L->code_start_field > last) last = L->code_start_field;
  if (L->code_positions > last) last = L->code_positions;
  if (L->code_deopt > last) last = L->code_deopt;
  if (last + 8 > CODE_HEADER_READ) return 0;
  /* a return address follows the call: the call is what the frame runs
   * (and may be the code's last instruction) */
  if (is_return && pc > 0) pc--;
  struct code_tables *e = tables_for(pid, L, code, pc);
  if (!e) return 0;
  *tier = tier_of(L, e->kind);
  if (e->nsfi == 0) return 0;
  uint64_t off = pc - e->start;
  int64_t pos = v8_position_at(e->table, e->tlen, off);
  if (pos < 0) return 0;
  int n = 0;
  uint32_t id = (uint32_t)((uint64_t)pos >> INLINING_ID_SHIFT) & 0xffff;
  while (id != 0 && n < max) {
    if (id > (uint32_t)e->npos) return 0; /* not this code's table */
    const uint8_t *rec = e->pos + (size_t)(id - 1) * POSITION_SIZE;
    int32_t fid;
    memcpy(&fid, rec + 8, 4);
    if (fid >= 0) {
      if (fid >= e->nsfi || !e->sfi[fid]) return 0;
      sfis[n++] = e->sfi[fid];
    }
    uint32_t next = (uint32_t)(word(rec) >> INLINING_ID_SHIFT) & 0xffff;
    if (next >= id) return 0; /* ids decrease outwards */
    id = next;
  }
  return n;
}

void v8_inline_forget(uint32_t pid) {
  for (int i = 0; i < CACHE_ENTRIES; i++)
    if (cache[i].pid == pid) memset(&cache[i], 0, offsetof(struct code_tables, sfi));
  for (int i = 0; i < MAPS; i++)
    if (maps[i].pid == pid) maps[i].pid = 0, maps[i].map = 0;
}
