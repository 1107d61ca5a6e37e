/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The php plugin's stack walker, and its stacks in the kit's stack table,
 * on synthetic PHP 8.2
 * structures built in this process's own memory (process_vm_readv on
 * ourselves): names, classes, files, executing lines, internal frames, a
 * leaf whose saved opline is not its own, a stack deeper than one read, the
 * target moving on between two reads of one stack, and hostile input (a
 * cycle, a bad function type, an absurd string length, a NULL function, a
 * depth beyond the cap).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

/* the plugin's sources, compiled in: their symbols are static or php_ */
#include "../../plugins/php/php_layout.c"
#include "polyprof/kit/remote.h"
#include "polyprof/kit/stack_table.h"

/* The target running on while the worker is between two system calls: a
 * test sets move_slot, and the walker's readv, after move_skip more calls,
 * first stores move_to there (current_execute_data changing under it). */
static uint64_t *move_slot, move_to;
static int move_skip;
static int readv_moving(pid_t pid, const struct pp_remote_iov *iov, size_t n) {
  if (move_slot && move_skip > 0) {
    move_skip--;
  } else if (move_slot) {
    memcpy(move_slot, &move_to, sizeof(move_to));
    move_slot = NULL;
  }
  return pp_remote_readv(pid, iov, n);
}
#define pp_remote_readv readv_moving
#include "../../plugins/php/php_walk.c"
#undef pp_remote_readv

struct zstr {
  uint64_t refcount, h, len;
  char val[64];
};

static struct zstr mkstr(const char *s) {
  struct zstr z = {1, 0, strlen(s), {0}};
  memcpy(z.val, s, strlen(s));
  return z;
}

static _Alignas(8) unsigned char eg[1024];
static struct zstr s_main_file, s_fn, s_cls, s_inner;
static _Alignas(8) unsigned char fn_main[256], fn_method[256], fn_internal[256];
static _Alignas(8) unsigned char ce[64];
static _Alignas(8) unsigned char ed[4][72];
/* each function's instructions (zend_op, 32 bytes: lineno at +24, opcode at +28) */
static _Alignas(8) unsigned char ops_main[3][32], ops_method[3][32];
#define LINE_START_MAIN 1
#define LINE_START_METHOD 38
#define OPC_RETURN 62

static void put64(unsigned char *b, size_t off, uint64_t v) {
  memcpy(b + off, &v, 8);
}

static void build(const struct php_layout *L) {
  s_main_file = mkstr("/app/index.php");
  s_fn = mkstr("handle");
  s_cls = mkstr("App\\Ctl");
  s_inner = mkstr("usleep");
  memset(fn_main, 0, sizeof(fn_main));
  fn_main[0] = 2; /* user code, function_name NULL: the script's <main> */
  put64(fn_main, L->op_filename, (uintptr_t)&s_main_file);
  memset(fn_method, 0, sizeof(fn_method));
  fn_method[0] = 2;
  put64(fn_method, 8, (uintptr_t)&s_fn);
  put64(fn_method, 16, (uintptr_t)ce);
  put64(fn_method, L->op_filename, (uintptr_t)&s_main_file);
  put64(ce, 8, (uintptr_t)&s_cls);
  memset(fn_internal, 0, sizeof(fn_internal));
  fn_internal[0] = 1;
  put64(fn_internal, 8, (uintptr_t)&s_inner);
  put64(fn_main, L->op_opcodes, (uintptr_t)ops_main);
  put64(fn_method, L->op_opcodes, (uintptr_t)ops_method);
  uint32_t three = 3, ls_main = LINE_START_MAIN, ls_method = LINE_START_METHOD;
  memcpy(fn_main + L->op_last, &three, 4);
  memcpy(fn_method + L->op_last, &three, 4);
  memcpy(fn_main + L->op_line_start, &ls_main, 4);
  memcpy(fn_method + L->op_line_start, &ls_method, 4);
  memset(ops_main, 0, sizeof(ops_main));
  memset(ops_method, 0, sizeof(ops_method));
  for (uint32_t i = 0; i < 3; i++) {
    uint32_t l_main = 11 + i, l_method = 39 + i; /* 11, 12, 13 and 39, 40, 41 */
    memcpy(ops_main[i] + 24, &l_main, 4);
    memcpy(ops_method[i] + 24, &l_method, 4);
  }
  ops_method[2][28] = OPC_RETURN; /* the method's last instruction, line 41 */
  memset(ed, 0, sizeof(ed));
  /* ed[0] leaf (internal) -> ed[1] method -> ed[2] main */
  put64(ed[0], L->ed_func, (uintptr_t)fn_internal);
  put64(ed[0], L->ed_prev, (uintptr_t)ed[1]);
  put64(ed[1], L->ed_opline, (uintptr_t)ops_method[1]);
  put64(ed[1], L->ed_func, (uintptr_t)fn_method);
  put64(ed[1], L->ed_prev, (uintptr_t)ed[2]);
  put64(ed[2], L->ed_opline, (uintptr_t)ops_main[1]);
  put64(ed[2], L->ed_func, (uintptr_t)fn_main);
  put64(eg, L->eg_current_execute_data, (uintptr_t)ed[0]);
}

static int emitted;
static uint64_t emitted_count;
static char last_leaf[128];
static int fake_emit(struct pp_sink *sink, const struct pp_sample *s) {
  (void)sink;
  emitted++;
  emitted_count += s->count;
  snprintf(last_leaf, sizeof(last_leaf), "%s|%s|%u|%s", s->frames[0].name, s->frames[0].file,
           s->frames[0].line, s->comm ? s->comm : "");
  return 0;
}

static int fake_counter(struct pp_sink *sink, const char *name, uint64_t delta) {
  (void)sink;
  (void)name;
  (void)delta;
  return 0;
}

/* The leaf is the method (ed[1]); returns the line it is shown at. */
static uint32_t leaf_line(struct php_attach *a, struct php_walker *w, uint64_t opline) {
  const struct pp_frame *f = NULL;
  uint32_t n = 0;
  put64(ed[1], a->layout->ed_opline, opline);
  int rc = php_walk(w, getpid(), a, &f, &n);
  CHECK_EQ_INT(rc, PHP_WALK_OK);
  CHECK_EQ_INT(n, 2);
  if (rc != PHP_WALK_OK || n != 2) return 0;
  CHECK_EQ_STR(f[0].name, "App\\Ctl::handle");
  CHECK_EQ_INT(f[1].line, 12); /* the caller's saved call: always exact */
  return f[0].line;
}

/* A leaf's saved opline is believed only if it is one of its function's
 * instructions and not a previous call's RETURN; otherwise the function's
 * first line, counted as stale. Never a torn sample: the stack is fine. */
static void leaf_lines(const struct php_layout *L, struct php_attach *a, struct php_walker *w) {
  put64(eg, L->eg_current_execute_data, (uintptr_t)ed[1]);
  CHECK_EQ_INT(leaf_line(a, w, (uintptr_t)ops_method[1]), 40);
  CHECK_EQ_INT(leaf_line(a, w, (uintptr_t)ops_method[0]), 39);
  CHECK_EQ_INT(php_walker_take_stale_lines(w), 0);
  /* left there by a frame of another function at the same address */
  CHECK_EQ_INT(leaf_line(a, w, (uintptr_t)ops_main[2]), LINE_START_METHOD);
  /* inside the instructions but not on one */
  CHECK_EQ_INT(leaf_line(a, w, (uintptr_t)ops_method[1] + 8), LINE_START_METHOD);
  /* one past the last instruction */
  CHECK_EQ_INT(leaf_line(a, w, (uintptr_t)ops_method[0] + 3 * 32), LINE_START_METHOD);
  /* a previous call's exit */
  CHECK_EQ_INT(leaf_line(a, w, (uintptr_t)ops_method[2]), LINE_START_METHOD);
  /* garbage: unmapped, NULL */
  CHECK_EQ_INT(leaf_line(a, w, 0x10), LINE_START_METHOD);
  CHECK_EQ_INT(leaf_line(a, w, 0), LINE_START_METHOD);
  CHECK_EQ_INT(php_walker_take_stale_lines(w), 6);
  CHECK_EQ_INT(php_walker_take_stale_lines(w), 0);
  /* a caller's saved RETURN is believed (only a leaf's is a leftover) */
  put64(eg, L->eg_current_execute_data, (uintptr_t)ed[0]);
  put64(ed[1], L->ed_opline, (uintptr_t)ops_method[2]);
  const struct pp_frame *f = NULL;
  uint32_t n = 0;
  CHECK_EQ_INT(php_walk(w, getpid(), a, &f, &n), PHP_WALK_OK);
  CHECK(n == 3 && f[1].line == 41);
  put64(ed[1], L->ed_opline, (uintptr_t)ops_method[1]);
}

/* 70 frames (more than one read's worth of functions), alternately close
 * together and further apart than one VM stack window. */
#define DEEP 70
static _Alignas(8) unsigned char vm[DEEP / 2 * (200 + 5000) + 4096];
static void deep_stack(const struct php_layout *L, struct php_attach *a) {
  struct php_walker *w = php_walker_new(64, 100);
  uint64_t at[DEEP];
  size_t off = 0;
  for (int i = DEEP - 1; i >= 0; i--) { /* callers below callees, as on the VM stack */
    at[i] = (uintptr_t)vm + off;
    off += (i % 2) ? 200 : 5000;
  }
  memset(vm, 0, sizeof(vm));
  for (int i = 0; i < DEEP; i++) {
    unsigned char *e = (unsigned char *)(uintptr_t)at[i];
    int bottom = i == DEEP - 1;
    put64(e, L->ed_func, (uintptr_t)(bottom ? fn_main : fn_method));
    put64(e, L->ed_opline, (uintptr_t)(bottom ? ops_main[0] : ops_method[1]));
    put64(e, L->ed_prev, bottom ? 0 : at[i + 1]);
  }
  put64(eg, L->eg_current_execute_data, at[0]);
  const struct pp_frame *f = NULL;
  uint32_t n = 0;
  CHECK_EQ_INT(php_walk(w, getpid(), a, &f, &n), PHP_WALK_OK);
  CHECK_EQ_INT(n, DEEP);
  int wrong = 0;
  for (uint32_t i = 0; i + 1 < n; i++)
    wrong += strcmp(f[i].name, "App\\Ctl::handle") != 0 || f[i].line != 40;
  CHECK_EQ_INT(wrong, 0);
  if (n == DEEP) {
    CHECK_EQ_STR(f[DEEP - 1].name, "<main>");
    CHECK_EQ_INT(f[DEEP - 1].line, 11);
  }
  php_walker_free(w);
  put64(eg, L->eg_current_execute_data, (uintptr_t)ed[0]);
}

/* One walk from the leaf ed[0], its window read on its own, where
 * current_execute_data becomes `to` just before the walker's readv number
 * skip (counting from 0); skip < 0: nothing moves. */
static int walk_moving(const struct php_layout *L, struct php_attach *a, struct php_walker *w,
                       uint64_t to, int skip, const struct pp_frame **f, uint32_t *n) {
  put64(eg, L->eg_current_execute_data, (uintptr_t)ed[0]);
  move_to = to;
  move_skip = skip;
  move_slot = skip < 0 ? NULL : (uint64_t *)(void *)(eg + L->eg_current_execute_data);
  a->last_leaf = 0; /* so the leaf's window is a read of its own */
  return php_walk(w, getpid(), a, f, n);
}

/* The walker names the leaf in one system call and reads the VM stack below
 * it in the next; a target that ran on in between must not give a stack
 * mixing two call chains (seen under load: the stale frame left in the
 * leaf's slot, shown under a caller of another chain). */
static void moved_between_reads(const struct php_layout *L, struct php_attach *a,
                                struct php_walker *w) {
  const struct pp_frame *f = NULL;
  uint32_t n = 0;
  put64(ed[3], L->ed_func, (uintptr_t)fn_method);
  /* another chain's frame is current by the window read: dropped */
  CHECK_EQ_INT(walk_moving(L, a, w, (uintptr_t)ed[3], 0, &f, &n), PHP_WALK_TORN);
  /* idle by then: dropped */
  CHECK_EQ_INT(walk_moving(L, a, w, 0, 0, &f, &n), PHP_WALK_TORN);
  /* returned to its caller before its own frame was read: that frame may
   * be a leftover by then, dropped */
  CHECK_EQ_INT(walk_moving(L, a, w, (uintptr_t)ed[1], 0, &f, &n), PHP_WALK_TORN);
  /* returned to its caller after: the caller's window (ed[1] lies above
   * the leaf's) is read while the caller runs, kept */
  CHECK_EQ_INT(walk_moving(L, a, w, (uintptr_t)ed[1], 1, &f, &n), PHP_WALK_OK);
  CHECK(n == 3 && strcmp(f[0].name, "usleep") == 0 && strcmp(f[2].name, "<main>") == 0);
  /* returned two frames down by the caller's window: dropped */
  CHECK_EQ_INT(walk_moving(L, a, w, (uintptr_t)ed[2], 1, &f, &n), PHP_WALK_TORN);
  /* nothing moved: kept */
  CHECK_EQ_INT(walk_moving(L, a, w, 0, -1, &f, &n), PHP_WALK_OK);
  CHECK_EQ_INT(n, 3);
  put64(eg, L->eg_current_execute_data, (uintptr_t)ed[0]);
  memset(ed[3], 0, sizeof(ed[3]));
}

int main(void) {
  const struct php_layout *L = php_layout_find(8, 2);
  CHECK(L != NULL);
  CHECK(php_layout_find(9, 9) == NULL);
  if (!L) return pp_test_finish("test_php_walk");
  build(L);
  struct php_attach a = {.eg_addr = (uintptr_t)eg, .layout = L, .major = 8, .minor = 2};
  struct php_walker *w = php_walker_new(64, 16);
  const struct pp_frame *f = NULL;
  uint32_t n = 0;
  pid_t me = getpid();

  CHECK_EQ_INT(php_walk(w, me, &a, &f, &n), PHP_WALK_OK);
  CHECK_EQ_INT(n, 3);
  if (n == 3) {
    CHECK_EQ_STR(f[0].name, "usleep");
    CHECK_EQ_STR(f[0].file, "<internal>:-1");
    CHECK_EQ_INT(f[0].line, 0);
    CHECK_EQ_STR(f[1].name, "App\\Ctl::handle");
    CHECK_EQ_STR(f[1].file, "/app/index.php");
    CHECK_EQ_INT(f[1].line, 40); /* the executing opline's line */
    CHECK_EQ_STR(f[2].name, "<main>");
    CHECK_EQ_INT(f[2].line, 12);
  }
  /* cached the second time: same result */
  CHECK_EQ_INT(php_walk(w, me, &a, &f, &n), PHP_WALK_OK);
  CHECK(n == 3 && strcmp(f[1].name, "App\\Ctl::handle") == 0);

  CHECK_EQ_INT(php_walker_take_stale_lines(w), 0);

  leaf_lines(L, &a, w);
  deep_stack(L, &a);
  moved_between_reads(L, &a, w);

  /* aggregation in the stack table, as the plugin's tick does it: the same
   * stack twice is one entry with count 2; the walker's frames are PHP */
  build(L);
  CHECK_EQ_INT(php_walk(w, me, &a, &f, &n), PHP_WALK_OK);
  CHECK(n == 3 && f[0].kind == PP_FRAME_PHP && f[2].kind == PP_FRAME_PHP);
  struct pp_stack_table *g =
      pp_stack_table_new(&(struct pp_stack_table_limits){.max_stacks = 64, .max_depth = 16});
  CHECK(g != NULL);
  CHECK_EQ_INT(pp_stack_table_add(g, 42, 42, "php-fpm", f, n, 1), 0);
  CHECK_EQ_INT(pp_stack_table_add(g, 42, 42, "php-fpm", f, n, 1), 0);
  CHECK_EQ_INT(pp_stack_table_add(g, 43, 43, "php-fpm", f, n, 1), 0);
  struct pp_host h = {.emit = fake_emit, .add_counter = fake_counter};
  pp_stack_table_emit(g, &h, NULL);
  CHECK_EQ_INT(emitted, 2);
  CHECK_EQ_INT(emitted_count, 3);
  CHECK_EQ_STR(last_leaf, "usleep|<internal>:-1|0|php-fpm");
  emitted = 0;
  pp_stack_table_emit(g, &h, NULL);
  CHECK_EQ_INT(emitted, 0); /* emptied by the emit */

  /* executor_globals unmapped: another program image (an exec) */
  struct php_attach lost = a;
  lost.eg_addr = 0x10;
  lost.last_leaf = 0;
  CHECK_EQ_INT(php_walk(w, me, &lost, &f, &n), PHP_WALK_LOST);
  lost.last_leaf = (uintptr_t)ed[0]; /* with the window read alongside, too */
  CHECK_EQ_INT(php_walk(w, me, &lost, &f, &n), PHP_WALK_LOST);

  /* idle: no current_execute_data */
  put64(eg, L->eg_current_execute_data, 0);
  CHECK_EQ_INT(php_walk(w, me, &a, &f, &n), PHP_WALK_IDLE);
  put64(eg, L->eg_current_execute_data, (uintptr_t)ed[0]);

  /* a cycle is cut by the depth cap */
  put64(ed[2], L->ed_prev, (uintptr_t)ed[1]);
  CHECK_EQ_INT(php_walk(w, me, &a, &f, &n), PHP_WALK_TRUNCATED);
  CHECK_EQ_INT(n, 16);
  put64(ed[2], L->ed_prev, 0);

  /* a C function at the bottom is a frame caught while being set up: torn */
  put64(ed[0], L->ed_prev, 0);
  CHECK_EQ_INT(php_walk(w, me, &a, &f, &n), PHP_WALK_TORN);
  put64(ed[0], L->ed_prev, (uintptr_t)ed[1]);

  /* a bad function type is a torn sample */
  fn_method[0] = 9;
  CHECK_EQ_INT(php_walk(w, me, &a, &f, &n), PHP_WALK_TORN);
  fn_method[0] = 2;

  /* an absurd string length: torn, not a huge read (new function address
   * so the cache does not answer) */
  static _Alignas(8) unsigned char fn_bad[256];
  static struct zstr s_bad;
  s_bad = mkstr("x");
  s_bad.len = (uint64_t)1 << 40;
  memcpy(fn_bad, fn_method, sizeof(fn_bad));
  put64(fn_bad, 8, (uintptr_t)&s_bad);
  put64(ed[1], L->ed_func, (uintptr_t)fn_bad);
  CHECK_EQ_INT(php_walk(w, me, &a, &f, &n), PHP_WALK_TORN);

  /* a NULL function and an unmapped pointer */
  put64(ed[1], L->ed_func, 0);
  CHECK_EQ_INT(php_walk(w, me, &a, &f, &n), PHP_WALK_TORN);
  put64(ed[1], L->ed_func, 0x10);
  CHECK_EQ_INT(php_walk(w, me, &a, &f, &n), PHP_WALK_TORN);
  put64(eg, L->eg_current_execute_data, 0x1000);
  CHECK(php_walk(w, me, &a, &f, &n) != PHP_WALK_OK);

  pp_stack_table_free(g);
  php_walker_free(w);
  return pp_test_finish("test_php_walk");
}
