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
 * Names and files of a function are cached by (pid, zend_function address)
 * and reused only while the function's name/scope/filename pointers are the
 * ones cached; that turns the 5-9 reads per frame into 2 system calls.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "php.h"
#include "support/remote.h"

#define ZSTR_LEN_OFF 16
#define ZSTR_VAL_OFF 24
#define CE_NAME_OFF 8
#define FN_NAME_OFF 8
#define FN_SCOPE_OFF 16
#define OP_LINENO_OFF 24
#define ZEND_INTERNAL_FUNCTION 1
#define ZEND_USER_FUNCTION 2
#define ZEND_EVAL_CODE 4
#define OP_ARRAY_MAX 256
#define INTERNAL_FILE "<internal>:-1" /* phpspy's text for C functions and eval */

struct fn_entry {
  uint32_t pid;
  uint32_t used;
  uint64_t func, name_ptr, scope_ptr, file_ptr;
  char name[PHP_NAME_MAX];
  char file[PHP_STR_MAX];
};

struct php_walker {
  struct fn_entry *cache;
  size_t cache_mask;
  uint32_t max_depth;
  struct php_frame *frames;
  char *text; /* max_depth * (PHP_NAME_MAX + PHP_STR_MAX): this walk's strings */
};

struct php_walker *php_walker_new(size_t cache_entries, uint32_t max_depth) {
  struct php_walker *w = calloc(1, sizeof(*w));
  if (!w) return NULL;
  size_t cap = 16;
  while (cap < cache_entries)
    cap *= 2;
  w->cache = calloc(cap, sizeof(*w->cache));
  w->frames = calloc(max_depth ? max_depth : 1, sizeof(*w->frames));
  w->text = malloc((size_t)(max_depth ? max_depth : 1) * (PHP_NAME_MAX + PHP_STR_MAX));
  if (!w->cache || !w->frames || !w->text) {
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
  free(w);
}

void php_walker_forget_pid(struct php_walker *w, uint32_t pid) {
  for (size_t i = 0; i <= w->cache_mask; i++)
    if (w->cache[i].pid == pid) w->cache[i].used = 0;
}

static uint64_t rd64(const unsigned char *b, size_t off) {
  uint64_t v;
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

int php_walk(struct php_walker *w, uint32_t pid, const struct php_attach *a,
             const struct php_frame **frames, uint32_t *nframes) {
  const struct php_layout *L = a->layout;
  uint64_t ed = 0;
  int rc = pp_remote_read(pid, a->eg_addr + L->eg_current_execute_data, &ed, sizeof(ed));
  if (rc < 0) return map_err(rc);
  if (!ed) return PHP_WALK_IDLE;

  uint32_t n = 0;
  unsigned char edbuf[2][128], fb[OP_ARRAY_MAX];
  unsigned char *edb = edbuf[0];
  if (ed & 7) return PHP_WALK_TORN; /* execute_data is 8-aligned */
  rc = pp_remote_read(pid, ed, edb, L->ed_size);
  if (rc < 0) return map_err(rc);
  while (ed) {
    if (n == w->max_depth) {
      *frames = w->frames;
      *nframes = n;
      return PHP_WALK_TRUNCATED;
    }
    uint64_t opline = rd64(edb, L->ed_opline);
    uint64_t func = rd64(edb, L->ed_func);
    uint64_t prev = rd64(edb, L->ed_prev);
    if (!func || (func & 7) || (prev & 7)) return PHP_WALK_TORN;

    /* this frame's function, its executing line and the caller's
     * execute_data in one system call: with the function cache that is one
     * call per frame */
    unsigned char *next = edb == edbuf[0] ? edbuf[1] : edbuf[0];
    uint32_t lineno = 0;
    struct pp_remote_iov iov[3];
    size_t k = 0;
    iov[k++] = (struct pp_remote_iov){func, fb, L->op_size};
    if (prev) iov[k++] = (struct pp_remote_iov){prev, next, L->ed_size};
    if (opline) iov[k++] = (struct pp_remote_iov){opline + OP_LINENO_OFF, &lineno, 4};
    rc = pp_remote_readv(pid, iov, k);
    if (rc < 0) {
      /* one piece failed: internal functions are smaller than an op_array
       * (retry the common part), else the stack changed under us */
      rc = pp_remote_read(pid, func, fb, 32);
      if (rc < 0) return n ? PHP_WALK_TORN : map_err(rc);
      if (fb[0] == ZEND_USER_FUNCTION) return PHP_WALK_TORN;
      lineno = 0;
      if (prev && pp_remote_read(pid, prev, next, L->ed_size) < 0) return PHP_WALK_TORN;
    }
    uint8_t type = fb[0];
    if (type != ZEND_INTERNAL_FUNCTION && type != ZEND_USER_FUNCTION && type != ZEND_EVAL_CODE)
      return PHP_WALK_TORN;
    uint64_t name_ptr = rd64(fb, FN_NAME_OFF), scope_ptr = rd64(fb, FN_SCOPE_OFF);
    uint64_t file_ptr = type == ZEND_USER_FUNCTION ? rd64(fb, L->op_filename) : 0;

    uint64_t h = (func >> 3) * 0x9E3779B97F4A7C15ull ^ pid;
    struct fn_entry *e = &w->cache[(h >> 20) & w->cache_mask];
    if (!(e->used && e->pid == pid && e->func == func && e->name_ptr == name_ptr &&
          e->scope_ptr == scope_ptr && e->file_ptr == file_ptr)) {
      e->used = 0;
      e->pid = pid;
      e->func = func;
      e->name_ptr = name_ptr;
      e->scope_ptr = scope_ptr;
      e->file_ptr = file_ptr;
      rc = describe(pid, fb, e);
      if (rc < 0) return n ? PHP_WALK_TORN : map_err(rc);
      e->used = 1;
    }
    /* copied: a deeper frame of this same stack may evict the cache entry */
    char *t = w->text + (size_t)n * (PHP_NAME_MAX + PHP_STR_MAX);
    memcpy(t, e->name, strlen(e->name) + 1);
    memcpy(t + PHP_NAME_MAX, e->file, strlen(e->file) + 1);
    struct php_frame *f = &w->frames[n++];
    f->name = t;
    f->file = t + PHP_NAME_MAX;
    /* a line only for user code: C functions print phpspy's <internal>:-1 */
    f->line = type == ZEND_USER_FUNCTION ? lineno : 0;
    if (prev == ed) return PHP_WALK_TORN; /* a loop: stale memory */
    /* PHP code is always at the bottom of a stack. A C function there means
     * we read a call frame that was being set up (INIT_FCALL keeps the
     * pending-call chain, often NULL, in prev_execute_data until the call
     * starts): drop it rather than emit a rootless stack */
    if (!prev && type == ZEND_INTERNAL_FUNCTION) return PHP_WALK_TORN;
    ed = prev;
    edb = next;
  }
  *frames = w->frames;
  *nframes = n;
  return PHP_WALK_OK;
}
