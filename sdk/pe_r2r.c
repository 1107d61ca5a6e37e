/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ReadyToRun method names. See pe_r2r.h.
 *
 * The CLI header (data directory 14) points at the metadata and, in a
 * ReadyToRun image, at the READYTORUN header ("RTR", version, flags, then
 * (type, RVA, size) section records). Three sections say whose code is
 * where: RUNTIME_FUNCTIONS, every code block sorted by start (12 bytes on
 * x64: begin, end, unwind; 8 elsewhere: begin, unwind); funclets follow
 * the block of their method; METHODDEF_ENTRYPOINTS, indexed by MethodDef
 * row - 1, and INSTANCE_METHOD_ENTRYPOINTS, keyed by method signature,
 * both leading to the index of a method's first block. HOT_COLD_MAP pairs
 * each cold block with its hot one. The table built here has one entry
 * per block that belongs to a named method: its range, its method's entry
 * and the name, names shared by all blocks (and instantiations) of a
 * method.
 */
#include "polyprof/kit/pe_r2r.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecma_metadata.h"
#include "native_format.h"
#include "pe_file.h"
#include "r2r_signature.h"

#define R2R_SIGNATURE 0x00525452u /* "RTR" */
#define R2R_FLAG_COMPONENT 0x20u
#define R2R_SECTIONS_MAX 256
#define R2R_RUNTIME_FUNCTIONS 102
#define R2R_METHODDEF_ENTRYPOINTS 103
#define R2R_INSTANCE_METHOD_ENTRYPOINTS 109
#define R2R_COMPONENT_ASSEMBLIES 115 /* only a composite image has it */
#define R2R_OWNER_COMPOSITE 116
#define R2R_HOT_COLD_MAP 120
#define R2R_BLOCKS_MAX (8u << 20)
#define R2R_INSTANCES_MAX (8u << 20)
#define R2R_DEFAULT_MAX_BYTES (256u << 20)
#define R2R_NAME_MAX 1024
#define R2R_LAST_BLOCK_SPAN 0x100000u /* no end recorded (not x64): at most 1 MiB */

#define OWNER_NONE UINT32_MAX          /* not a method's first block (yet) */
#define OWNER_UNNAMED (UINT32_MAX - 1) /* a method this image cannot name */

struct r2r_block {
  uint32_t begin, end, start, name;
};

struct pp_r2r {
  struct r2r_block *b;
  size_t n, blocks;
  size_t skipped; /* instance entries whose signature could not be read */
  char *arena;
  size_t arena_len;
  unsigned nsec;
  struct pe_section sec[PE_MAX_SECTIONS];
};

/* the architecture's RUNTIME_FUNCTION size: R2R images xor the machine
 * with a value per OS (none on Windows) */
static unsigned runtime_function_size(uint16_t machine) {
  static const uint16_t os_xor[] = {0, 0x7b79 /* Linux */, 0x4644 /* Apple */, 0xadc4 /* FreeBSD */,
                                    0x1993 /* NetBSD */};
  for (size_t i = 0; i < sizeof(os_xor) / sizeof(os_xor[0]); i++) {
    uint16_t m = machine ^ os_xor[i];
    if (m == 0x8664) return 12;                              /* x64 */
    if (m == 0xaa64 || m == 0x01c4 || m == 0x014c) return 8; /* arm64, arm, x86 */
  }
  return 0;
}

int pp_r2r_probe(int fd) {
  struct pe_file pe;
  int rc = pe_file_open(fd, &pe, NULL, 0);
  if (rc < 0) return rc;
  return pe.cli_rva && pe.cli_size >= 72 ? 0 : -ENOEXEC;
}

struct build {
  struct pe_file pe;
  struct ecma_md md;
  uint32_t *enclosing;
  uint32_t *rid_name; /* per MethodDef row: offset of its name, or OWNER_NONE */
  uint32_t *owner;    /* per block: name offset of the method it starts, or OWNER_* */
  uint32_t *begin, *end;
  size_t nblocks;
  struct nf_reader inst;
  size_t inst_bad;
  struct pp_r2r *t;
  size_t arena_cap;
  bool oom;
};

static uint32_t name_of(struct build *bd, uint32_t rid) {
  if (rid == 0 || rid > bd->md.t[MD_METHODDEF].count) return OWNER_UNNAMED;
  if (bd->rid_name[rid - 1] != OWNER_NONE) return bd->rid_name[rid - 1];
  char buf[R2R_NAME_MAX];
  if (!ecma_md_method_name(&bd->md, bd->enclosing, rid, buf, sizeof(buf)) || !buf[0])
    return bd->rid_name[rid - 1] = OWNER_UNNAMED;
  size_t n = strlen(buf) + 1;
  struct pp_r2r *t = bd->t;
  if (t->arena_len + n > bd->arena_cap) {
    size_t cap = bd->arena_cap ? bd->arena_cap * 2 : 64 << 10;
    while (cap < t->arena_len + n)
      cap *= 2;
    char *a = cap < UINT32_MAX - 2 ? realloc(t->arena, cap) : NULL;
    if (!a) {
      bd->oom = true;
      return OWNER_UNNAMED;
    }
    t->arena = a;
    bd->arena_cap = cap;
  }
  memcpy(t->arena + t->arena_len, buf, n);
  uint32_t off = (uint32_t)t->arena_len;
  t->arena_len += n;
  return bd->rid_name[rid - 1] = off;
}

static void claim(struct build *bd, uint32_t block, uint32_t name) {
  if (block < bd->nblocks) bd->owner[block] = name;
}

static bool instance_entry(void *ctx, uint32_t off) {
  struct build *bd = ctx;
  const struct nf_reader *r = &bd->inst;
  if (off < r->base || off - r->base >= r->size) {
    bd->inst_bad++;
    return true;
  }
  struct r2r_method_sig sig;
  uint32_t rel = off - r->base, block;
  if (!r2r_method_sig_decode(r->data + rel, r->size - rel, &sig) ||
      !nf_method_entry(r, off + (uint32_t)sig.length, &block)) {
    bd->inst_bad++;
    return true;
  }
  /* code of a method named in another module's metadata still starts a
   * method: its blocks must not read as the previous method's */
  claim(bd, block, sig.foreign ? OWNER_UNNAMED : name_of(bd, sig.rid));
  return !bd->oom;
}

static int read_section(struct build *bd, uint32_t rva, uint32_t size, size_t *budget,
                        uint8_t **out, char *why, size_t cap, const char *what) {
  if (size > *budget) return pe_fail(-EFBIG, why, cap, "%s: %u bytes, over the cap", what, size);
  *budget -= size;
  int rc = pe_read_rva(&bd->pe, rva, size, out);
  if (rc == -ERANGE)
    return pe_fail(-ENOEXEC, why, cap, "%s (RVA %#x, %u bytes) not in the file", what, rva, size);
  return rc;
}

static int build_blocks(struct build *bd, const uint8_t *rf, uint32_t size, unsigned es, char *why,
                        size_t cap) {
  size_t n = size / es;
  if (n == 0 || n > R2R_BLOCKS_MAX) return pe_fail(-ENOEXEC, why, cap, "%zu code blocks", n);
  bd->nblocks = n;
  bd->begin = malloc(n * sizeof(uint32_t));
  bd->end = malloc(n * sizeof(uint32_t));
  bd->owner = malloc(n * sizeof(uint32_t));
  if (!bd->begin || !bd->end || !bd->owner) return -ENOMEM;
  for (size_t i = 0; i < n; i++) {
    bd->begin[i] = pe_u32(rf + i * es);
    bd->owner[i] = OWNER_NONE;
    if (i && bd->begin[i] < bd->begin[i - 1])
      return pe_fail(-ENOEXEC, why, cap, "code blocks not sorted (block %zu)", i);
  }
  for (size_t i = 0; i < n; i++) {
    uint32_t next = i + 1 < n ? bd->begin[i + 1]
                    : bd->begin[i] > UINT32_MAX - R2R_LAST_BLOCK_SPAN
                        ? UINT32_MAX
                        : bd->begin[i] + R2R_LAST_BLOCK_SPAN;
    uint32_t e = es == 12 ? pe_u32(rf + i * es + 4) : next;
    bd->end[i] = e > bd->begin[i] ? e : bd->begin[i] + 1;
  }
  return 0;
}

static void method_entries(struct build *bd, const uint8_t *data, uint32_t rva, uint32_t size) {
  struct nf_reader r = {data, rva, size};
  struct nf_array a;
  if (!nf_array_open(&r, rva, &a)) return;
  uint32_t rows = bd->md.t[MD_METHODDEF].count;
  for (uint32_t i = 0; i < a.count && i < rows && !bd->oom; i++) {
    uint32_t off, block;
    if (nf_array_get(&a, i, &off) && nf_method_entry(&r, off, &block))
      claim(bd, block, name_of(bd, i + 1));
  }
}

static void hot_cold(struct build *bd, const uint8_t *map, uint32_t size, uint32_t *start) {
  for (uint32_t i = 0; i + 8 <= size; i += 8) {
    uint32_t cold = pe_u32(map + i), hot = pe_u32(map + i + 4);
    if (cold < bd->nblocks && hot < bd->nblocks && bd->owner[cold] == OWNER_NONE) {
      bd->owner[cold] = bd->owner[hot];
      start[cold] = bd->begin[hot];
    }
  }
}

/* The table: every block of a named method, funclets (blocks no entry
 * claims) with the method before them. */
static int emit(struct build *bd, const uint32_t *start) {
  struct pp_r2r *t = bd->t;
  t->b = malloc(bd->nblocks * sizeof(*t->b));
  if (!t->b) return -ENOMEM;
  uint32_t cur = OWNER_NONE, cur_start = 0;
  for (size_t i = 0; i < bd->nblocks; i++) {
    uint32_t o = bd->owner[i], s = start[i];
    if (o == OWNER_NONE) {
      o = cur;
      s = cur_start;
    } else {
      if (s == UINT32_MAX) s = bd->begin[i];
      cur = o;
      cur_start = s;
    }
    if (o == OWNER_NONE || o == OWNER_UNNAMED) continue;
    t->b[t->n++] = (struct r2r_block){bd->begin[i], bd->end[i], s, o};
  }
  struct r2r_block *shrunk = realloc(t->b, (t->n ? t->n : 1) * sizeof(*t->b));
  if (shrunk) t->b = shrunk;
  char *a = t->arena_len ? realloc(t->arena, t->arena_len) : NULL;
  if (a) t->arena = a;
  return 0;
}

static const struct {
  uint32_t type;
} wanted[] = {
    {R2R_RUNTIME_FUNCTIONS}, {R2R_METHODDEF_ENTRYPOINTS}, {R2R_INSTANCE_METHOD_ENTRYPOINTS},
    {R2R_HOT_COLD_MAP},      {R2R_OWNER_COMPOSITE},       {R2R_COMPONENT_ASSEMBLIES}};
enum { W_RF, W_MDEP, W_IMEP, W_HOTCOLD, W_OWNER, W_COMPONENTS, W_COUNT };

static int load(struct build *bd, int fd, size_t budget, char *why, size_t cap) {
  int rc = pe_file_open(fd, &bd->pe, why, cap);
  if (rc < 0) return rc;
  struct pe_file *pe = &bd->pe;
  if (!pe->cli_rva || pe->cli_size < 72)
    return pe_fail(-ENOEXEC, why, cap, "no CLI header: not .NET");
  uint8_t *cli = NULL, *hdr = NULL;
  if ((rc = read_section(bd, pe->cli_rva, 72, &budget, &cli, why, cap, "CLI header")) < 0)
    return rc;
  uint32_t md_rva = pe_u32(cli + 8), md_size = pe_u32(cli + 12);
  uint32_t rtr_rva = pe_u32(cli + 64), rtr_size = pe_u32(cli + 68);
  free(cli);
  if (!rtr_rva || rtr_size < 16)
    return pe_fail(-ENOTSUP, why, cap, "IL only: no ReadyToRun code in the image");
  if ((rc = read_section(bd, rtr_rva, 16, &budget, &hdr, why, cap, "ReadyToRun header")) < 0)
    return rc;
  uint32_t sig = pe_u32(hdr), flags = pe_u32(hdr + 8), nsections = pe_u32(hdr + 12);
  unsigned major = pe_u16(hdr + 4);
  free(hdr);
  if (sig != R2R_SIGNATURE)
    return pe_fail(-ENOTSUP, why, cap, "native header %#x is not ReadyToRun", sig);
  if (nsections > R2R_SECTIONS_MAX)
    return pe_fail(-ENOEXEC, why, cap, "%u R2R sections", nsections);
  if ((rc = read_section(bd, rtr_rva, 16 + 12 * nsections, &budget, &hdr, why, cap,
                         "ReadyToRun sections")) < 0)
    return rc;
  uint32_t sec_rva[W_COUNT] = {0}, sec_size[W_COUNT] = {0};
  for (uint32_t i = 0; i < nsections; i++) {
    const uint8_t *s = hdr + 16 + 12 * i;
    for (unsigned w = 0; w < W_COUNT; w++)
      if (pe_u32(s) == wanted[w].type) {
        sec_rva[w] = pe_u32(s + 4);
        sec_size[w] = pe_u32(s + 8);
      }
  }
  free(hdr);
  if (flags & R2R_FLAG_COMPONENT) {
    char owner[128] = "?";
    uint8_t *o = NULL;
    uint32_t osz = sec_size[W_OWNER] < sizeof(owner) - 1 ? sec_size[W_OWNER] : sizeof(owner) - 1;
    if (osz && pe_read_rva(pe, sec_rva[W_OWNER], osz, &o) == 0) {
      for (uint32_t i = 0; i < osz; i++)
        owner[i] = o[i] >= 0x20 && o[i] < 0x7f ? (char)o[i] : '?';
      owner[osz] = '\0';
      owner[strnlen(owner, osz)] = '\0';
      free(o);
    }
    return pe_fail(-ENOTSUP, why, cap, "a component of composite image %s: its code is there",
                   owner);
  }
  if (sec_size[W_COMPONENTS])
    return pe_fail(-ENOTSUP, why, cap, "a composite ReadyToRun image (not supported)");
  unsigned es = runtime_function_size(pe->machine);
  if (!es) return pe_fail(-ENOTSUP, why, cap, "machine %#x not known", pe->machine);
  if (!sec_size[W_RF]) return pe_fail(-ENOTSUP, why, cap, "no code blocks (R2R %u)", major);

  uint8_t *mdb = NULL, *rf = NULL, *mdep = NULL, *imep = NULL, *hc = NULL;
  uint32_t *start = NULL;
  rc = read_section(bd, md_rva, md_size, &budget, &mdb, why, cap, "metadata");
  if (rc == 0) rc = ecma_md_open(mdb, md_size, &bd->md, why, cap);
  if (rc == 0 && bd->md.t[0x05].count)
    rc = pe_fail(-ENOTSUP, why, cap, "uncompressed metadata (MethodPtr table)");
  if (rc == 0)
    rc = read_section(bd, sec_rva[W_RF], sec_size[W_RF], &budget, &rf, why, cap, "code blocks");
  if (rc == 0) rc = build_blocks(bd, rf, sec_size[W_RF], es, why, cap);
  if (rc == 0) {
    uint32_t rows = bd->md.t[MD_METHODDEF].count;
    bd->rid_name = malloc((rows ? rows : 1) * sizeof(uint32_t));
    bd->enclosing = ecma_md_enclosing(&bd->md);
    start = malloc(bd->nblocks * sizeof(uint32_t));
    if (!bd->rid_name || !bd->enclosing || !start)
      rc = -ENOMEM;
    else {
      memset(bd->rid_name, 0xff, (rows ? rows : 1) * sizeof(uint32_t));
      memset(start, 0xff, bd->nblocks * sizeof(uint32_t));
    }
  }
  if (rc == 0 && sec_size[W_MDEP] &&
      (rc = read_section(bd, sec_rva[W_MDEP], sec_size[W_MDEP], &budget, &mdep, why, cap,
                         "method entry points")) == 0)
    method_entries(bd, mdep, sec_rva[W_MDEP], sec_size[W_MDEP]);
  if (rc == 0 && sec_size[W_IMEP] &&
      (rc = read_section(bd, sec_rva[W_IMEP], sec_size[W_IMEP], &budget, &imep, why, cap,
                         "instance entry points")) == 0) {
    bd->inst = (struct nf_reader){imep, sec_rva[W_IMEP], sec_size[W_IMEP]};
    struct nf_hashtable h;
    if (!nf_hashtable_open(&bd->inst, sec_rva[W_IMEP], &h) ||
        nf_hashtable_each(&h, R2R_INSTANCES_MAX, instance_entry, bd) < 0)
      bd->inst_bad++;
  }
  if (rc == 0 && sec_size[W_HOTCOLD] &&
      (rc = read_section(bd, sec_rva[W_HOTCOLD], sec_size[W_HOTCOLD], &budget, &hc, why, cap,
                         "hot/cold map")) == 0)
    hot_cold(bd, hc, sec_size[W_HOTCOLD], start);
  if (rc == 0 && bd->oom) rc = -ENOMEM;
  if (rc == 0) rc = emit(bd, start);
  free(mdb);
  free(rf);
  free(mdep);
  free(imep);
  free(hc);
  free(start);
  return rc;
}

int pp_r2r_load(int fd, size_t max_bytes, struct pp_r2r **out, char *why, size_t why_cap) {
  if (why && why_cap) why[0] = '\0';
  *out = NULL;
  struct build *bd = calloc(1, sizeof(*bd));
  struct pp_r2r *t = calloc(1, sizeof(*t));
  if (!bd || !t) {
    free(bd);
    free(t);
    return -ENOMEM;
  }
  bd->t = t;
  int rc = load(bd, fd, max_bytes ? max_bytes : R2R_DEFAULT_MAX_BYTES, why, why_cap);
  if (rc == 0) {
    t->blocks = bd->nblocks;
    t->skipped = bd->inst_bad;
    t->nsec = bd->pe.nsec;
    memcpy(t->sec, bd->pe.sec, sizeof(t->sec[0]) * t->nsec);
    *out = t;
  } else {
    pp_r2r_free(t);
  }
  free(bd->enclosing);
  free(bd->rid_name);
  free(bd->owner);
  free(bd->begin);
  free(bd->end);
  free(bd);
  return rc;
}

void pp_r2r_free(struct pp_r2r *t) {
  if (!t) return;
  free(t->b);
  free(t->arena);
  free(t);
}

int pp_r2r_offset_to_rva(const struct pp_r2r *t, uint64_t offset, uint32_t *rva) {
  return pe_offset_to_rva(t->sec, t->nsec, offset, rva);
}

const char *pp_r2r_lookup(const struct pp_r2r *t, uint32_t rva, uint32_t *start) {
  size_t lo = 0, hi = t->n;
  while (lo < hi) { /* first block beginning after rva */
    size_t mid = lo + (hi - lo) / 2;
    if (t->b[mid].begin <= rva)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0) return NULL;
  const struct r2r_block *b = &t->b[lo - 1];
  if (rva >= b->end || b->name >= t->arena_len) return NULL;
  if (start) *start = b->start;
  return t->arena + b->name;
}

size_t pp_r2r_count(const struct pp_r2r *t) {
  return t ? t->n : 0;
}
size_t pp_r2r_blocks(const struct pp_r2r *t) {
  return t ? t->blocks : 0;
}
size_t pp_r2r_skipped(const struct pp_r2r *t) {
  return t ? t->skipped : 0;
}
size_t pp_r2r_bytes(const struct pp_r2r *t) {
  return t ? sizeof(*t) + t->n * sizeof(*t->b) + t->arena_len : 0;
}
