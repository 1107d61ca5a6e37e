/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading one PHP call stack from outside the process.
 *
 * EG.current_execute_data -> zend_execute_data {opline, func, prev...};
 * func -> zend_function {type, function_name, scope, op_array.filename};
 * opline -> zend_op.lineno (the executing line, which phpspy does not print).
 *
 * The target keeps running, so any pointer may be stale: every read is
 * bounded, a failed read mid-walk means the stack changed under us (the
 * sample is dropped and counted), and the depth is capped.
 *
 * Cost and consistency come from the same trick: the frames of a call chain
 * sit next to each other on the VM stack (a callee's frame is pushed right
 * above its caller's), so one read of the 4 KiB below the leaf frame usually
 * holds the whole chain, and one more process_vm_readv fetches every
 * frame's function and line. The window is read in the same call as
 * executor_globals, where the previous sample's leaf was (a busy process is
 * usually still there, in a caller, or one call deeper): 2 system calls per
 * sample whatever the depth (phpspy: ~5 per frame), 3 when the leaf moved
 * out of the window. And the chain is copied in one go instead of frame by
 * frame while the target runs on.
 *
 * Names and files of a function are cached by (pid, zend_function address)
 * and reused only while the function's name/scope/filename pointers are the
 * ones cached.
 *
 * Lines. Callers are exact: every call instruction stores its opline in the
 * caller's frame before the callee starts. The leaf is not: PHP's hybrid VM
 * keeps the executing opline in a CPU register and stores it into the frame
 * only when an instruction may call out, allocate or throw (SAVE_OPLINE),
 * and a new frame does not store it at all on entry, so until its first such
 * instruction the frame holds whatever the previous frame at that VM stack
 * address left there. Hence a saved opline counts only if it is one of the
 * frame's own function's instructions; a leaf's saved RETURN is a previous
 * call's exit (once RETURN saves it the frame stops being current). Either
 * way the frame is shown at the function's first line (phpspy's choice for
 * every frame) and counted in stale_lines.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "php.h"
#include "polyprof/kit/remote.h"

#define ZSTR_LEN_OFF 16
#define ZSTR_VAL_OFF 24
#define CE_NAME_OFF 8
#define FN_NAME_OFF 8
#define FN_SCOPE_OFF 16
#define FN_COMMON_SIZE 32 /* type .. scope: what an internal function surely has */
#define OP_LINENO_OFF 24  /* zend_op.lineno (u32), then opcode (u8) at +28 */
#define OP_READ 8
#define ZEND_OP_SIZE 32
#define ZEND_RETURN 62
#define ZEND_RETURN_BY_REF 111
#define ZEND_GENERATOR_RETURN 161
#define ZEND_INTERNAL_FUNCTION 1
#define ZEND_USER_FUNCTION 2
#define ZEND_EVAL_CODE 4
#define OP_ARRAY_MAX 256
#define VM_WINDOW 4096 /* bytes of VM stack read at once, ending at a frame */
#define VM_ABOVE 512   /* ...or past the previous leaf: room for a call deeper */
#define BATCH 32       /* frames per readv: two pieces each, pp_remote_readv takes 64 */
#define INTERNAL_FILE "<internal>:-1" /* phpspy's text for C functions and eval */

struct fn_entry {
  uint32_t pid;
  uint32_t used;
  uint64_t func, name_ptr, scope_ptr, file_ptr;
  char name[PHP_NAME_MAX];
  char file[PHP_STR_MAX];
};

/* one frame as found in the VM stack */
struct raw_frame {
  uint64_t ed, opline, func, prev;
};

struct php_walker {
  struct fn_entry *cache;
  size_t cache_mask;
  uint32_t max_depth;
  struct pp_frame *frames;
  char *text;            /* max_depth * (PHP_NAME_MAX + PHP_STR_MAX): this walk's strings */
  struct raw_frame *raw; /* max_depth */
  unsigned char *fbuf;   /* max_depth * OP_ARRAY_MAX: each frame's function */
  unsigned char *opbuf;  /* max_depth * OP_READ: each frame's saved opline line/opcode */
  unsigned char *op_ok;  /* max_depth: opbuf holds a read value */
  unsigned char *window; /* VM_WINDOW */
  uint64_t stale_lines;
};

struct php_walker *php_walker_new(size_t cache_entries, uint32_t max_depth) {
  struct php_walker *w = calloc(1, sizeof(*w));
  if (!w) return NULL;
  size_t cap = 16;
  while (cap < cache_entries)
    cap *= 2;
  size_t d = max_depth ? max_depth : 1;
  w->cache = calloc(cap, sizeof(*w->cache));
  w->frames = calloc(d, sizeof(*w->frames));
  w->text = malloc(d * (PHP_NAME_MAX + PHP_STR_MAX));
  w->raw = calloc(d, sizeof(*w->raw));
  w->fbuf = malloc(d * OP_ARRAY_MAX);
  w->opbuf = malloc(d * OP_READ);
  w->op_ok = malloc(d);
  w->window = malloc(VM_WINDOW);
  if (!w->cache || !w->frames || !w->text || !w->raw || !w->fbuf || !w->opbuf || !w->op_ok ||
      !w->window) {
    php_walker_free(w);
    return NULL;
  }
  w->cache_mask = cap - 1;
  w->max_depth = max_depth;
  return w;
}

void php_walker_free(struct php_walker *w) {
  if (!w) return;
  free(w->cache);
  free(w->frames);
  free(w->text);
  free(w->raw);
  free(w->fbuf);
  free(w->opbuf);
  free(w->op_ok);
  free(w->window);
  free(w);
}

void php_walker_forget_pid(struct php_walker *w, uint32_t pid) {
  for (size_t i = 0; i <= w->cache_mask; i++)
    if (w->cache[i].pid == pid) w->cache[i].used = 0;
}

uint64_t php_walker_take_stale_lines(struct php_walker *w) {
  uint64_t n = w->stale_lines;
  w->stale_lines = 0;
  return n;
}

static uint64_t rd64(const unsigned char *b, size_t off) {
  uint64_t v;
  memcpy(&v, b + off, sizeof(v));
  return v;
}

static uint32_t rd32(const unsigned char *b, size_t off) {
  uint32_t v;
  memcpy(&v, b + off, sizeof(v));
  return v;
}

static int map_err(int rc) {
  if (rc == -ESRCH) return PHP_WALK_GONE;
  if (rc == -EPERM) return PHP_WALK_DENIED;
  return PHP_WALK_TORN;
}

/* Reads a zend_string into out (cut to cap-1 bytes). Control characters
 * are replaced: the text ends up in .col lines. */
static int read_zstr(uint32_t pid, uint64_t addr, char *out, size_t cap) {
  unsigned char hdr[ZSTR_VAL_OFF + 48];
  uint64_t len;
  /* one read covers short strings (most names); the header alone is the
   * fallback near the end of a mapping */
  int rc = pp_remote_read(pid, addr, hdr, sizeof(hdr));
  int whole = rc == 0;
  if (!whole) rc = pp_remote_read(pid, addr, hdr, ZSTR_VAL_OFF);
  if (rc < 0) return rc;
  len = rd64(hdr, ZSTR_LEN_OFF);
  if (len > (1u << 20)) return -EFAULT; /* not a sane name: torn */
  size_t n = len < cap - 1 ? (size_t)len : cap - 1;
  if (whole && n <= sizeof(hdr) - ZSTR_VAL_OFF) {
    memcpy(out, hdr + ZSTR_VAL_OFF, n);
  } else {
    rc = pp_remote_read(pid, addr + ZSTR_VAL_OFF, out, n);
    if (rc < 0) return rc;
  }
  out[n] = '\0';
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)out[i] < 0x20) out[i] = '?';
  return 0;
}

/* Fills e with the names of the function whose copied op_array is fb. */
static int describe(uint32_t pid, const unsigned char *fb, struct fn_entry *e) {
  uint8_t type = fb[0];
  char fn[PHP_STR_MAX], cls[PHP_STR_MAX];
  int rc;
  if (e->name_ptr) {
    rc = read_zstr(pid, e->name_ptr, fn, sizeof(fn));
    if (rc < 0) return rc;
  } else {
    snprintf(fn, sizeof(fn), "<main>"); /* top-level code of a script or include */
  }
  cls[0] = '\0';
  if (e->scope_ptr) {
    uint64_t cname = 0;
    rc = pp_remote_read(pid, e->scope_ptr + CE_NAME_OFF, &cname, sizeof(cname));
    if (rc < 0) return rc;
    if (cname) {
      rc = read_zstr(pid, cname, cls, sizeof(cls));
      if (rc < 0) return rc;
    }
  }
  if (cls[0])
    snprintf(e->name, sizeof(e->name), "%s::%s", cls, fn);
  else
    snprintf(e->name, sizeof(e->name), "%s", fn);
  if (type == ZEND_USER_FUNCTION && e->file_ptr) {
    rc = read_zstr(pid, e->file_ptr, e->file, sizeof(e->file));
    if (rc < 0) return rc;
  } else {
    snprintf(e->file, sizeof(e->file), INTERNAL_FILE);
  }
  return 0;
}

/* Whether current is ed, about to be taken from a window just read, or
 * one of the n frames above it taken before. */
static int on_chain(const struct php_walker *w, uint32_t n, uint64_t ed, uint64_t current) {
  if (current == ed) return 1;
  for (uint32_t i = 0; i < n; i++)
    if (w->raw[i].ed == current) return 1;
  return 0;
}

/* Follows prev_execute_data from ed, reading the VM stack a window at a
 * time (the first may come already read, with current_execute_data read
 * after it: first_after). Returns the number of frames (> 0) or a negative
 * PHP_WALK_ code; *truncated when max_depth stopped it.
 *
 * The target runs on while its stack is copied, and the worker can be
 * preempted for milliseconds on a loaded host, even inside one
 * process_vm_readv between two of its pieces. The frames of a call that has
 * returned stay in memory: a leaf read at the start and a window read after
 * it returned shows the leftover frame above its caller's slot, which by
 * then holds another call (md5 under heavy_a: both called from the same
 * loop). So current_execute_data is read just before and just after every
 * window, in the same system call, and both must be the first frame taken
 * from that window or a frame above it (a callee of it, still running);
 * otherwise the sample is torn. The leaf returning or calling deeper across
 * a window costs a sample; a busy target is usually in the first window,
 * read in one piece with the leaf. */
static int collect(struct php_walker *w, uint32_t pid, const struct php_layout *L, uint64_t ed,
                   uint64_t eg_ced, uint64_t lo, uint64_t hi, uint64_t first_after,
                   int *truncated) {
  if (first_after != ed) lo = hi = 0; /* moved while it was read: read it again */
  uint32_t n = 0;                     /* the window holds [lo, hi) (empty: lo == hi) */
  *truncated = 0;
  while (ed) {
    if (n == w->max_depth) {
      *truncated = 1;
      break;
    }
    if (ed & 7) return -PHP_WALK_TORN; /* execute_data is 8-aligned */
    if (ed < lo || hi < L->ed_size || ed > hi - L->ed_size) {
      uint64_t end = ed + L->ed_size;
      if (end < ed) return -PHP_WALK_TORN;
      uint64_t start = end > VM_WINDOW ? end - VM_WINDOW : 0, before = 0, after = 0;
      struct pp_remote_iov iov[3] = {{eg_ced, &before, sizeof(before)},
                                     {start, w->window, (size_t)(end - start)},
                                     {eg_ced, &after, sizeof(after)}};
      int rc = start ? pp_remote_readv(pid, iov, 3) : -EFAULT;
      if (rc < 0 && rc != -ESRCH && rc != -EPERM) {
        /* the frame is near the start of a mapping (a fiber's or a
         * generator's frame, or an odd allocator): that frame alone */
        start = ed;
        iov[1] = (struct pp_remote_iov){ed, w->window, L->ed_size};
        rc = pp_remote_readv(pid, iov, 3);
      }
      if (rc < 0) return n ? -PHP_WALK_TORN : -map_err(rc);
      if (!on_chain(w, n, ed, before) || !on_chain(w, n, ed, after)) return -PHP_WALK_TORN;
      lo = start;
      hi = end;
    }
    const unsigned char *edb = w->window + (ed - lo);
    struct raw_frame *r = &w->raw[n++];
    r->ed = ed;
    r->opline = rd64(edb, L->ed_opline);
    r->func = rd64(edb, L->ed_func);
    r->prev = rd64(edb, L->ed_prev);
    if (!r->func || (r->func & 7) || (r->prev & 7)) return -PHP_WALK_TORN;
    if (r->prev == ed) return -PHP_WALK_TORN; /* a loop: stale memory */
    ed = r->prev;
  }
  return (int)n;
}

/* One frame's function (and saved opline) when the batch read failed:
 * internal functions are smaller than an op_array, and a stale opline may
 * point anywhere. A user function that cannot be read whole is torn. */
static int read_one(uint32_t pid, const struct php_layout *L, const struct raw_frame *r,
                    unsigned char *fb, unsigned char *op, unsigned char *op_ok) {
  int rc = pp_remote_read(pid, r->func, fb, L->op_size);
  if (rc < 0) {
    if (rc == -ESRCH || rc == -EPERM) return rc;
    rc = pp_remote_read(pid, r->func, fb, FN_COMMON_SIZE);
    if (rc < 0) return rc;
    if (fb[0] == ZEND_USER_FUNCTION) return -EFAULT;
  }
  *op_ok = r->opline && pp_remote_read(pid, r->opline + OP_LINENO_OFF, op, OP_READ) == 0;
  return 0;
}

/* Every frame's function and saved opline, BATCH frames per system call. */
static int read_functions(struct php_walker *w, uint32_t pid, const struct php_layout *L,
                          uint32_t n) {
  struct pp_remote_iov iov[2 * BATCH];
  for (uint32_t first = 0; first < n; first += BATCH) {
    uint32_t cnt = n - first < BATCH ? n - first : BATCH;
    size_t k = 0;
    for (uint32_t i = first; i < first + cnt; i++)
      iov[k++] =
          (struct pp_remote_iov){w->raw[i].func, w->fbuf + (size_t)i * OP_ARRAY_MAX, L->op_size};
    for (uint32_t i = first; i < first + cnt; i++) {
      w->op_ok[i] = w->raw[i].opline != 0;
      if (w->op_ok[i])
        iov[k++] = (struct pp_remote_iov){w->raw[i].opline + OP_LINENO_OFF,
                                          w->opbuf + (size_t)i * OP_READ, OP_READ};
    }
    int rc = pp_remote_readv(pid, iov, k);
    if (rc == -ESRCH || rc == -EPERM) return rc;
    if (rc < 0) {
      for (uint32_t i = first; i < first + cnt; i++) {
        rc = read_one(pid, L, &w->raw[i], w->fbuf + (size_t)i * OP_ARRAY_MAX,
                      w->opbuf + (size_t)i * OP_READ, &w->op_ok[i]);
        if (rc < 0) return rc;
      }
    }
  }
  return 0;
}

/* The line of a user frame: its saved opline's, if that is one of the
 * function's instructions (and, for the leaf, not a previous call's RETURN);
 * else the function's first line. */
static uint32_t frame_line(struct php_walker *w, const struct php_layout *L,
                           const unsigned char *fb, uint64_t opline, const unsigned char *op,
                           int op_ok, int leaf) {
  uint64_t opcodes = rd64(fb, L->op_opcodes);
  uint32_t last = rd32(fb, L->op_last);
  if (op_ok && opcodes && opline >= opcodes && (opline - opcodes) % ZEND_OP_SIZE == 0 &&
      (opline - opcodes) / ZEND_OP_SIZE < last) {
    uint32_t lineno = rd32(op, 0);
    uint8_t opcode = op[4];
    int left =
        opcode == ZEND_RETURN || opcode == ZEND_RETURN_BY_REF || opcode == ZEND_GENERATOR_RETURN;
    if (lineno && !(leaf && left)) return lineno;
  }
  w->stale_lines++;
  return rd32(fb, L->op_line_start);
}

/* current_execute_data, and the VM stack window that held the previous
 * sample's leaf, in one system call: a busy process is usually still
 * there or in a caller of it (same window), or one call deeper. *after is
 * current_execute_data read again after the window (collect says why).
 * Sets *lo == *hi when no window came with it. */
static int read_current(uint32_t pid, struct php_attach *a, struct php_walker *w, uint64_t *ed,
                        uint64_t *lo, uint64_t *hi, uint64_t *after) {
  const struct php_layout *L = a->layout;
  uint64_t eg_ced = a->eg_addr + L->eg_current_execute_data;
  *lo = *hi = 0;
  if (a->last_leaf) {
    uint64_t end = a->last_leaf + L->ed_size + VM_ABOVE;
    uint64_t start = end > VM_WINDOW ? end - VM_WINDOW : 0;
    struct pp_remote_iov iov[3] = {{eg_ced, ed, sizeof(*ed)},
                                   {start, w->window, (size_t)(end - start)},
                                   {eg_ced, after, sizeof(*after)}};
    int rc = pp_remote_readv(pid, iov, start ? 3 : 1);
    if (rc == 0) {
      if (start) {
        *lo = start;
        *hi = end;
      }
      return 0;
    }
    if (rc == -ESRCH || rc == -EPERM) return rc;
    /* that memory is gone (a fiber ended...): the plain way */
  }
  return pp_remote_read(pid, eg_ced, ed, sizeof(*ed));
}

int php_walk(struct php_walker *w, uint32_t pid, struct php_attach *a,
             const struct pp_frame **frames, uint32_t *nframes) {
  const struct php_layout *L = a->layout;
  uint64_t ed = 0, lo, hi, after = 0;
  int rc = read_current(pid, a, w, &ed, &lo, &hi, &after);
  /* executor_globals lives in the binary's data for the process's whole
   * life: unmapped, it is another program (an exec, maybe of the same
   * binary elsewhere: the file did not change, the addresses did) */
  if (rc == -EFAULT) return PHP_WALK_LOST;
  if (rc < 0) return map_err(rc);
  a->last_leaf = (ed & 7) ? 0 : ed;
  if (!ed) return PHP_WALK_IDLE;

  int truncated;
  int got =
      collect(w, pid, L, ed, a->eg_addr + L->eg_current_execute_data, lo, hi, after, &truncated);
  if (got < 0) return -got;
  uint32_t n = (uint32_t)got;
  rc = read_functions(w, pid, L, n);
  if (rc < 0) return map_err(rc);

  for (uint32_t i = 0; i < n; i++) {
    const struct raw_frame *r = &w->raw[i];
    const unsigned char *fb = w->fbuf + (size_t)i * OP_ARRAY_MAX;
    uint8_t type = fb[0];
    if (type != ZEND_INTERNAL_FUNCTION && type != ZEND_USER_FUNCTION && type != ZEND_EVAL_CODE)
      return PHP_WALK_TORN;
    /* PHP code is always at the bottom of a stack. A C function there means
     * we read a call frame that was being set up (INIT_FCALL keeps the
     * pending-call chain, often NULL, in prev_execute_data until the call
     * starts): drop it rather than emit a rootless stack */
    if (!r->prev && type == ZEND_INTERNAL_FUNCTION) return PHP_WALK_TORN;
    uint64_t name_ptr = rd64(fb, FN_NAME_OFF), scope_ptr = rd64(fb, FN_SCOPE_OFF);
    uint64_t file_ptr = type == ZEND_USER_FUNCTION ? rd64(fb, L->op_filename) : 0;

    uint64_t h = (r->func >> 3) * 0x9E3779B97F4A7C15ull ^ pid;
    struct fn_entry *e = &w->cache[(h >> 20) & w->cache_mask];
    if (!(e->used && e->pid == pid && e->func == r->func && e->name_ptr == name_ptr &&
          e->scope_ptr == scope_ptr && e->file_ptr == file_ptr)) {
      e->used = 0;
      e->pid = pid;
      e->func = r->func;
      e->name_ptr = name_ptr;
      e->scope_ptr = scope_ptr;
      e->file_ptr = file_ptr;
      rc = describe(pid, fb, e);
      if (rc < 0) return i ? PHP_WALK_TORN : map_err(rc);
      e->used = 1;
    }
    /* copied: a deeper frame of this same stack may evict the cache entry */
    char *t = w->text + (size_t)i * (PHP_NAME_MAX + PHP_STR_MAX);
    memcpy(t, e->name, strlen(e->name) + 1);
    memcpy(t + PHP_NAME_MAX, e->file, strlen(e->file) + 1);
    struct pp_frame *f = &w->frames[i];
    f->name = t;
    f->file = t + PHP_NAME_MAX;
    f->kind = PP_FRAME_PHP;
    /* a line only for user code: C functions print phpspy's <internal>:-1 */
    f->line =
        type == ZEND_USER_FUNCTION
            ? frame_line(w, L, fb, r->opline, w->opbuf + (size_t)i * OP_READ, w->op_ok[i], i == 0)
            : 0;
  }
  *frames = w->frames;
  *nframes = n;
  return truncated ? PHP_WALK_TRUNCATED : PHP_WALK_OK;
}
