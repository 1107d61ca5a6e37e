/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The frame walk of one sample (see v8_walk.h).
 *
 * Which frames are JavaScript. Every V8 frame has the caller's frame
 * pointer at fp and the return address above it; below fp, a JS frame
 * (interpreted, baseline or optimized) holds its context (a heap pointer)
 * and its JSFunction, while V8's other frames hold a frame type marker (a
 * small Smi-tagged integer) in the context slot. C++ frames hold anything.
 * The chain alternates: JS code calls C++ through an exit frame, C++ enters
 * JS through an entry frame. So, walking from the leaf outwards, frames
 * after an exit marker and before the next entry marker are JS or V8
 * frames, and frames after an entry marker and before the next exit marker
 * are C++ and are not even looked at. Frames before the first marker are
 * C++ if that marker is an exit; if it is an entry, they are JS frames,
 * possibly under C++ frames at the leaf: V8's fast API calls (Node 22 and
 * later use them, e.g. for process.cpuUsage) go from optimized code
 * straight into C++ without an exit frame. And V8 13 has frames of its
 * own with a heap pointer in the context slot and no function.
 *
 * Torn reads. The stack copy is the kernel's, taken at the sample instant;
 * the heap is read afterwards while the target runs, and its GC moves
 * objects. A candidate whose function or SharedFunctionInfo does not check
 * out (pointer tag, instance type) is looked at again: if its context slot
 * still holds a V8 Context, it was a JS frame whose function moved, and
 * the whole sample is dropped, counted as torn (a stack with a frame
 * missing would be a wrong stack); otherwise it was not a JS frame. A name
 * or script that does not read back once the function checked out is torn
 * too.
 *
 * The cache maps a SharedFunctionInfo's address to its name, script and
 * line. GC can move another SharedFunctionInfo to that address, so an
 * entry is used only if the object there is still a SharedFunctionInfo
 * with the same name-or-ScopeInfo and script words it was resolved from
 * (those objects move too, which only costs a fresh resolution). It is
 * 4-way set associative with least-recently-used replacement; entries
 * used by the sample being walked are never evicted during it.
 */
#include "v8_walk.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "polyprof/kit/hash.h"
#include "polyprof/kit/remote.h"
#include "v8_inline.h"

#define WAYS 4
#define SPARE 32 /* resolutions that found their cache set full of this sample's */

struct v8_fn {
  uint64_t sfi; /* tagged; 0: empty */
  uint64_t key_name, key_script;
  uint32_t line;
  uint32_t used;    /* r->clock of the last sample that used it */
  uint8_t scripted; /* it has a Script: not a V8 builtin */
  char name[128];
  char file[V8_NAME_MAX];
};

struct cand {
  uint64_t fn;  /* tagged JSFunction */
  uint64_t ctx; /* tagged Context */
  uint64_t pc;  /* where the frame executes (0: unknown) */
  int ret;      /* pc is a return address */
  int has_bco;  /* bco read from the copy */
  uint64_t bco; /* the frame's bytecode offset slot */
  uint64_t hdr[8];
  uint16_t fn_type, sfi_type;
  uint64_t sfi_hdr[8];
};

/* One frame of the chain, leaf first: a JS candidate or a C++ frame. */
struct slot {
  uint64_t pc;  /* where it executes (0: unknown) */
  int16_t cand; /* index in cands, -1: C++ */
  uint8_t ret;  /* pc is a return address */
};

static struct cand cands[V8_MAX_FRAMES];
static struct slot slots[V8_MAX_HOPS];
static struct v8_fn spare[SPARE];

int v8_reader_init(struct v8_reader *r, uint32_t pid, const struct v8_layout *L,
                   uint32_t cache_entries) {
  memset(r, 0, sizeof(*r));
  r->pid = pid;
  r->L = *L;
  uint32_t cap = 16;
  while (cap < cache_entries && cap < (1u << 16))
    cap <<= 1;
  r->cache = calloc(cap, sizeof(*r->cache));
  if (!r->cache) return -ENOMEM;
  r->cache_cap = cap;
  return 0;
}

void v8_reader_free(struct v8_reader *r) {
  free(r->cache);
  r->cache = NULL;
}

static uint64_t u64_at(const unsigned char *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

/* Collects the frames of the chain from fp, leaf first, into slots
 * (*nslots) and the JS frame candidates among them into cands (returns
 * their count). */
static int collect(struct v8_reader *r, const struct v8_raw_sample *s, uint64_t fp, int *short_copy,
                   int *nslots) {
  const struct v8_layout *L = &r->L;
  enum { UNKNOWN, JS, NATIVE } region = UNKNOWN;
  int n = 0, ns = 0;
  uint64_t sp = s->regs.sp;
  size_t len = s->stack_len;
  *short_copy = 0;
  /* the leaf frame executes at the sampled ip if the chain starts there;
   * every other frame at the return address its callee saved */
  uint64_t pc = fp == s->regs.bp ? s->regs.ip : 0;
  int ret = 0;
  for (int hop = 0; hop < V8_MAX_HOPS && fp; hop++) {
    if ((fp & 7) || fp < sp || fp - sp > len || len - (fp - sp) < 16) {
      /* above the copy but plausible: outer frames were not copied */
      if (fp > sp && !(fp & 7) && fp - sp < (64u << 20)) *short_copy = 1;
      break;
    }
    uint64_t off = fp - sp;
    uint64_t caller = u64_at(s->stack + off);
    int64_t co = (int64_t)off + L->fp_context, fo = (int64_t)off + L->fp_function;
    if (co >= 0 && fo >= 0) {
      uint64_t ctx = u64_at(s->stack + co), fn = u64_at(s->stack + fo);
      if (v8_is_smi(ctx) && (ctx >> 1) < V8_MAX_FRAME_TYPE && L->frame_kind[ctx >> 1]) {
        int k = L->frame_kind[ctx >> 1];
        if (k == V8F_EXIT) {
          if (region == UNKNOWN) { /* the leaf side was C++ */
            for (int i = 0; i < ns; i++)
              slots[i].cand = -1;
            n = 0;
          }
          region = JS;
        } else if (k == V8F_ENTRY) {
          region = NATIVE;
        }
      } else if (region != NATIVE && v8_is_heap(ctx) && v8_is_heap(fn)) {
        if (n >= V8_MAX_FRAMES) break;
        cands[n].fn = fn;
        cands[n].ctx = ctx;
        cands[n].pc = pc;
        cands[n].ret = ret;
        int64_t bo = (int64_t)off + L->fp_bytecode_offset;
        cands[n].has_bco = L->fp_bytecode_offset < 0 && L->fp_bytecode_offset >= -128 &&
                           L->fp_bytecode_offset % 8 == 0 && bo >= 0;
        cands[n].bco = cands[n].has_bco ? u64_at(s->stack + bo) : 0;
        slots[ns++] = (struct slot){pc, (int16_t)n, (uint8_t)ret};
        n++;
      } else {
        slots[ns++] = (struct slot){pc, -1, (uint8_t)ret};
      }
    } else {
      slots[ns++] = (struct slot){pc, -1, (uint8_t)ret};
    }
    if (caller <= fp) break; /* a chain goes up the stack */
    pc = u64_at(s->stack + off + 8);
    ret = 1;
    fp = caller;
  }
  *nslots = ns;
  return n;
}

/* One stage of reads for candidates [0, n): iov i of candidate c. On a
 * batch failure each candidate is read alone; a failed one gets bad[c]. */
static void read_stage(uint32_t pid, struct pp_remote_iov *iov, int per, int n, char *bad) {
  for (int base = 0; base < n; base += 32) {
    int cnt = n - base < 32 ? n - base : 32;
    size_t k = 0;
    struct pp_remote_iov batch[64];
    int idx[64];
    for (int c = base; c < base + cnt; c++) {
      if (bad[c]) continue;
      for (int j = 0; j < per; j++) {
        batch[k] = iov[c * per + j];
        idx[k] = c;
        k++;
      }
    }
    if (k == 0 || pp_remote_readv((pid_t)pid, batch, k) == 0) continue;
    for (size_t i = 0; i < k; i++)
      if (!bad[idx[i]] && pp_remote_read((pid_t)pid, batch[i].addr, batch[i].buf, batch[i].len) < 0)
        bad[idx[i]] = 1;
  }
}

static struct v8_fn *lookup(struct v8_reader *r, uint64_t sfi, uint64_t kname, uint64_t kscript) {
  uint32_t set = (uint32_t)(pp_hash_u64(sfi) & (r->cache_cap / WAYS - 1)) * WAYS;
  for (int w = 0; w < WAYS; w++) {
    struct v8_fn *e = &r->cache[set + w];
    if (e->sfi == sfi && e->key_name == kname && e->key_script == kscript) {
      e->used = r->clock;
      return e;
    }
  }
  return NULL;
}

static struct v8_fn *victim(struct v8_reader *r, uint64_t sfi, int *spare_used) {
  uint32_t set = (uint32_t)(pp_hash_u64(sfi) & (r->cache_cap / WAYS - 1)) * WAYS;
  struct v8_fn *best = NULL;
  for (int w = 0; w < WAYS; w++) {
    struct v8_fn *e = &r->cache[set + w];
    if (e->sfi == sfi) return e; /* same address, another function now */
    if (e->used == r->clock && e->sfi) continue;
    if (!best || !e->sfi || (best->sfi && e->used < best->used)) best = e;
  }
  if (best) return best;
  return *spare_used < SPARE ? &spare[(*spare_used)++] : NULL;
}

/* Resolves a SharedFunctionInfo's name, script and line into e. 0, or
 * -EAGAIN when an object did not check out. */
static int resolve(struct v8_reader *r, struct v8_fn *e, uint64_t kname, uint64_t kscript) {
  const struct v8_layout *L = &r->L;
  uint32_t pid = r->pid;
  int64_t start = -1;
  e->name[0] = e->file[0] = '\0';
  e->line = 0;
  e->scripted = 0;
  r->st.cache_miss++;
  if (v8_is_heap(kname)) {
    uint16_t t;
    if (v8_type_of(pid, L, kname, &t) < 0) return -EAGAIN;
    if (t < L->first_nonstring_type) {
      if (v8_read_string(pid, L, kname, e->name, sizeof(e->name)) < 0) return -EAGAIN;
    } else if (t == L->type_scope_info) {
      if (v8_scope_info(pid, L, kname, e->name, sizeof(e->name), &start) < 0) return -EAGAIN;
    }
  }
  if (v8_is_heap(kscript)) {
    uint16_t t;
    if (v8_type_of(pid, L, kscript, &t) < 0) return -EAGAIN;
    if (t == L->type_script) {
      e->scripted = 1;
      uint64_t nw;
      if (pp_remote_read((pid_t)pid, kscript - 1 + (uint64_t)L->script_name, &nw, 8) < 0)
        return -EAGAIN;
      uint16_t nt;
      /* a script without a name (eval, new Function) has undefined there */
      if (v8_is_heap(nw) && v8_type_of(pid, L, nw, &nt) == 0 && nt < L->first_nonstring_type &&
          v8_read_string(pid, L, nw, e->file, sizeof(e->file)) < 0)
        return -EAGAIN;
      if (start >= 0 && v8_script_line(pid, L, kscript, start, &e->line) < 0) return -EAGAIN;
    }
  }
  if (!e->name[0]) snprintf(e->name, sizeof(e->name), "(anonymous)");
  return 0;
}

/* The cache entry of SharedFunctionInfo sfi, whose name-or-ScopeInfo and
 * script words are kname and kscript: cached, or resolved now. NULL with
 * *err -EAGAIN when it did not read back (torn), -ENOSPC when the cache
 * holds more of this sample's functions than it has room for. */
static struct v8_fn *function_for(struct v8_reader *r, uint64_t sfi, uint64_t kname,
                                  uint64_t kscript, int *spare_used, int *err) {
  struct v8_fn *e = lookup(r, sfi, kname, kscript);
  if (e) return e;
  e = victim(r, sfi, spare_used);
  if (!e) {
    *err = -ENOSPC;
    return NULL;
  }
  e->sfi = 0;
  if (resolve(r, e, kname, kscript) < 0) {
    *err = -EAGAIN;
    return NULL;
  }
  e->sfi = sfi;
  e->key_name = kname;
  e->key_script = kscript;
  e->used = r->clock;
  return e;
}

/* The same for a SharedFunctionInfo known by its tagged pointer alone (an
 * inlined function): its words read first. NULL if it does not check out. */
static struct v8_fn *function_of(struct v8_reader *r, uint64_t sfi, int *spare_used) {
  const struct v8_layout *L = &r->L;
  int32_t top =
      L->sfi_name_or_scope_info > L->sfi_script ? L->sfi_name_or_scope_info : L->sfi_script;
  uint64_t h[8];
  uint16_t t;
  int err;
  if ((size_t)top + 8 > sizeof(h) || v8_type_of(r->pid, L, sfi, &t) < 0 || t != L->type_sfi ||
      pp_remote_read((pid_t)r->pid, sfi - 1, h, (size_t)top + 8) < 0)
    return NULL;
  return function_for(r, sfi, h[L->sfi_name_or_scope_info / 8], h[L->sfi_script / 8], spare_used,
                      &err);
}

static struct pp_frame frame_of(const struct v8_fn *e, enum pp_frame_kind kind) {
  return (struct pp_frame){
      .name = e->name, .file = e->file[0] ? e->file : NULL, .line = e->line, .kind = kind};
}

static int in_v8_text(const struct v8_reader *r, uint64_t pc) {
  return r->in_v8_module && r->in_v8_module(r->native_ctx, pc);
}

/* The kind of a JS frame from the code its pc is in: V8's embedded
 * builtins (in the node binary) hold the interpreter's entry trampoline
 * and bytecode handlers, so a frame running there is interpreted, or is a
 * builtin when its function has no script; heap code says its kind.
 *
 * A leaf pc in the builtins may also be a builtin that compiled code
 * called without a frame of its own (baseline code calls one for most
 * operations). There the function's current code tells optimized code,
 * and the frame itself tells the other two: its bytecode offset slot
 * holds a Smi in an interpreted frame and the feedback vector in a
 * baseline frame. */
static enum pp_frame_kind kind_of(struct v8_reader *r, const struct cand *c, const struct v8_fn *e,
                                  int in_text, int tier) {
  if (!e->scripted && (in_text || tier == V8_TIER_OTHER)) return PP_FRAME_JS_BUILTIN;
  if (in_text && !c->ret) {
    if (r->L.inline_ok && r->L.jsfunction_code >= 0 &&
        v8_code_tier(r->pid, &r->L, c->hdr[r->L.jsfunction_code / 8]) == V8_TIER_OPTIMIZED)
      return PP_FRAME_JS_OPTIMIZED;
    if (c->has_bco && v8_is_heap(c->bco)) return PP_FRAME_JS_BASELINE;
    return PP_FRAME_JS_INTERPRETED;
  }
  if (in_text) return PP_FRAME_JS_INTERPRETED;
  if (tier == V8_TIER_BASELINE) return PP_FRAME_JS_BASELINE;
  if (tier == V8_TIER_OPTIMIZED) return PP_FRAME_JS_OPTIMIZED;
  r->st.unclassified++;
  return PP_FRAME_JS;
}

/* The lowest exit frame in the copy: a slot holding a frame pointer (a
 * higher address in the copy) whose frame has an exit marker and a caller
 * further up. 0 if none. */
static uint64_t find_exit_frame(const struct v8_layout *L, const struct v8_raw_sample *s) {
  uint64_t sp = s->regs.sp;
  size_t len = s->stack_len;
  /* the frame's context slot lies below it: inside the copy too */
  uint64_t below = (uint64_t)(-(int64_t)L->fp_context);
  if (len < 16) return 0;
  for (size_t off = 0; off + 8 <= len; off += 8) {
    uint64_t v = u64_at(s->stack + off);
    if ((v & 7) || v <= sp + off || v - sp > len - 16 || v - sp < below) continue;
    uint64_t mk = u64_at(s->stack + ((v - sp) - below));
    if (!v8_is_smi(mk) || (mk >> 1) >= V8_MAX_FRAME_TYPE || L->frame_kind[mk >> 1] != V8F_EXIT)
      continue;
    if (u64_at(s->stack + (v - sp)) > v) return v;
  }
  return 0;
}

/* A C++ frame named by the process's native symbols. 0, or -1 (no name:
 * not shown). */
static int native_frame(struct v8_reader *r, const struct slot *sl, struct pp_frame *f) {
  if (!r->native || !sl->pc) return -1;
  return r->native(r->native_ctx, sl->pc, sl->ret, f);
}

static int native_only(struct v8_reader *r, int nslots, struct pp_frame *frames, uint32_t max) {
  uint32_t out = 0;
  for (int i = 0; i < nslots && out < max; i++)
    if (native_frame(r, &slots[i], &frames[out]) == 0) out++;
  return (int)out;
}

/* The frames of the chain from fp: their count (*njs of them JS), or
 * -EAGAIN (torn). */
static int walk_from(struct v8_reader *r, const struct v8_raw_sample *s, uint64_t fp,
                     struct pp_frame *frames, uint32_t max, uint32_t *njs) {
  const struct v8_layout *L = &r->L;
  int short_copy, nslots;
  int n = collect(r, s, fp, &short_copy, &nslots);
  *njs = 0;
  if (short_copy) r->st.short_copy++;
  if (n == 0) return native_only(r, nslots, frames, max);
  static struct pp_remote_iov iov[V8_MAX_FRAMES * 2];
  static char bad[V8_MAX_FRAMES];
  memset(bad, 0, (size_t)n);
  /* stage 1: each JSFunction's map and shared function info */
  size_t fn_len = (size_t)L->jsfunction_shared + 8;
  if (L->inline_ok && (size_t)L->jsfunction_code + 8 > fn_len)
    fn_len = (size_t)L->jsfunction_code + 8;
  if (fn_len > sizeof(cands[0].hdr)) return -EINVAL;
  for (int c = 0; c < n; c++)
    iov[c] = (struct pp_remote_iov){cands[c].fn - 1, cands[c].hdr, fn_len};
  read_stage(r->pid, iov, 1, n, bad);
  /* stage 2: the function map's type, the SharedFunctionInfo's fields */
  int32_t sfi_top =
      L->sfi_name_or_scope_info > L->sfi_script ? L->sfi_name_or_scope_info : L->sfi_script;
  size_t sfi_len = (size_t)sfi_top + 8;
  if (sfi_len > sizeof(cands[0].sfi_hdr)) return -EINVAL;
  for (int c = 0; c < n; c++) {
    uint64_t map = cands[c].hdr[0], sfi = cands[c].hdr[L->jsfunction_shared / 8];
    if (!bad[c] && (!v8_is_heap(map) || !v8_is_heap(sfi))) bad[c] = 1;
    if (bad[c]) map = sfi = 4097; /* never read */
    iov[2 * c] =
        (struct pp_remote_iov){map - 1 + (uint64_t)L->map_instance_type, &cands[c].fn_type, 2};
    iov[2 * c + 1] = (struct pp_remote_iov){sfi - 1, cands[c].sfi_hdr, sfi_len};
  }
  read_stage(r->pid, iov, 2, n, bad);
  /* stage 3: the SharedFunctionInfo map's type */
  for (int c = 0; c < n; c++) {
    uint64_t smap = cands[c].sfi_hdr[0];
    if (!bad[c] && (cands[c].fn_type < L->type_jsfunction_first ||
                    cands[c].fn_type > L->type_jsfunction_last || !v8_is_heap(smap)))
      bad[c] = 1;
    if (bad[c]) smap = 4097;
    iov[c] =
        (struct pp_remote_iov){smap - 1 + (uint64_t)L->map_instance_type, &cands[c].sfi_type, 2};
  }
  read_stage(r->pid, iov, 1, n, bad);
  for (int c = 0; c < n; c++) {
    if (!bad[c] && cands[c].sfi_type != L->type_sfi) bad[c] = 1;
    if (bad[c]) {
      uint16_t ct;
      if (v8_type_of(r->pid, L, cands[c].ctx, &ct) == 0 && ct >= L->type_context_first &&
          ct <= L->type_context_last)
        return -EAGAIN; /* torn */
    }
  }
  uint32_t out = 0;
  int spare_used = 0;
  for (int i = 0; i < nslots && out < max; i++) {
    int c = slots[i].cand;
    if (c < 0 || bad[c]) { /* C++, or a frame that was not JS after all */
      if (native_frame(r, &slots[i], &frames[out]) == 0) out++;
      continue;
    }
    uint64_t sfi = cands[c].hdr[L->jsfunction_shared / 8];
    uint64_t kname = cands[c].sfi_hdr[L->sfi_name_or_scope_info / 8];
    uint64_t kscript = cands[c].sfi_hdr[L->sfi_script / 8];
    int in_text = cands[c].pc && in_v8_text(r, cands[c].pc - (uint64_t)cands[c].ret);
    int tier = V8_TIER_UNKNOWN;
    if (L->inline_ok && cands[c].pc && !in_text) {
      uint64_t in[V8_MAX_INLINED];
      int k = v8_inlined_at(r->pid, L, cands[c].hdr[L->jsfunction_code / 8], cands[c].pc,
                            cands[c].ret, in, V8_MAX_INLINED, &tier);
      for (int j = 0; j < k && out < max; j++) {
        struct v8_fn *f = function_of(r, in[j], &spare_used);
        if (!f) break; /* an inlined function that does not read back: not shown */
        frames[out++] = frame_of(f, PP_FRAME_JS_INLINED);
        (*njs)++;
        r->st.inlined++;
      }
    }
    int err;
    struct v8_fn *e = function_for(r, sfi, kname, kscript, &spare_used, &err);
    if (!e && err == -EAGAIN) return -EAGAIN;
    if (!e) break; /* more distinct functions than the cache holds: outer part cut */
    if (out < max) {
      frames[out++] = frame_of(e, kind_of(r, &cands[c], e, in_text, tier));
      (*njs)++;
    }
  }
  return (int)out;
}

int v8_walk(struct v8_reader *r, const struct v8_raw_sample *s, struct pp_frame *frames,
            uint32_t max) {
  r->st.samples++;
  r->clock++;
  uint32_t njs = 0;
  int n = walk_from(r, s, s->regs.bp, frames, max, &njs);
  if (n >= 0 && njs == 0 && -r->L.fp_context < 64) {
    /* V8's own C++ (parser, compiler, GC) may run without frame pointers:
     * the chain from the leaf leads nowhere, but the exit frame through
     * which JS called into it is still in the copy. The leaf's own name,
     * if it has one, stays on top. */
    uint64_t fp = find_exit_frame(&r->L, s);
    if (fp && fp != s->regs.bp) {
      static struct pp_frame scan[V8_MAX_FRAMES];
      /* the leaf's name: the chain's first frame, or the instruction
       * pointer's (code that uses the frame pointer register for its own
       * ends the chain at once: OpenSSL's assembly does) */
      uint32_t keep = max > 1 && (n > 0 || (r->native && s->regs.ip &&
                                            r->native(r->native_ctx, s->regs.ip, 0, frames) == 0)),
               njs2;
      uint32_t cap = max - keep < V8_MAX_FRAMES ? max - keep : V8_MAX_FRAMES;
      int m = walk_from(r, s, fp, scan, cap, &njs2);
      if (m < 0) {
        n = m;
      } else if (njs2 > 0) {
        memcpy(frames + keep, scan, (size_t)m * sizeof(*scan));
        n = (int)keep + m;
        njs = njs2;
        r->st.scanned++;
      }
    }
  }
  if (n < 0)
    r->st.torn++;
  else if (njs == 0)
    r->st.no_js++;
  else
    r->st.js_samples++;
  if (n > 0) r->st.native += (uint64_t)n - njs;
  return n;
}
