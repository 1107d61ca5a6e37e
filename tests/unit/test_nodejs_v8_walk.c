/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the nodejs plugin's v8 mode readers over a made-up V8
 * heap (the kit's remote-read seam stands in for process_vm_readv): every
 * string representation, a ScopeInfo's name and start position, a line
 * from line_ends and from the source, and the frame walk (entry and exit
 * markers, C++ frames passed over, a torn read dropped and counted, the
 * cache revalidated when another function takes an address). The plugin
 * sources are compiled in. */
#include <stdio.h>
#include <string.h>

#include "../../plugins/nodejs/v8_heap.c"
#include "../../plugins/nodejs/v8_inline.c"
#include "../../plugins/nodejs/v8_walk.c"
#include "testlib.h"

#define BASE 0x7f0000000000ull
#define MEM (1u << 16)

static unsigned char mem[MEM];
static uint64_t brk_at;

static int fake_read(pid_t pid, uint64_t addr, void *buf, size_t len) {
  (void)pid;
  if (addr < BASE || addr - BASE > MEM || len > MEM - (addr - BASE)) return -EFAULT;
  memcpy(buf, mem + (addr - BASE), len);
  return 0;
}

static uint64_t alloc(size_t n) {
  uint64_t a = BASE + brk_at;
  brk_at += (n + 7) & ~(size_t)7;
  return a;
}
static void put64(uint64_t addr, uint64_t v) {
  memcpy(mem + (addr - BASE), &v, 8);
}
static void put32(uint64_t addr, uint32_t v) {
  memcpy(mem + (addr - BASE), &v, 4);
}
static void put16(uint64_t addr, uint16_t v) {
  memcpy(mem + (addr - BASE), &v, 2);
}
static uint64_t smi(int64_t v) {
  return (uint64_t)v << 32;
}

static struct v8_layout L;

/* A map of the given instance type; returns it tagged. */
static uint64_t map_of(uint16_t type) {
  uint64_t m = alloc(80);
  put16(m + 12, type);
  return m + 1;
}
/* An object of n bytes whose map has the type; returns it tagged. */
static uint64_t object(uint16_t type, size_t n) {
  uint64_t o = alloc(n);
  put64(o, map_of(type));
  return o + 1;
}
static uint64_t seq_one(const char *s) {
  size_t n = strlen(s);
  uint64_t o = object(8, 16 + n);
  put32(o - 1 + 12, (uint32_t)n);
  memcpy(mem + (o - 1 + 16 - BASE), s, n);
  return o;
}
static uint64_t seq_two(const uint16_t *s, size_t n) {
  uint64_t o = object(0, 16 + 2 * n);
  put32(o - 1 + 12, (uint32_t)n);
  memcpy(mem + (o - 1 + 16 - BASE), s, 2 * n);
  return o;
}
static uint64_t cons(uint64_t a, uint64_t b, uint32_t len) {
  uint64_t o = object(9, 32);
  put32(o - 1 + 12, len);
  put64(o - 1 + 16, a);
  put64(o - 1 + 24, b);
  return o;
}

static void setup_layout(void) {
  memset(&L, 0, sizeof(L));
  L.fp_function = -16;
  L.fp_context = -8;
  L.frame_kind[1] = V8F_ENTRY;
  L.frame_kind[3] = V8F_EXIT;
  L.frame_kind[13] = V8F_INTERPRETED;
  L.smi_shift = 32;
  L.map_instance_type = 12;
  L.jsfunction_shared = 24;
  L.sfi_name_or_scope_info = 16;
  L.sfi_script = 32;
  L.script_name = 16;
  L.script_source = 8;
  L.script_line_ends = 56;
  L.fixed_array_length = 8;
  L.fixed_array_data = 16;
  L.string_length = 12;
  L.seq_chars = 16;
  L.cons_first = 16;
  L.cons_second = 24;
  L.thin_actual = 16;
  L.sliced_parent = 16;
  L.sliced_offset = 24;
  L.scopeinfo_first_vars = 3;
  L.scopeinfo_ncontextlocals = 2;
  L.type_jsfunction_first = 2066;
  L.type_jsfunction_last = 2098;
  L.type_context_first = 205;
  L.type_context_last = 214;
  L.type_sfi = 262;
  L.type_scope_info = 261;
  L.type_script = 167;
  L.type_fixed_array = 175;
  L.first_nonstring_type = 128;
  L.string_repr_mask = 7;
  L.string_enc_mask = 8;
  L.one_byte_tag = 8;
  L.seq_tag = 0;
  L.cons_tag = 1;
  L.sliced_tag = 3;
  L.thin_tag = 5;
  L.external_tag = 2;
}

static void test_strings(void) {
  char out[64];
  CHECK_EQ_INT(v8_read_string(1, &L, seq_one("heavyPath"), out, sizeof(out)), 0);
  CHECK_EQ_STR(out, "heavyPath");
  const uint16_t u[] = {'h', 0xe9, 'l', 0xd83d, 0xde00}; /* "hél😀" */
  CHECK_EQ_INT(v8_read_string(1, &L, seq_two(u, 5), out, sizeof(out)), 0);
  CHECK_EQ_STR(out, "h\xc3\xa9l\xf0\x9f\x98\x80");
  uint64_t c = cons(seq_one("Calc"), seq_one("ulator"), 10);
  CHECK_EQ_INT(v8_read_string(1, &L, c, out, sizeof(out)), 0);
  CHECK_EQ_STR(out, "Calculator");
  uint64_t thin = object(13, 24);
  put32(thin - 1 + 12, 10);
  put64(thin - 1 + 16, c);
  CHECK_EQ_INT(v8_read_string(1, &L, thin, out, sizeof(out)), 0);
  CHECK_EQ_STR(out, "Calculator");
  uint64_t sl = object(11, 32);
  put32(sl - 1 + 12, 4);
  put64(sl - 1 + 16, seq_one("lightPath"));
  put64(sl - 1 + 24, smi(5));
  CHECK_EQ_INT(v8_read_string(1, &L, sl, out, sizeof(out)), 0);
  CHECK_EQ_STR(out, "Path");
  /* cut at the buffer, at a character boundary */
  char small[4];
  CHECK_EQ_INT(v8_read_string(1, &L, seq_two(u, 5), small, sizeof(small)), 0);
  CHECK_EQ_STR(small, "h\xc3\xa9");
  /* not a string; a cons cycle ends at the depth bound */
  CHECK(v8_read_string(1, &L, object(300, 16), out, sizeof(out)) < 0);
  uint64_t loop = object(9, 32);
  put32(loop - 1 + 12, 100);
  put64(loop - 1 + 16, loop);
  put64(loop - 1 + 24, loop);
  CHECK(v8_read_string(1, &L, loop, out, sizeof(out)) < 0);
  /* a length past the end of the mapping: the read fails, no half string */
  uint64_t big_map = map_of(8);
  uint64_t big = alloc(16);
  put64(big, big_map);
  put32(big + 12, 1u << 30);
  memset(mem + (big + 16 - BASE), 'a', MEM - (big + 16 - BASE));
  CHECK(v8_read_string(1, &L, big + 1, out, sizeof(out)) == 0 && strlen(out) == sizeof(out) - 1);
}

/* A ScopeInfo with one context local, the function variable {name,
 * slot} and the position; with_inferred adds an inferred name slot. */
static uint64_t scope_info(uint64_t name, int with_inferred, int64_t start, int64_t end) {
  uint64_t s = object(261, 8 + 12 * 8);
  uint64_t d = s - 1 + 8;
  put64(d + 0, smi(0x1234));
  put64(d + 8, smi(1));
  put64(d + 16, smi(1)); /* one context local */
  put64(d + 24, seq_one("local"));
  put64(d + 32, smi(7));
  put64(d + 40, name);
  put64(d + 48, smi(0));
  int k = 56;
  if (with_inferred) {
    put64(d + (uint64_t)k, seq_one("inferred"));
    k += 8;
  }
  put64(d + (uint64_t)k, smi(start));
  put64(d + (uint64_t)k + 8, smi(end));
  put64(d + (uint64_t)k + 16, object(300, 16)); /* outer scope info or such */
  return s;
}

static void test_scope_info(void) {
  char name[64];
  int64_t start;
  CHECK_EQ_INT(
      v8_scope_info(1, &L, scope_info(seq_one("spin"), 0, 120, 400), name, sizeof(name), &start),
      0);
  CHECK_EQ_STR(name, "spin");
  CHECK_EQ_INT((int)start, 120);
  CHECK_EQ_INT(
      v8_scope_info(1, &L, scope_info(seq_one("crunch"), 1, 50, 90), name, sizeof(name), &start),
      0);
  CHECK_EQ_STR(name, "crunch");
  CHECK_EQ_INT((int)start, 50);
  /* anonymous: the function variable's name is Smi zero, the inferred
   * name is the first string */
  CHECK_EQ_INT(v8_scope_info(1, &L, scope_info(smi(0), 1, 10, 20), name, sizeof(name), &start), 0);
  CHECK_EQ_STR(name, "inferred");
  /* a local count out of range is refused */
  uint64_t bad = scope_info(seq_one("x"), 0, 1, 2);
  put64(bad - 1 + 8 + 16, smi(1 << 20));
  CHECK(v8_scope_info(1, &L, bad, name, sizeof(name), &start) < 0);
}

static uint64_t script(const char *path, const char *source, uint64_t line_ends) {
  uint64_t s = object(167, 64);
  put64(s - 1 + 16, seq_one(path));
  put64(s - 1 + 8, seq_one(source));
  put64(s - 1 + 56, line_ends ? line_ends : object(300, 16));
  return s;
}

static void test_lines(void) {
  uint32_t line;
  uint64_t s = script("/app/a.js", "l1\nl2\nl3\nfunction f() {}\n", 0);
  CHECK_EQ_INT(v8_script_line(1, &L, s, 9, &line), 0);
  CHECK_EQ_INT((int)line, 4);
  CHECK_EQ_INT(v8_script_line(1, &L, s, 0, &line), 0);
  CHECK_EQ_INT((int)line, 1);
  uint64_t le = object(175, 16 + 3 * 8);
  put64(le - 1 + 8, smi(3));
  put64(le - 1 + 16, smi(10));
  put64(le - 1 + 24, smi(20));
  put64(le - 1 + 32, smi(30));
  s = script("/app/b.js", "", le);
  CHECK_EQ_INT(v8_script_line(1, &L, s, 15, &line), 0);
  CHECK_EQ_INT((int)line, 2);
  CHECK_EQ_INT(v8_script_line(1, &L, s, 25, &line), 0);
  CHECK_EQ_INT((int)line, 3);
}

/* A JS function named name in a script, defined at source position pos. */
static uint64_t function(const char *name, uint64_t scr, int64_t pos, uint64_t *sfi_out) {
  uint64_t sfi = object(262, 48);
  put64(sfi - 1 + 16, scope_info(seq_one(name), 0, pos, pos + 10));
  put64(sfi - 1 + 32, scr);
  uint64_t fn = object(2066, 48);
  put64(fn - 1 + 24, sfi);
  if (sfi_out) *sfi_out = sfi;
  return fn;
}

/* A stack copy of frames {context, function} chained by frame pointers,
 * leaf first; a context of 0 writes marker (type << 1) instead. */
struct fr {
  uint64_t ctx, fn;
  int marker;
};
static unsigned char stack[4096];
static struct v8_raw_sample make_sample(const struct fr *f, int n) {
  uint64_t sp = 0x7ffd00000000ull;
  memset(stack, 0, sizeof(stack));
  for (int i = 0; i < n; i++) {
    uint64_t fp_off = 64 + (uint64_t)i * 64;
    uint64_t caller = i + 1 < n ? sp + fp_off + 64 : 0;
    memcpy(stack + fp_off, &caller, 8);
    uint64_t ctx = f[i].marker ? (uint64_t)f[i].marker << 1 : f[i].ctx;
    memcpy(stack + fp_off - 8, &ctx, 8);
    memcpy(stack + fp_off - 16, &f[i].fn, 8);
  }
  struct v8_raw_sample s = {.tid = 1, .regs = {.bp = sp + 64, .sp = sp, .ip = 0}};
  s.stack = stack;
  s.stack_len = 64 + (size_t)n * 64 + 16;
  return s;
}

static void test_walk(void) {
  struct v8_reader r;
  CHECK_EQ_INT(v8_reader_init(&r, 1, &L, 16), 0);
  const char *src = "// x\nfunction spin() {}\nfunction heavyPath() {}\n";
  uint64_t scr = script("/app/split.js", src, 0);
  uint64_t ctx = object(205, 32);
  uint64_t sfi_spin;
  uint64_t spin = function("spin", scr, 5, &sfi_spin);
  uint64_t heavy = function("heavyPath", scr, 25, NULL);
  struct pp_frame out[8];

  /* C++ leaf under an exit frame, two JS frames, then an entry frame and
   * C++ frames whose slots look like JS but are never read */
  struct fr f1[] = {{.ctx = ctx, .fn = heavy},            /* C++: dropped at the exit marker */
                    {.marker = 3},                        /* exit */
                    {.ctx = ctx, .fn = spin},             /* JS */
                    {.ctx = ctx, .fn = heavy},            /* JS */
                    {.marker = 1},                        /* entry */
                    {.ctx = ctx, .fn = object(300, 40)}}; /* C++ */
  struct v8_raw_sample s = make_sample(f1, 6);
  int n = v8_walk(&r, &s, out, 8);
  CHECK_EQ_INT(n, 2);
  if (n == 2) {
    CHECK_EQ_STR(out[0].name, "spin");
    CHECK_EQ_STR(out[0].file, "/app/split.js");
    CHECK_EQ_INT((int)out[0].line, 2);
    CHECK_EQ_STR(out[1].name, "heavyPath");
    CHECK_EQ_INT((int)out[1].line, 3);
    CHECK_EQ_INT((int)out[1].kind, PP_FRAME_JS);
  }
  uint64_t misses = r.st.cache_miss;

  /* the same functions again: from the cache */
  n = v8_walk(&r, &s, out, 8);
  CHECK_EQ_INT(n, 2);
  CHECK_EQ_INT((int)(r.st.cache_miss - misses), 0);

  /* another function at spin's SharedFunctionInfo address: re-resolved */
  put64(sfi_spin - 1 + 16, scope_info(seq_one("moved"), 0, 25, 30));
  n = v8_walk(&r, &s, out, 8);
  CHECK_EQ_INT(n, 2);
  if (n == 2) CHECK_EQ_STR(out[0].name, "moved");

  /* JS leaf, then a frame whose function is now a number while its
   * context is still a Context: torn, dropped */
  struct fr f2[] = {{.ctx = ctx, .fn = spin}, {.ctx = ctx, .fn = object(130, 16)}, {.marker = 1}};
  s = make_sample(f2, 3);
  uint64_t torn = r.st.torn;
  CHECK_EQ_INT(v8_walk(&r, &s, out, 8), -EAGAIN);
  CHECK_EQ_INT((int)(r.st.torn - torn), 1);

  /* a frame with a heap pointer that is not a Context (a fast API call's
   * C++ frame at the leaf, V8 13's own frames): passed over */
  struct fr f3[] = {
      {.ctx = object(300, 16), .fn = object(130, 16)}, {.ctx = ctx, .fn = heavy}, {.marker = 1}};
  s = make_sample(f3, 3);
  n = v8_walk(&r, &s, out, 8);
  CHECK_EQ_INT(n, 1);
  if (n == 1) CHECK_EQ_STR(out[0].name, "heavyPath");

  /* the leaf's frame pointer leads nowhere (V8's C++ without frame
   * pointers): the exit frame, found by a slot pointing at it, restarts
   * the walk */
  struct fr f5[] = {
      {.ctx = smi(2), .fn = 0}, {.marker = 3}, {.ctx = ctx, .fn = heavy}, {.marker = 1}};
  s = make_sample(f5, 4);
  uint64_t exit_fp = s.regs.sp + 64 + 64;
  memcpy(stack + 64, &exit_fp, 8); /* the C++ frame's saved slot */
  s.regs.bp = 0x10;                /* nothing */
  uint64_t scans = r.st.scanned;
  n = v8_walk(&r, &s, out, 8);
  CHECK_EQ_INT(n, 1);
  if (n == 1) CHECK_EQ_STR(out[0].name, "heavyPath");
  CHECK_EQ_INT((int)(r.st.scanned - scans), 1);

  /* only C++: no JS frame */
  struct fr f4[] = {{.ctx = smi(1), .fn = 0}, {.marker = 1}};
  s = make_sample(f4, 2);
  uint64_t nojs = r.st.no_js;
  CHECK_EQ_INT(v8_walk(&r, &s, out, 8), 0);
  CHECK_EQ_INT((int)(r.st.no_js - nojs), 1);

  /* a chain that points below the stack pointer or loops stops there */
  s = make_sample(f1, 6);
  uint64_t down = 0x7ffd00000000ull - 8;
  memcpy(stack + 64 + 2 * 64, &down, 8);
  n = v8_walk(&r, &s, out, 8);
  CHECK(n >= 0 && n <= 2);
  v8_reader_free(&r);
}

/* Stand-ins for the process's mappings: V8's builtins at [0x1000,
 * 0x2000), C++ with symbols at [0x5000, 0x6000). */
static int fake_in_v8(void *ctx, uint64_t pc) {
  (void)ctx;
  return pc >= 0x1000 && pc < 0x2000;
}
static char native_names[8][32];
static unsigned native_next;
static int fake_native(void *ctx, uint64_t pc, int is_return, struct pp_frame *f) {
  (void)ctx;
  uint64_t a = is_return ? pc - 1 : pc;
  if (a < 0x5000 || a >= 0x6000) return -1;
  char *name = native_names[native_next++ % 8];
  snprintf(name, 32, "cxx_%llx", (unsigned long long)(a & ~0xfull));
  *f = (struct pp_frame){.name = name, .kind = PP_FRAME_NATIVE};
  return 0;
}

/* Sets the return address frame i of make_sample's stack saved for its
 * caller (the caller's pc). */
static void set_return(int i, uint64_t pc) {
  memcpy(stack + 64 + (size_t)i * 64 + 8, &pc, 8);
}

/* JS frames get their tier from the code their pc is in, C++ frames of
 * the chain their names, in the chain's order. */
static void test_kinds_and_native(void) {
  struct v8_reader r;
  CHECK_EQ_INT(v8_reader_init(&r, 1, &L, 16), 0);
  r.native = fake_native;
  r.in_v8_module = fake_in_v8;
  const char *src = "// x\nfunction spin() {}\nfunction heavyPath() {}\n";
  uint64_t scr = script("/app/split.js", src, 0);
  uint64_t ctx = object(205, 32);
  uint64_t spin = function("spin", scr, 5, NULL);
  uint64_t heavy = function("heavyPath", scr, 25, NULL);
  uint64_t sqrt_fn = function("sqrt", 0, 0, NULL); /* no script: a builtin */
  struct pp_frame out[16];

  struct fr f[] = {{.ctx = smi(2), .fn = 0},    /* C++ leaf */
                   {.marker = 3},               /* exit */
                   {.ctx = ctx, .fn = spin},    /* JS in the interpreter */
                   {.ctx = ctx, .fn = sqrt_fn}, /* builtin */
                   {.ctx = ctx, .fn = heavy},   /* JS in code not found */
                   {.marker = 1},               /* entry */
                   {.ctx = smi(2), .fn = 0},    /* C++ */
                   {.ctx = smi(2), .fn = 0}};   /* C++ without a name */
  struct v8_raw_sample s = make_sample(f, 8);
  s.regs.ip = 0x5010;
  set_return(1, 0x1101); /* spin returns into the interpreter */
  set_return(2, 0x1201);
  set_return(3, 0x9001);
  set_return(5, 0x5031);
  set_return(6, 0x7001);
  uint64_t unclassified = r.st.unclassified;
  int n = v8_walk(&r, &s, out, 16);
  CHECK_EQ_INT(n, 5);
  if (n == 5) {
    CHECK_EQ_STR(out[0].name, "cxx_5010");
    CHECK_EQ_INT((int)out[0].kind, PP_FRAME_NATIVE);
    CHECK_EQ_STR(out[1].name, "spin");
    CHECK_EQ_INT((int)out[1].kind, PP_FRAME_JS_INTERPRETED);
    CHECK_EQ_STR(out[2].name, "sqrt");
    CHECK_EQ_INT((int)out[2].kind, PP_FRAME_JS_BUILTIN);
    CHECK_EQ_STR(out[3].name, "heavyPath");
    CHECK_EQ_INT((int)out[3].kind, PP_FRAME_JS);
    CHECK_EQ_STR(out[4].name, "cxx_5030");
  }
  CHECK_EQ_INT((int)(r.st.unclassified - unclassified), 1);

  /* a leaf in the builtins: a frameless builtin called from baseline code
   * (the frame's bytecode offset slot holds a heap object, the feedback
   * vector) or the interpreter (a Smi there) */
  L.fp_bytecode_offset = -32;
  r.L.fp_bytecode_offset = -32;
  struct fr g[] = {{.ctx = ctx, .fn = spin}, {.marker = 1}};
  s = make_sample(g, 2);
  s.regs.ip = 0x1800;
  uint64_t fv = object(300, 16);
  memcpy(stack + 64 - 32, &fv, 8);
  n = v8_walk(&r, &s, out, 16);
  CHECK_EQ_INT(n, 1);
  if (n == 1) CHECK_EQ_INT((int)out[0].kind, PP_FRAME_JS_BASELINE);
  uint64_t off = smi(12);
  memcpy(stack + 64 - 32, &off, 8);
  n = v8_walk(&r, &s, out, 16);
  CHECK_EQ_INT(n, 1);
  if (n == 1) CHECK_EQ_INT((int)out[0].kind, PP_FRAME_JS_INTERPRETED);
  L.fp_bytecode_offset = 0;

  /* nothing but C++: its names, not "(program)" */
  struct fr h[] = {{.ctx = smi(2), .fn = 0}, {.ctx = smi(2), .fn = 0}};
  s = make_sample(h, 2);
  s.regs.ip = 0x5100;
  set_return(0, 0x5201);
  uint64_t nojs = r.st.no_js;
  n = v8_walk(&r, &s, out, 16);
  CHECK_EQ_INT(n, 2);
  if (n == 2) CHECK_EQ_STR(out[1].name, "cxx_5200");
  CHECK_EQ_INT((int)(r.st.no_js - nojs), 1);
  v8_reader_free(&r);
}

int main(void) {
  pp_remote_set_reader(fake_read);
  setup_layout();
  test_strings();
  test_scope_info();
  test_lines();
  test_walk();
  test_kinds_and_native();
  pp_remote_set_reader(NULL);
  return pp_test_finish("test_nodejs_v8_walk");
}
