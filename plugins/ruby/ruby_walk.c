/*
 * Walking the control frames of one execution context (reference
 * php-ruby-remote.md §4): the frames between ec->cfp (the leaf) and the end
 * of the VM stack are copied in one read; a frame with an iseq and a pc is
 * a Ruby frame (label, path, line), a frame without iseq whose env says
 * CFUNC is a C method, everything else (ifunc, dummy) is skipped -- the rule
 * Ruby's own backtraces follow.
 *
 * Reads per sample: the EC, the frame block, one batched read of the env
 * words of C frames; iseq contents only on a cache miss, keyed by
 * (pid, iseq, pc), since a pc inside an iseq always maps to the same line.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ruby.h"
#include "support/remote.h"

#define CFP_PC 0
#define CFP_ISEQ 16
#define CFP_EP 32
#define ISEQ_BODY 16
#define BODY_PATHOBJ 64
#define BODY_LABEL 80
#define ME_DEF 16
#define DEF_ORIGINAL_ID 32
#define BODY_READ 256 /* covers every field we use in every layout */

#define VM_FRAME_MAGIC_MASK 0x7fff0001ull
#define VM_FRAME_MAGIC_CFUNC 0x55550001ull
#define VM_ENV_FLAG_LOCAL 0x2ull
#define T_MASK 0x1fu
#define T_STRING 0x05u
#define T_ARRAY 0x07u
#define T_IMEMO 0x1au
#define IMEMO_SVAR 2u
#define IMEMO_MENT 6u
#define QNIL 0x08ull
#define ENV_LEVELS_MAX 16 /* nesting of blocks we follow to find a method */
#define BATCH 64          /* iovecs per process_vm_readv */

static inline uint64_t rd64(const unsigned char *p) {
  uint64_t v;
  memcpy(&v, p, sizeof(v));
  return v;
}

static bool heap_ptr(uint64_t a) {
  return a >= 4096 && a < (1ull << 47) && (a & 7) == 0;
}

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

/* Path of an iseq: pathobj is the path String, or [path, realpath]; the
 * absolute realpath is what rbspy prints when there is one. */
static int read_path(const struct ruby_target *t, uint64_t pathobj, char *buf, size_t cap) {
  uint64_t flags;
  int rc = pp_remote_read((pid_t)t->pid, pathobj, &flags, sizeof(flags));
  if (rc < 0) return rc;
  if ((flags & T_MASK) == T_STRING) return ruby_read_string(t, pathobj, buf, cap);
  if ((flags & T_MASK) != T_ARRAY) return -EINVAL;
  uint64_t real = QNIL, rel = QNIL;
  if (ruby_array_at(t, pathobj, 1, &real) == 0 && real != QNIL && heap_ptr(real)) {
    rc = ruby_read_string(t, real, buf, cap);
    if (rc > 0) return rc;
  }
  rc = ruby_array_at(t, pathobj, 0, &rel);
  if (rc < 0) return rc;
  return ruby_read_string(t, rel, buf, cap);
}

static uint32_t resolve_iseq(struct ruby_state *st, struct ruby_target *t, uint64_t iseq,
                             uint64_t pc) {
  uint64_t body;
  if (pp_remote_read((pid_t)t->pid, iseq + ISEQ_BODY, &body, sizeof(body)) < 0 || !heap_ptr(body))
    return RUBY_NO_ID;
  unsigned char b[BODY_READ];
  if (pp_remote_read((pid_t)t->pid, body, b, sizeof(b)) < 0) return RUBY_NO_ID;
  char label[RUBY_STR_MAX], path[RUBY_STR_MAX];
  if (ruby_read_string(t, rd64(b + BODY_LABEL), label, sizeof(label)) <= 0) return RUBY_NO_ID;
  if (read_path(t, rd64(b + BODY_PATHOBJ), path, sizeof(path)) < 0) return RUBY_NO_ID;
  uint32_t line = ruby_line_of(t, b, sizeof(b), pc);
  if (!line) {
    /* what Ruby itself reports without a position: the first line */
    int64_t first = (int64_t)rd64(b + t->L->first_lineno);
    if (t->L->first_lineno_value)
      first >>= 1;
    else
      first = (int32_t)first;
    if (first > 0 && first < (1 << 30)) line = (uint32_t)first;
  }
  uint32_t id = add_frame(st, label, path[0] ? path : NULL, line, PP_FRAME_RUBY);
  if (id != RUBY_NO_ID) ruby_cache_put(&st->iseq_cache, t->pid, iseq, pc, id);
  return id;
}

/* The method entry of a C frame, as rb_vm_frame_method_entry finds it:
 * ep[-2] holds it (or an svar pointing to it); non-local envs defer to the
 * previous env through ep[-1]. `w` is {ep[-2], ep[-1], ep[0]}. */
static uint64_t method_entry(const struct ruby_target *t, uint64_t w[3]) {
  for (int level = 0; level < ENV_LEVELS_MAX; level++) {
    uint64_t cand = w[0];
    for (int hop = 0; hop < 2 && heap_ptr(cand); hop++) {
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
    if (!heap_ptr(prev) || pp_remote_read((pid_t)t->pid, prev - 16, w, 24) < 0) return 0;
  }
  return 0;
}

static uint32_t resolve_cfunc(struct ruby_state *st, struct ruby_target *t, uint64_t w[3]) {
  if (!t->global_symbols) return st->unknown_cfunc_id;
  uint64_t key = w[0];
  uint32_t id = ruby_cache_get(&st->cfunc_cache, t->pid, key, 1);
  if (id != RUBY_NO_ID) return id;
  uint64_t me = method_entry(t, w), def = 0, mid = 0;
  if (!me || pp_remote_read((pid_t)t->pid, me + ME_DEF, &def, sizeof(def)) < 0 || !heap_ptr(def) ||
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

int ruby_walk(struct ruby_state *st, struct ruby_target *t, uint64_t ec, bool *truncated) {
  const struct ruby_layout *L = t->L;
  uint64_t e[3];
  *truncated = false;
  if (!heap_ptr(ec)) return -EINVAL;
  int rc = pp_remote_read((pid_t)t->pid, ec, e, sizeof(e));
  if (rc < 0) return rc;
  uint64_t vm_stack = e[0], words = e[1], cfp = e[2];
  /* a thread starting or finishing has no VM stack: no Ruby frames (rbspy
   * shows "(unknown) [c function]"), not a torn read */
  if (vm_stack == 0) return 0;
  if (!heap_ptr(vm_stack) || words == 0 || words > RUBY_MAX_VM_STACK_WORDS) return -EINVAL;
  uint64_t csz = (uint64_t)L->cfp_size;
  uint64_t base = vm_stack + words * 8 - csz; /* the thread's dummy first frame */
  if (cfp < vm_stack || cfp >= base || (base - cfp) % csz) return -EFAULT; /* out of sync */
  uint64_t n = (base - cfp) / csz;
  if (n > (uint64_t)st->max_depth) {
    n = (uint64_t)st->max_depth; /* keep the leaf side: that is where time is spent */
    *truncated = true;
  }
  rc = pp_remote_read((pid_t)t->pid, cfp, st->cfp_buf, n * csz);
  if (rc < 0) return rc;

  /* first pass: Ruby frames from the cache, C frame candidates batched */
  uint32_t out = 0;
  uint32_t pending[BATCH];
  uint64_t win[BATCH][3];
  uint32_t npending = 0;
  for (uint64_t i = 0; i <= n; i++) {
    if (npending == BATCH || (i == n && npending)) {
      struct pp_remote_iov iov[BATCH];
      for (uint32_t k = 0; k < npending; k++)
        iov[k] = (struct pp_remote_iov){.addr = st->eps[pending[k]] - 16, .buf = win[k], .len = 24};
      rc = pp_remote_readv((pid_t)t->pid, iov, npending);
      if (rc < 0) return rc;
      for (uint32_t k = 0; k < npending; k++) {
        uint32_t slot = pending[k];
        if ((win[k][2] & VM_FRAME_MAGIC_MASK) != VM_FRAME_MAGIC_CFUNC) {
          st->ids[slot] = RUBY_NO_ID; /* dummy or ifunc frame: not in a backtrace */
          continue;
        }
        st->ids[slot] = resolve_cfunc(st, t, win[k]);
        if (st->ids[slot] == RUBY_NO_ID) return -ENOSPC;
      }
      npending = 0;
    }
    if (i == n) break;
    const unsigned char *f = st->cfp_buf + i * csz;
    uint64_t pc = rd64(f + CFP_PC), iseq = rd64(f + CFP_ISEQ), ep = rd64(f + CFP_EP);
    uint32_t slot = out++;
    st->ids[slot] = RUBY_NO_ID;
    if (iseq && pc) {
      if (!heap_ptr(iseq)) continue;
      uint32_t id = ruby_cache_get(&st->iseq_cache, t->pid, iseq, pc);
      if (id == RUBY_NO_ID) {
        id = resolve_iseq(st, t, iseq, pc);
        if (id == RUBY_NO_ID) {
          st->c_str_fail++;
          /* a torn leaf fails the sample; deeper, skip it as rbspy does */
          if (slot == 0) return -EFAULT;
          continue;
        }
      }
      st->ids[slot] = id;
    } else if (!iseq && heap_ptr(ep) && ep >= vm_stack && ep < vm_stack + words * 8) {
      st->eps[slot] = ep;
      pending[npending++] = slot;
    }
  }
  /* compact: drop skipped frames, keep leaf-first order */
  uint32_t m = 0;
  for (uint32_t i = 0; i < out; i++)
    if (st->ids[i] != RUBY_NO_ID) st->ids[m++] = st->ids[i];
  return (int)m;
}
