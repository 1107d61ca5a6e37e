/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One sample of one process: every interpreter, every thread, every frame.
 *
 * Reads are batched where the data allows it. For 3.11+ the frames of a
 * thread live in its data-stack chunk, so the used part of the current chunk
 * is copied with one read and frames are decoded locally (austin's --heap
 * and Tachyon's copy_stack_chunks do the same); frames elsewhere (older
 * chunks, generators) are read one by one. 2.7-3.10 frames are heap objects
 * and cost one read each.
 *
 * Nothing the target says is trusted: thread and frame chains are bounded
 * and checked for cycles (Brent), pointers must look like pointers, code
 * objects must have PyCode_Type, and a thread whose stack cannot be read
 * completely makes the sample fail rather than produce a partial stack.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "polyprof/kit/remote.h"
#include "python.h"

/* <= 3.10 frames are heap objects, one read each; but frames of nearby
 * calls usually share pages (free lists, pymalloc arenas), so whole pages
 * are copied and reused within one thread walk, as CPython's own remote
 * reader does. */
#define PAGE_SIZE_ 4096u
#define PAGE_SLOTS 16

struct py_walker {
  uint32_t max_depth;
  struct py_frame_ref *frames; /* max_depth + PY_EXTRA_FRAMES */
  uint64_t *faddr;             /* address of each frame walked */
  struct py_async_scratch async_scratch;
  uint8_t *chunk; /* copy of the current 3.11+ data-stack chunk */
  uint8_t *pages; /* PAGE_SLOTS pages */
  uint64_t page_addr[PAGE_SLOTS];
  uint32_t npages, next_page;
  /* Read by this sample's prefetch, valid until the sample ends: the
   * thread state at pre_ts, the current frame of the cframe at pre_cframe,
   * and pre_chunk_len bytes of data stack at pre_chunk_lo (in chunk). */
  uint8_t pre_ts_buf[PY_TSTATE_READ_MAX];
  uint64_t pre_ts, pre_cframe, pre_frame, pre_chunk_lo;
  uint32_t pre_chunk_len, pre_nframes;
  uint64_t pre_frame_addr[PY_SPEC_FRAMES];
  uint8_t pre_frame_buf[PY_SPEC_FRAMES][PY_FRAME_READ_MAX];
  bool gc;          /* <GC> frames wanted */
  bool main_only;   /* only the first interpreter's oldest thread */
  bool async;       /* asyncio task chains */
  bool opcodes;     /* <op: NAME> leaves */
  uint64_t leaf_ip; /* 3.11+: instruction of the last walk's leaf frame (0: none) */
  char op_name[48];
  bool pre_gc;         /* pre_gc_flag was read by this sample's prefetch */
  int32_t pre_gc_flag; /* the collector's flag, as prefetched */
};

struct py_walker *python_walker_new(uint32_t max_depth) {
  struct py_walker *w = calloc(1, sizeof(*w));
  if (!w) return NULL;
  w->max_depth = max_depth;
  w->frames = calloc(max_depth + PY_EXTRA_FRAMES, sizeof(*w->frames));
  w->faddr = calloc(max_depth + 1, sizeof(*w->faddr));
  w->async_scratch.out = calloc(max_depth + PY_EXTRA_FRAMES, sizeof(*w->frames));
  w->async_scratch.a = python_async_state_new(max_depth);
  w->chunk = malloc(PY_CHUNK_COPY_MAX);
  w->pages = malloc(PAGE_SLOTS * PAGE_SIZE_);
  if (!w->frames || !w->faddr || !w->async_scratch.out || !w->async_scratch.a || !w->chunk ||
      !w->pages) {
    python_walker_free(w);
    return NULL;
  }
  return w;
}

uint64_t python_walker_leaf_ip(const struct py_walker *w) {
  return w->leaf_ip;
}

void python_walker_set_gc(struct py_walker *w, bool on) {
  w->gc = on;
}

void python_walker_set_main_only(struct py_walker *w, bool on) {
  w->main_only = on;
}

void python_walker_set_opcodes(struct py_walker *w, bool on) {
  w->opcodes = on;
}

void python_walker_set_async(struct py_walker *w, bool on) {
  w->async = on;
}

void python_walker_async_counters(struct py_walker *w, uint64_t *passes, uint64_t *over) {
  python_async_counters(&w->async_scratch, passes, over);
}

void python_walker_free(struct py_walker *w) {
  if (!w) return;
  free(w->frames);
  free(w->faddr);
  free(w->async_scratch.out);
  python_async_state_free(w->async_scratch.a);
  free(w->chunk);
  free(w->pages);
  free(w);
}

static bool walk_plausible(uint64_t p) {
  return p >= 4096 && p < (1ull << 47) && (p & 7) == 0;
}

static uint64_t walk_rd64(const uint8_t *b, uint32_t off) {
  uint64_t v;
  memcpy(&v, b + off, 8);
  return v;
}

/* Brent's cycle detection over a chain of addresses: O(1) memory, finds any
 * loop within a couple of rounds of its length. */
struct brent {
  uint64_t saved;
  uint32_t power, lam;
};

static bool brent_seen(struct brent *b, uint64_t addr) {
  if (addr == b->saved) return true;
  if (++b->lam == b->power) {
    b->saved = addr;
    b->power <<= 1;
    b->lam = 0;
  }
  return false;
}

/* <= 3.10: the kernel tid of a thread from its pthread_t (the address of
 * glibc's struct pthread) at the discovered offset, cached per session. */
static uint32_t tid_of(struct py_proc *p, uint64_t thread_id) {
  if (p->pthread_tid_off < 0 || !walk_plausible(thread_id)) return 0;
  for (uint32_t i = 0; i < p->ntids; i++)
    if (p->tids[i].thread_id == thread_id) return p->tids[i].tid;
  int32_t tid = 0;
  if (pp_remote_read((pid_t)p->pid, thread_id + (uint64_t)p->pthread_tid_off, &tid, 4) < 0 ||
      tid <= 0)
    return 0;
  if (p->ntids < sizeof(p->tids) / sizeof(p->tids[0]))
    p->tids[p->ntids++] = (typeof(p->tids[0])){thread_id, (uint32_t)tid};
  return (uint32_t)tid;
}

uint32_t python_thread_tid(struct py_proc *p, uint64_t thread_id) {
  return tid_of(p, thread_id);
}

int python_discover_tid_offset(struct py_proc *p) {
  if (p->off.ts_native_tid) return 0;
  uint64_t interp = 0, ts = 0;
  if (pp_remote_read((pid_t)p->pid, p->interp_head, &interp, 8) < 0 || !walk_plausible(interp) ||
      pp_remote_read((pid_t)p->pid, interp + p->off.is_tstate_head, &ts, 8) < 0)
    return -EFAULT;
  /* The main thread's tid equals the (namespace) pid, so the word holding
   * the pid in its struct pthread is the tid field (austin's method). */
  uint8_t ts_buf[PY_TSTATE_READ_MAX];
  int32_t block[400];
  int best = -1;
  for (int n = 0; ts && walk_plausible(ts) && n < 256; n++) {
    if (p->off.ts_read > sizeof(ts_buf) ||
        pp_remote_read((pid_t)p->pid, ts, ts_buf, p->off.ts_read) < 0)
      return -EFAULT;
    uint64_t th = walk_rd64(ts_buf, p->off.ts_thread_id);
    if (walk_plausible(th) && pp_remote_read((pid_t)p->pid, th, block, sizeof(block)) == 0) {
      for (int i = 1; i < 400; i++)
        if (block[i] == (int32_t)p->ns_pid && (best < 0 || i * 4 < best)) {
          best = i * 4;
          break;
        }
    }
    ts = walk_rd64(ts_buf, p->off.ts_next);
  }
  if (best < 0) return -ENOENT;
  p->pthread_tid_off = best;
  p->ntids = 0;
  return 0;
}

/* The GIL holder's tstate address, 0 if nobody holds it. */
static int gil_holder(struct py_proc *p, uint64_t interp, uint64_t *holder) {
  *holder = 0;
  pid_t pid = (pid_t)p->pid;
  switch (p->off.gil_kind) {
    case PY_GIL_TSTATE_SYM:
      return p->tstate_cur ? pp_remote_read(pid, p->tstate_cur, holder, 8) : -ENOTSUP;
    case PY_GIL_RUNTIME:
      return pp_remote_read(pid, p->runtime + p->off.rt_tstate_current, holder, 8);
    case PY_GIL_INTERP_PTR: {
      uint64_t gil = 0;
      int rc = pp_remote_read(pid, interp + p->off.is_gil_ptr, &gil, 8);
      if (rc < 0) return rc;
      if (!walk_plausible(gil)) return -EINVAL;
      uint8_t g[32];
      uint32_t need =
          (p->off.gil_holder > p->off.gil_locked ? p->off.gil_holder : p->off.gil_locked) + 8;
      if (need > sizeof(g)) return -EINVAL;
      rc = pp_remote_read(pid, gil, g, need);
      if (rc < 0) return rc;
      int32_t locked;
      memcpy(&locked, g + p->off.gil_locked, 4);
      if (locked) *holder = walk_rd64(g, p->off.gil_holder);
      return 0;
    }
    case PY_GIL_NONE: /* free-threaded: there is no GIL, nobody holds it */
      return 0;
    default:
      return -ENOTSUP;
  }
}

/* Reads n bytes at addr through the walker's page cache (pages are only
 * valid during one thread walk). */
static int read_paged(struct py_walker *w, pid_t pid, uint64_t addr, void *out, uint32_t n) {
  uint64_t page = addr & ~(uint64_t)(PAGE_SIZE_ - 1);
  if (addr + n > page + PAGE_SIZE_) return pp_remote_read(pid, addr, out, n); /* straddles */
  for (uint32_t i = 0; i < w->npages; i++) {
    if (w->page_addr[i] == page) {
      memcpy(out, w->pages + (size_t)i * PAGE_SIZE_ + (addr - page), n);
      return 0;
    }
  }
  uint32_t slot = w->npages < PAGE_SLOTS ? w->npages++ : (w->next_page++ % PAGE_SLOTS);
  w->page_addr[slot] = 0;
  if (pp_remote_read(pid, page, w->pages + (size_t)slot * PAGE_SIZE_, PAGE_SIZE_) < 0)
    return pp_remote_read(pid, addr, out, n); /* the page's tail may be unmapped */
  w->page_addr[slot] = page;
  memcpy(out, w->pages + (size_t)slot * PAGE_SIZE_ + (addr - page), n);
  return 0;
}

/* Reads the frame at addr into out (fr_read bytes), from the chunk copy
 * when it lies inside it (3.11+), else through the page cache. */
static int read_frame(struct py_walker *w, const struct py_proc *p, const uint8_t *chunk,
                      uint64_t c_lo, uint64_t c_hi, uint64_t addr, uint8_t *out) {
  uint32_t n = p->off.fr_read;
  if (chunk && addr >= c_lo + 24 && addr + n <= c_hi && addr + n > addr) {
    memcpy(out, chunk + (addr - c_lo), n);
    return 0;
  }
  for (uint32_t i = 0; i < w->pre_nframes; i++) {
    if (w->pre_frame_addr[i] == addr) {
      memcpy(out, w->pre_frame_buf[i], n);
      return 0;
    }
  }
  return read_paged(w, (pid_t)p->pid, addr, out, n);
}

/* The code of 3.12's C-stack entry frames ("<interpreter trampoline>" in
 * "<shim>"); no Python function can have either name. */
static bool is_trampoline(const struct py_code *e) {
  return e->name[0] == '<' && strcmp(e->name, "<interpreter trampoline>") == 0 &&
         strcmp(e->file, "<shim>") == 0;
}

/* Walks one thread's frames into w->frames. Returns the frame count or
 * -errno; *truncated when max_depth stopped it. */
static int walk_thread(struct py_walker *w, struct py_proc *p, struct py_codecache *cc,
                       const uint8_t *ts, bool first, bool *truncated) {
  const struct py_offsets *o = &p->off;
  pid_t pid = (pid_t)p->pid;
  uint64_t frame = 0;
  *truncated = false;
  w->leaf_ip = 0;
  if (o->walk == PY_WALK_FRAMEOBJ || o->walk == PY_WALK_CURFRAME) {
    frame = walk_rd64(ts, o->ts_frame);
  } else {
    uint64_t cframe = walk_rd64(ts, o->ts_cframe);
    if (!cframe) return 0;
    if (!walk_plausible(cframe)) return -EINVAL;
    if (cframe == w->pre_cframe) {
      frame = w->pre_frame;
    } else {
      int rc = pp_remote_read(pid, cframe + o->cf_current, &frame, 8);
      if (rc < 0) return rc;
    }
    if (first) p->spec.cframe = cframe;
  }
  if (!frame) return 0; /* not running Python: an empty stack */

  const uint8_t *chunk = NULL;
  uint64_t c_lo = 0, c_hi = 0;
  if (o->ts_chunk) {
    uint64_t lo = walk_rd64(ts, o->ts_chunk), hi = walk_rd64(ts, o->ts_top);
    if (walk_plausible(lo) && hi > lo + 24 && hi - lo <= PY_CHUNK_COPY_MAX && frame >= lo &&
        frame < hi &&
        ((lo == w->pre_chunk_lo && hi - lo <= w->pre_chunk_len) ||
         pp_remote_read(pid, lo, w->chunk, (size_t)(hi - lo)) == 0)) {
      chunk = w->chunk;
      c_lo = lo, c_hi = hi;
      if (first) {
        /* next time read a little past today's top (calls push frames),
         * never past the chunk's own size (its header: previous, size) */
        uint64_t len = hi - lo + PY_CHUNK_SLACK, size = walk_rd64(w->chunk, 8);
        if (size >= hi - lo && len > size) len = size;
        if (len > PY_CHUNK_COPY_MAX) len = PY_CHUNK_COPY_MAX;
        p->spec.chunk_lo = lo;
        p->spec.chunk_len = (uint32_t)len;
      }
    }
  }

  uint8_t fb[PY_FRAME_READ_MAX];
  if (o->fr_read > sizeof(fb)) return -EINVAL;
  uint64_t spec_frames[PY_SPEC_FRAMES];
  uint32_t nspec = 0;
  w->npages = 0; /* pages are a snapshot of this walk only */
  struct brent b = {.saved = 0, .power = 1, .lam = 0};
  uint32_t n = 0, steps = 0;
  while (frame) {
    if (!walk_plausible(frame) || brent_seen(&b, frame)) return -ELOOP;
    if (++steps > w->max_depth * 2 + 64) return -ELOOP; /* mostly skipped frames: garbage */
    if (n == w->max_depth) {
      *truncated = true;
      break;
    }
    int rc = read_frame(w, p, chunk, c_lo, c_hi, frame, fb);
    if (rc < 0) return rc;
    if (first && !(chunk && frame >= c_lo && frame < c_hi) && nspec < PY_SPEC_FRAMES)
      spec_frames[nspec++] = frame;
    uint64_t code = walk_rd64(fb, o->fr_code);
    uint64_t back = walk_rd64(fb, o->fr_back);
    if (o->walk != PY_WALK_FRAMEOBJ) {
      uint8_t owner = fb[o->fr_owner];
      /* owner 3 is the C-stack shim (3.12/3.13) or the interpreter's entry
       * frame (3.14); anything above the version's highest owner is a frame
       * torn or reused under us */
      if (owner > o->owner_max) return -EINVAL;
      if (o->skip_owner3 && owner >= 3) {
        /* the C stack's entry frame of one run of the eval loop: the
         * frame walked before it is that run's first */
        if (n) w->frames[n - 1].entry = true;
        frame = back;
        continue;
      }
    }
    /* 3.14: a _PyStackRef; deferred/immortal references set the low bit,
     * and objects are 8-aligned, so clearing 2 bits is safe either way */
    if (o->code_tagged) code &= ~(uint64_t)3;
    int err = 0;
    struct py_code *e = python_code_get(cc, p, code, &err);
    if (!e) return err ? err : -EINVAL;
    /* 3.12's entry frame lives on the C stack, and CPython links a new
     * _PyCFrame (tstate->cframe) before it fills in the frame, so a read
     * racing a call from C (the collector calling gc.callbacks, over and
     * over from the same C depth) can find an owner byte left there by an
     * earlier call. Its code object says what it is: the interpreter's
     * trampoline is only ever an entry frame's. */
    if (o->skip_owner3 && is_trampoline(e)) {
      if (n) w->frames[n - 1].entry = true;
      frame = back;
      continue;
    }
    int64_t addrq;
    if (o->walk == PY_WALK_FRAMEOBJ) {
      int32_t lasti;
      memcpy(&lasti, fb + o->fr_lasti, 4);
      addrq = o->lasti_is_index && lasti >= 0 ? (int64_t)lasti * 2 : lasti;
    } else {
      uint64_t ip = walk_rd64(fb, o->fr_lasti), start = code + o->co_code_adaptive;
      if (o->fr_tlbc_index) start = python_tlbc_start(p, code, fb, start);
      addrq = ip >= start ? (int64_t)((ip - start) / 2) : -1;
      if (addrq > (1 << 24)) addrq = -1;
      if (n == 0) w->leaf_ip = addrq >= 0 ? ip : 0;
    }
    w->frames[n].code = e;
    w->frames[n].line = python_code_line(e, o->lt_format, addrq);
    w->frames[n].pseudo = NULL;
    /* <= 3.10 runs the eval loop once per frame; 3.11 flags the first
     * frame of a run (is_entry, the byte before owner) */
    w->frames[n].entry =
        o->walk == PY_WALK_FRAMEOBJ || (!o->skip_owner3 && o->fr_owner && fb[o->fr_owner - 1] != 0);
    w->faddr[n] = frame;
    n++;
    frame = back;
  }
  if (first) {
    memcpy(p->spec.frames, spec_frames, nspec * sizeof(spec_frames[0]));
    p->spec.nframes = nspec;
  }
  return (int)n;
}

/* 3.14+: the interpreter counts code objects freed. When the count moved,
 * any cached code object of this process may have been freed and its
 * address reused, so cached entries are re-validated before their next use
 * (the cache compares its epoch). Sub-interpreters past the first few only
 * get the once-per-session re-validation. */
static void note_code_generation(struct py_proc *p, uint32_t ni, uint64_t gen) {
  if (ni >= sizeof(p->code_gen) / sizeof(p->code_gen[0])) return;
  if (p->code_gen[ni] != gen) {
    p->code_gen[ni] = gen;
    p->code_epoch++;
  }
}

/* An object pointer that stands for an exception: set and not None. */
static bool exc_set(const struct py_proc *p, uint64_t obj) {
  return walk_plausible(obj) && obj != p->none_addr;
}

/* Is the thread whose state is ts (at address t) raising or handling an
 * exception? The item exc_info points to is usually the thread state's
 * own (its exc_state member), already in ts; a generator's costs a read. */
static bool thread_in_exception(const struct py_proc *p, uint64_t t, const uint8_t *ts) {
  const struct py_offsets *o = &p->off;
  if (!o->ts_exc_info) return false; /* not known for this version */
  if (exc_set(p, walk_rd64(ts, o->ts_curexc))) return true;
  uint64_t v = walk_rd64(ts, o->ts_exc_info);
  if (o->ts_exc_inline) return exc_set(p, v);
  if (!walk_plausible(v)) return false;
  uint64_t item = v + o->exc_item_field, value = 0;
  if (item >= t && item + 8 <= t + o->ts_read && item + 8 > item)
    value = walk_rd64(ts, (uint32_t)(item - t));
  else if (pp_remote_read((pid_t)p->pid, item, &value, 8) < 0)
    return false;
  return exc_set(p, value);
}

/* Where the collector's flag of interp lives; 0: not known for this
 * process. One flag per interpreter from 3.9, one per process before. */
static uint64_t gc_flag_addr(const struct py_proc *p, uint64_t interp) {
  if (p->off.gc_kind == PY_GC_INTERP)
    return p->off.gc_collecting ? interp + p->off.gc_collecting : 0;
  return p->off.gc_kind != PY_GC_NONE ? p->gc_flag : 0;
}

/* Makes frames[0] a <GC> leaf above the n frames there (dropping the
 * root-most one when the frames array is full). */
static uint32_t push_gc_leaf(struct py_walker *w, uint32_t n, bool *truncated) {
  if (n >= w->max_depth + PY_EXTRA_FRAMES) {
    n--;
    *truncated = true;
  }
  memmove(w->frames + 1, w->frames, n * sizeof(w->frames[0]));
  w->frames[0] = (struct py_frame_ref){.code = NULL, .line = 0, .pseudo = "<GC>"};
  return n + 1;
}

/* Makes frames[0] an <op: NAME> leaf: the instruction the leaf frame
 * executes (its first byte is the opcode), one read. Unchanged when the
 * byte cannot be read or names no opcode of this version. */
static uint32_t push_opcode_leaf(struct py_walker *w, const struct py_proc *p, uint32_t n) {
  uint8_t op = 0;
  if (pp_remote_read((pid_t)p->pid, w->leaf_ip, &op, 1) < 0) return n;
  const char *name = python_opcode_name(p->minor, op);
  if (!name || p->major != 3) return n;
  snprintf(w->op_name, sizeof(w->op_name), "<op: %s>", name);
  memmove(w->frames + 1, w->frames, n * sizeof(w->frames[0]));
  w->frames[0] = (struct py_frame_ref){.code = NULL, .line = 0, .pseudo = w->op_name};
  return n + 1;
}

/* At kHz rates the cost of a sample is its system calls (each one a
 * round trip through the kernel's page-table walk of the target), not the
 * copying. Steady state, the addresses a sample needs barely change: the
 * interpreter, its first thread state, the 3.11 cframe, the data-stack
 * chunk. They are read together with the interpreter list head in one
 * process_vm_readv, and each is used only if the chain read from the
 * target leads to the same address again (walk_thread, python_sample);
 * otherwise that read is made as usual. One system call per sample instead
 * of four (3.12+, one thread). false when there is nothing to guess from
 * or the guess failed; *interp is then to be read again. */
static bool prefetch(struct py_walker *w, struct py_proc *p, uint32_t lo, uint32_t hi,
                     uint64_t *interp, uint8_t *ib, uint64_t *code_gen) {
  const struct py_offsets *o = &p->off;
  w->pre_ts = w->pre_cframe = w->pre_frame = w->pre_chunk_lo = 0;
  w->pre_chunk_len = w->pre_nframes = 0;
  w->pre_gc = false;
  if (!p->spec.interp) return false;
  struct pp_remote_iov iov[7 + PY_SPEC_FRAMES];
  size_t k = 0;
  iov[k++] = (struct pp_remote_iov){p->interp_head, interp, 8};
  iov[k++] = (struct pp_remote_iov){p->spec.interp + lo, ib, hi - lo};
  if (o->is_code_gen)
    iov[k++] = (struct pp_remote_iov){p->spec.interp + o->is_code_gen, code_gen, 8};
  if (p->spec.ts) iov[k++] = (struct pp_remote_iov){p->spec.ts, w->pre_ts_buf, o->ts_read};
  if (p->spec.cframe && o->walk == PY_WALK_CFRAME)
    iov[k++] = (struct pp_remote_iov){p->spec.cframe + o->cf_current, &w->pre_frame, 8};
  if (p->spec.chunk_lo && p->spec.chunk_len > 24 && p->spec.chunk_len <= PY_CHUNK_COPY_MAX)
    iov[k++] = (struct pp_remote_iov){p->spec.chunk_lo, w->chunk, p->spec.chunk_len};
  uint32_t nf = p->spec.nframes <= PY_SPEC_FRAMES ? p->spec.nframes : 0;
  if (o->fr_read > PY_FRAME_READ_MAX) nf = 0;
  for (uint32_t i = 0; i < nf; i++)
    iov[k++] = (struct pp_remote_iov){p->spec.frames[i], w->pre_frame_buf[i], o->fr_read};
  uint64_t gc_at = gc_flag_addr(p, p->spec.interp);
  if (w->gc && gc_at) iov[k++] = (struct pp_remote_iov){gc_at, &w->pre_gc_flag, 4};
  if (pp_remote_readv((pid_t)p->pid, iov, k) < 0 || *interp != p->spec.interp) {
    /* moved or unmapped: no guessing until a sample has read it afresh */
    memset(&p->spec, 0, sizeof(p->spec));
    *interp = 0;
    return false;
  }
  w->pre_ts = p->spec.ts;
  if (o->walk == PY_WALK_CFRAME) w->pre_cframe = p->spec.cframe;
  if (p->spec.chunk_lo && p->spec.chunk_len > 24 && p->spec.chunk_len <= PY_CHUNK_COPY_MAX) {
    w->pre_chunk_lo = p->spec.chunk_lo;
    w->pre_chunk_len = p->spec.chunk_len;
  }
  memcpy(w->pre_frame_addr, p->spec.frames, nf * sizeof(p->spec.frames[0]));
  w->pre_nframes = nf;
  w->pre_gc = w->gc && gc_at;
  return true;
}

int python_sample(struct py_walker *w, struct py_proc *p, struct py_codecache *cc,
                  enum py_thread_filter filter, py_thread_pred pred, py_stack_fn fn, void *ctx,
                  struct py_sample_result *res) {
  const struct py_offsets *o = &p->off;
  pid_t pid = (pid_t)p->pid;
  memset(res, 0, sizeof(*res));
  python_codecache_begin_sample(cc);
  uint32_t lo = o->is_next < o->is_tstate_head ? o->is_next : o->is_tstate_head;
  uint32_t hi = (o->is_next > o->is_tstate_head ? o->is_next : o->is_tstate_head) + 8;
  uint8_t ib[128];
  if (hi - lo > sizeof(ib) || o->ts_read > sizeof(w->pre_ts_buf)) return res->err = -EINVAL;
  uint64_t interp = 0, code_gen = 0;
  bool have_ib = prefetch(w, p, lo, hi, &interp, ib, &code_gen);
  int rc;
  if (!have_ib) {
    rc = pp_remote_read(pid, p->interp_head, &interp, 8);
    if (rc < 0) return res->err = rc;
  }
  if (!interp) return 0; /* finalising: nothing to sample */

  uint64_t holder = 0;
  if (filter == PY_GIL_THREAD) {
    rc = gil_holder(p, interp, &holder);
    if (rc < 0) return res->err = rc;
    /* nobody holds the (main) GIL: only 3.12+ sub-interpreters can run */
    if (!holder && o->gil_kind != PY_GIL_INTERP_PTR) return 0;
  }

  uint8_t ts[PY_TSTATE_READ_MAX];
  if (o->ts_read > sizeof(ts)) return res->err = -EINVAL;
  /* wall mode: the asyncio tasks no thread runs, on their loop's thread */
  bool waiting = w->async && filter == PY_ALL_THREADS;
  if (waiting) python_async_begin(&w->async_scratch);

  struct brent bi = {0, 1, 0};
  for (int ni = 0; interp && ni < PY_MAX_INTERPS; ni++) {
    if (!walk_plausible(interp) || brent_seen(&bi, interp)) return res->err = -ELOOP;
    if (ni == 0 && have_ib) {
      rc = 0; /* prefetched */
    } else if (o->is_code_gen) {
      /* one system call for the list fields and the generation word */
      struct pp_remote_iov iov[2] = {{interp + lo, ib, hi - lo},
                                     {interp + o->is_code_gen, &code_gen, 8}};
      rc = pp_remote_readv(pid, iov, 2);
    } else {
      rc = pp_remote_read(pid, interp + lo, ib, hi - lo);
    }
    if (rc < 0) return res->err = rc;
    if (ni == 0) p->spec.interp = interp;
    if (o->is_code_gen) note_code_generation(p, (uint32_t)ni, code_gen);
    /* The collector runs on the thread that holds the GIL: that thread's
     * stack gets the <GC> leaf. Both reads only happen while it runs. */
    uint64_t gc_holder = 0;
    uint64_t gc_at = w->gc ? gc_flag_addr(p, interp) : 0;
    if (gc_at && (ni == 0 || o->gc_kind == PY_GC_INTERP)) {
      int32_t collecting = 0;
      if (ni == 0 && w->pre_gc)
        collecting = w->pre_gc_flag;
      else if (pp_remote_read(pid, gc_at, &collecting, 4) < 0)
        collecting = 0; /* unreadable: no <GC>, the stacks are still good */
      if (collecting == 1 && gil_holder(p, interp, &gc_holder) < 0) gc_holder = 0;
    }
    uint64_t next_interp = walk_rd64(ib, o->is_next - lo);
    uint64_t t = walk_rd64(ib, o->is_tstate_head - lo);
    if (filter == PY_GIL_THREAD && ni > 0 && o->gil_kind == PY_GIL_INTERP_PTR &&
        gil_holder(p, interp, &holder) < 0)
      holder = 0; /* 3.12+: a sub-interpreter may have its own GIL */
    struct brent bt = {0, 1, 0};
    for (uint32_t nt = 0; t; nt++) {
      if (nt >= PY_MAX_THREADS || !walk_plausible(t) || brent_seen(&bt, t))
        return res->err = -ELOOP;
      bool first = ni == 0 && nt == 0;
      if (t == w->pre_ts) {
        memcpy(ts, w->pre_ts_buf, o->ts_read);
      } else {
        rc = pp_remote_read(pid, t, ts, o->ts_read);
        if (rc < 0) return res->err = rc;
      }
      if (first) p->spec.ts = t;
      uint64_t next = walk_rd64(ts, o->ts_next);
      if (walk_rd64(ts, o->ts_interp) != interp) return res->err = -EINVAL; /* torn or garbage */
      res->threads++;
      if ((filter == PY_GIL_THREAD && t != holder) || (w->main_only && (ni > 0 || next)) ||
          (filter == PY_EXCEPTION_THREADS && !thread_in_exception(p, t, ts))) {
        t = next;
        continue;
      }
      uint32_t tid = o->ts_native_tid ? (uint32_t)walk_rd64(ts, o->ts_native_tid)
                                      : tid_of(p, walk_rd64(ts, o->ts_thread_id));
      if (filter == PY_RUNNING_THREADS && pred && !pred(ctx, tid)) {
        t = next;
        continue;
      }
      bool truncated = false;
      int n = walk_thread(w, p, cc, ts, first, &truncated);
      if (n < 0) {
        /* the retry must see fresh memory, and the next sample must not
         * guess from a walk that failed */
        w->pre_ts = w->pre_cframe = w->pre_chunk_lo = 0;
        w->pre_chunk_len = w->pre_nframes = 0;
        memset(&p->spec, 0, sizeof(p->spec));
      }
      if (n < 0 && pp_remote_read(pid, t, ts, o->ts_read) == 0 &&
          walk_rd64(ts, o->ts_interp) == interp) {
        /* a running thread moved under us (a frame was freed or reused):
         * one fresh attempt, then the thread's sample counts as failed */
        n = walk_thread(w, p, cc, ts, first, &truncated);
      }
      if (n < 0) {
        if (first) memset(&p->spec, 0, sizeof(p->spec)); /* the retry may have set some */
        res->failed++;
        if (!res->err) res->err = n;
      } else if (n > 0) {
        w->async_scratch.tstate = t;
        if (waiting && ni == 0)
          python_async_note_loop(&w->async_scratch, p, tid, w->frames, w->faddr, (uint32_t)n);
        if (w->async)
          n = (int)python_async_chain(&w->async_scratch, p, cc, w->frames, w->faddr, (uint32_t)n,
                                      w->max_depth + PY_EXTRA_FRAMES - 2);
        if (w->opcodes && w->leaf_ip) n = (int)push_opcode_leaf(w, p, (uint32_t)n);
        if (gc_holder && t == gc_holder) n = (int)push_gc_leaf(w, (uint32_t)n, &truncated);
        fn(ctx, tid, w->frames, (uint32_t)n, truncated);
        res->sampled++;
      }
      t = next;
    }
    if (waiting && ni == 0)
      python_async_waiting(&w->async_scratch, p, cc, w->frames, w->max_depth + PY_EXTRA_FRAMES - 2,
                           fn, ctx);
    interp = next_interp;
  }
  return 0;
}
