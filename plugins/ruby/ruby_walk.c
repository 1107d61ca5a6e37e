/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Walking the control frames of one execution context, as rbspy does: the
 * frames between ec->cfp (the leaf) and the end of the VM stack are copied
 * in one read; a frame with an iseq and a pc is a Ruby frame (label, path,
 * line), a frame without iseq whose env says CFUNC is a C method,
 * everything else (ifunc, dummy) is skipped -- the rule Ruby's own
 * backtraces follow.
 *
 * Reads per sample: the EC, the frame block, one batched read of the env
 * words of C frames; iseq contents only on a cache miss, keyed by
 * (pid, iseq, pc), since a pc inside an iseq always maps to the same line,
 * and then for all the sample's misses together (ruby_iseq.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "polyprof/kit/remote.h"
#include "ruby.h"

#define CFP_PC 0
#define CFP_ISEQ 16
#define CFP_EP 32
#define ME_DEF 16
#define DEF_ORIGINAL_ID 32

#define VM_FRAME_MAGIC_MASK 0x7fff0001ull
#define VM_FRAME_MAGIC_CFUNC 0x55550001ull
#define VM_ENV_FLAG_LOCAL 0x2ull
#define T_MASK 0x1fu
#define T_IMEMO 0x1au
#define IMEMO_SVAR 2u
#define IMEMO_MENT 6u
#define ENV_LEVELS_MAX 16 /* nesting of blocks we follow to find a method */
#define BATCH 64          /* iovecs per process_vm_readv */

static uint32_t intern(struct ruby_state *st, const char *s) {
  return ruby_strings_intern(&st->strings, s, strlen(s));
}

static uint32_t add_frame(struct ruby_state *st, const char *name, const char *file, uint32_t line,
                          uint32_t kind) {
  uint32_t n = intern(st, name);
  uint32_t f = file ? intern(st, file) : RUBY_NO_ID;
  if (n == RUBY_NO_ID || (file && f == RUBY_NO_ID)) return RUBY_NO_ID;
  struct ruby_frame fr = {.name = n, .file = f, .line = line, .kind = kind};
  return ruby_frames_add(&st->frames, &fr);
}

/* The method entry of a C frame, as rb_vm_frame_method_entry finds it:
 * ep[-2] holds it (or an svar pointing to it); non-local envs defer to the
 * previous env through ep[-1]. `w` is {ep[-2], ep[-1], ep[0]}. */
static uint64_t method_entry(const struct ruby_target *t, uint64_t w[3]) {
  for (int level = 0; level < ENV_LEVELS_MAX; level++) {
    uint64_t cand = w[0];
    for (int hop = 0; hop < 2 && ruby_heap_ptr(cand); hop++) {
      uint64_t h[2];
      if (pp_remote_read((pid_t)t->pid, cand, h, sizeof(h)) < 0) break;
      if ((h[0] & T_MASK) != T_IMEMO) break;
      unsigned type = (unsigned)((h[0] >> 12) & 0xf);
      if (type == IMEMO_MENT) return cand;
      if (type != IMEMO_SVAR) break;
      cand = h[1]; /* svar->cref_or_me */
    }
    if (w[2] & VM_ENV_FLAG_LOCAL) return 0;
    uint64_t prev = w[1] & ~3ull;
    if (!ruby_heap_ptr(prev) || pp_remote_read((pid_t)t->pid, prev - 16, w, 24) < 0) return 0;
  }
  return 0;
}

static uint32_t resolve_cfunc(struct ruby_state *st, struct ruby_target *t, uint64_t w[3]) {
  if (!t->global_symbols) return st->unknown_cfunc_id;
  uint64_t key = w[0];
  uint32_t id = ruby_cache_get(&st->cfunc_cache, t->pid, key, 1);
  if (id != RUBY_NO_ID) return id;
  uint64_t me = method_entry(t, w), def = 0, mid = 0;
  if (!me || pp_remote_read((pid_t)t->pid, me + ME_DEF, &def, sizeof(def)) < 0 ||
      !ruby_heap_ptr(def) ||
      pp_remote_read((pid_t)t->pid, def + DEF_ORIGINAL_ID, &mid, sizeof(mid)) < 0)
    return st->unknown_cfunc_id;
  id = ruby_cache_get(&st->cfunc_cache, t->pid, 0, mid);
  if (id == RUBY_NO_ID) {
    char name[RUBY_STR_MAX];
    char label[RUBY_STR_MAX + 40];
    if (ruby_id_name(t, mid, name, sizeof(name)) <= 0) return st->unknown_cfunc_id;
    snprintf(label, sizeof(label), RUBY_CFUNC_FMT, name);
    id = add_frame(st, label, NULL, 0, PP_FRAME_NATIVE);
    if (id == RUBY_NO_ID) return RUBY_NO_ID;
    ruby_cache_put(&st->cfunc_cache, t->pid, 0, mid, id); /* IDs never change meaning */
  }
  ruby_cache_put(&st->cfunc_cache, t->pid, key, 1, id);
  return id;
}

/* Frame ids of the n control frames in `blk` (leaf first, already read
 * from the target) into st->ids. */
/* A frame without iseq: its env words {ep[-2], ep[-1], ep[0]} say whether
 * it is a C method (and which) or a dummy/ifunc frame to skip. */
static int classify_env(struct ruby_state *st, struct ruby_target *t, uint64_t w[3],
                        uint32_t slot) {
  if ((w[2] & VM_FRAME_MAGIC_MASK) != VM_FRAME_MAGIC_CFUNC) {
    st->ids[slot] = RUBY_NO_ID; /* dummy or ifunc frame: not in a backtrace */
    return 0;
  }
  st->ids[slot] = resolve_cfunc(st, t, w);
  return st->ids[slot] == RUBY_NO_ID ? -ENOSPC : 0;
}

/* Env words read ahead, in the same system call as the frames. */
struct env_prefetch {
  uint32_t n;
  uint64_t ep[RUBY_PREFETCH_ENVS];
  uint64_t w[RUBY_PREFETCH_ENVS][3];
};

/* Frame ids of the n control frames in `blk` (leaf first, already read
 * from the target) into st->ids. Env words of frames without iseq come
 * from `pre` when it has them, else from one batched read. With `th`, the
 * env addresses seen are kept there for the next sample's prefetch. */
static int walk_frames(struct ruby_state *st, struct ruby_target *t, const unsigned char *blk,
                       uint64_t n, uint64_t vm_stack, uint64_t words,
                       const struct env_prefetch *pre, struct ruby_thread *th) {
  uint64_t csz = (uint64_t)t->L->cfp_size;
  int rc;
  if (th) th->nenv = 0;
  /* first pass: Ruby frames from the cache, C frame candidates batched */
  uint32_t out = 0;
  uint32_t pending[BATCH];
  uint64_t win[BATCH][3];
  uint32_t npending = 0, nmiss = 0;
  for (uint64_t i = 0; i <= n; i++) {
    if (npending == BATCH || (i == n && npending)) {
      struct pp_remote_iov iov[BATCH];
      for (uint32_t k = 0; k < npending; k++)
        iov[k] = (struct pp_remote_iov){.addr = st->eps[pending[k]] - 16, .buf = win[k], .len = 24};
      rc = pp_remote_readv((pid_t)t->pid, iov, npending);
      if (rc < 0) return rc;
      for (uint32_t k = 0; k < npending; k++)
        if ((rc = classify_env(st, t, win[k], pending[k])) < 0) return rc;
      npending = 0;
    }
    if (i == n) break;
    const unsigned char *f = blk + i * csz;
    uint64_t pc = ruby_rd64(f + CFP_PC), iseq = ruby_rd64(f + CFP_ISEQ), ep = ruby_rd64(f + CFP_EP);
    uint32_t slot = out++;
    st->ids[slot] = RUBY_NO_ID;
    if (iseq && pc) {
      if (!ruby_heap_ptr(iseq)) continue;
      st->ids[slot] = ruby_cache_get(&st->iseq_cache, t->pid, iseq, pc);
      if (st->ids[slot] == RUBY_NO_ID)
        st->misses[nmiss++] = (struct ruby_miss){.iseq = iseq, .pc = pc, .slot = slot};
    } else if (!iseq && ruby_heap_ptr(ep) && ep >= vm_stack + 16 && ep < vm_stack + words * 8) {
      if (th) {
        /* keep the root-most ones: they are the ones that stay put */
        if (th->nenv == RUBY_PREFETCH_ENVS) {
          memmove(th->env, th->env + 1, (RUBY_PREFETCH_ENVS - 1) * sizeof(th->env[0]));
          th->nenv--;
        }
        th->env[th->nenv++] = ep;
      }
      uint32_t k = 0;
      while (pre && k < pre->n && pre->ep[k] != ep)
        k++;
      if (pre && k < pre->n) {
        uint64_t w[3] = {pre->w[k][0], pre->w[k][1], pre->w[k][2]};
        if ((rc = classify_env(st, t, w, slot)) < 0) return rc;
        continue;
      }
      st->eps[slot] = ep;
      pending[npending++] = slot;
    }
  }
  /* the Ruby frames the cache missed, all together */
  if (nmiss) {
    rc = ruby_iseq_resolve(st, t, st->misses, nmiss);
    if (rc < 0) return rc;
    for (uint32_t k = 0; k < nmiss; k++) {
      if (st->ids[st->misses[k].slot] != RUBY_NO_ID) continue;
      st->c_str_fail++;
      /* a torn leaf fails the sample; deeper, skip it as rbspy does */
      if (st->misses[k].slot == 0) return -EFAULT;
    }
  }
  /* compact: drop skipped frames, keep leaf-first order */
  uint32_t m = 0;
  for (uint32_t i = 0; i < out; i++)
    if (st->ids[i] != RUBY_NO_ID) st->ids[m++] = st->ids[i];
  return (int)m;
}

/* The frame block of an EC: from cfp (the leaf) to the thread's dummy
 * first frame at the end of the VM stack. Checks the EC's words. */
static int frame_span(struct ruby_state *st, const struct ruby_target *t, const uint64_t e[3],
                      uint64_t *base, uint64_t *n, bool *truncated) {
  uint64_t vm_stack = e[0], words = e[1], cfp = e[2];
  if (!ruby_heap_ptr(vm_stack) || words == 0 || words > RUBY_MAX_VM_STACK_WORDS) return -EINVAL;
  uint64_t csz = (uint64_t)t->L->cfp_size;
  *base = vm_stack + words * 8 - csz; /* the thread's dummy first frame */
  if (cfp < vm_stack || cfp >= *base || (*base - cfp) % csz) return -EFAULT; /* out of sync */
  *n = (*base - cfp) / csz;
  *truncated = false;
  if (*n > (uint64_t)st->max_depth) {
    *n = (uint64_t)st->max_depth; /* keep the leaf side: that is where time is spent */
    *truncated = true;
  }
  return 0;
}

/* Reads the execution context at ec (vm_stack, its size in words, the
 * current control frame) into e and its control frames into st->cfp_buf.
 * 1 with *n frames, 0 for a thread that has no VM stack (starting or
 * finishing: no Ruby frames, as rbspy shows "(unknown) [c function]", not a
 * torn read), or -errno. */
static int read_ec_frames(struct ruby_state *st, struct ruby_target *t, uint64_t ec, uint64_t e[3],
                          uint64_t *n, bool *truncated) {
  if (!ruby_heap_ptr(ec)) return -EINVAL;
  int rc = pp_remote_read((pid_t)t->pid, ec, e, 3 * sizeof(uint64_t));
  if (rc < 0) return rc;
  if (e[0] == 0) return 0;
  uint64_t base;
  rc = frame_span(st, t, e, &base, n, truncated);
  if (rc < 0) return rc;
  rc = pp_remote_read((pid_t)t->pid, e[2], st->cfp_buf, *n * (uint64_t)t->L->cfp_size);
  return rc < 0 ? rc : 1;
}

int ruby_walk(struct ruby_state *st, struct ruby_target *t, uint64_t ec, bool *truncated) {
  uint64_t e[3], n;
  *truncated = false;
  int rc = read_ec_frames(st, t, ec, e, &n, truncated);
  if (rc <= 0) return rc;
  return walk_frames(st, t, st->cfp_buf, n, e[0], e[1], NULL, NULL);
}

/* Frames kept around the last depth when guessing where the leaf is. */
#define GUESS_SLACK 32

int ruby_walk_thread(struct ruby_state *st, struct ruby_target *t, struct ruby_thread *th,
                     bool *truncated) {
  const struct ruby_layout *L = t->L;
  uint64_t csz = (uint64_t)L->cfp_size;
  uint64_t ec = 0, e[3] = {0, 0, 0}, n;
  *truncated = false;
  if (th->ec && th->words) {
    /* One read for the thread's EC pointer, the EC's stack words and the
     * frames near the end of its VM stack, guessing from the last sample
     * that the EC and the stack did not move and the depth changed little.
     * Most samples of a thread are then one system call. */
    uint64_t end = th->vm_stack + th->words * 8 - csz;
    uint64_t w = (uint64_t)th->depth + GUESS_SLACK;
    if (w > (uint64_t)st->max_depth) w = (uint64_t)st->max_depth;
    if (w * csz > end - th->vm_stack) w = (end - th->vm_stack) / csz;
    uint64_t from = end - w * csz;
    struct env_prefetch pre = {.n = th->nenv};
    struct pp_remote_iov iov[3 + RUBY_PREFETCH_ENVS] = {
        {.addr = th->addr + (uint64_t)L->thread_ec, .buf = &ec, .len = sizeof(ec)},
        {.addr = th->ec, .buf = e, .len = sizeof(e)},
        {.addr = from, .buf = st->cfp_buf, .len = w * csz},
    };
    /* and the env words of the frames without iseq (C methods) the last
     * sample met: those near the root rarely move */
    for (uint32_t k = 0; k < pre.n; k++) {
      pre.ep[k] = th->env[k];
      iov[3 + k] = (struct pp_remote_iov){.addr = th->env[k] - 16, .buf = pre.w[k], .len = 24};
    }
    int rc = pp_remote_readv((pid_t)t->pid, iov, 3 + pre.n);
    if (rc == -ESRCH) return rc;
    if (rc == 0 && ec == th->ec && e[0] == th->vm_stack && e[1] == th->words && e[2] >= from &&
        e[2] < end && (e[2] - from) % csz == 0) {
      n = (end - e[2]) / csz;
      th->depth = (uint32_t)n;
      st->c_guess_hits++;
      return walk_frames(st, t, st->cfp_buf + (e[2] - from), n, e[0], e[1], &pre, th);
    }
    if (rc < 0) ec = 0;
  }
  if (!ec) {
    int rc = pp_remote_read((pid_t)t->pid, th->addr + (uint64_t)L->thread_ec, &ec, sizeof(ec));
    if (rc < 0) return rc;
  }
  th->ec = th->words = 0;
  if (!ec) return -ENOENT; /* the Ruby thread finished or has not started */
  int rc = read_ec_frames(st, t, ec, e, &n, truncated);
  if (rc <= 0) return rc;
  th->ec = ec;
  th->vm_stack = e[0];
  th->words = e[1];
  th->depth = (uint32_t)n;
  return walk_frames(st, t, st->cfp_buf, n, e[0], e[1], NULL, th);
}
