/* SPDX-License-Identifier: Apache-2.0 */
/*
 * DWARF unwinding of user stacks copied by the kernel
 * (PERF_SAMPLE_REGS_USER + PERF_SAMPLE_STACK_USER), with libunwind's remote
 * API: libunwind asks us for registers (from the sample), memory (the stack
 * copy, and the object's .eh_frame_hdr / .eh_frame, which the caller loaded
 * from the object file) and unwind info for an address (the caller locates
 * the object; we hand libunwind its binary-search table: the object's
 * .eh_frame_hdr, else the table debug_frame.c built from its .debug_frame).
 *
 * Nothing of the target is read live: a sample is unwound from what the
 * kernel copied at sampling time plus the object files, so it works for any
 * process we can read the files of, and costs no syscalls per sample once
 * the tables are cached.
 */
#include <asm/perf_regs.h>
#include <errno.h>
#include <libunwind.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "polyprof/kit/unwind.h"

/* Exported by libunwind but not declared in its public header. */
extern int UNW_OBJ(dwarf_search_unwind_table)(unw_addr_space_t as, unw_word_t ip,
                                              unw_dyn_info_t *di, unw_proc_info_t *pi,
                                              int need_unwind_info, void *arg);
#define dwarf_search_unwind_table UNW_OBJ(dwarf_search_unwind_table)

/* The sampled user registers as perf lays them out. x86-64 is what the
 * plugins declare: the arm64 mapping lets the kit build there, and is the
 * identity because perf and libunwind both number x0-x30, sp, pc. */
#if defined(__aarch64__)
#define REG_MAX PERF_REG_ARM64_MAX
#define REG_SP PERF_REG_ARM64_SP
#define REG_IP PERF_REG_ARM64_PC
#else
#define REG_MAX PERF_REG_X86_64_MAX
#define REG_SP PERF_REG_X86_SP
#define REG_IP PERF_REG_X86_IP
#endif

_Static_assert(REG_MAX <= PP_UNWIND_NREGS, "register table");

struct pp_unwinder {
  unw_addr_space_t as;
};

/* One unwind in progress (libunwind's `arg`). */
struct uctx {
  pp_unwind_find_fn find;
  void *find_arg;
  const uint64_t *regs;
  const uint8_t *stack;
  uint64_t stack_start, stack_len;
  /* the object whose tables libunwind is reading right now */
  struct pp_unwind_object obj;
  bool have_obj;
};

static int find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi,
                          int need_unwind_info, void *arg) {
  struct uctx *c = arg;
  struct pp_unwind_object o;
  memset(&o, 0, sizeof(o));
  if (c->find(c->find_arg, ip, &o) < 0) return -UNW_ENOINFO;
  c->obj = o;
  c->have_obj = true;
  unw_dyn_info_t di;
  memset(&di, 0, sizeof(di));
  di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
  di.start_ip = o.start;
  di.end_ip = o.end;
  int rc = -UNW_ENOINFO;
  /* .eh_frame_hdr: version 1, eh_frame_ptr encoding, fde_count encoding,
   * table encoding; the table must be datarel sdata4 (what every linker
   * writes) for libunwind's binary search. The two encoded values before
   * the table are 4 bytes each for the encodings linkers use
   * (pcrel/udata4/sdata4); anything else is refused. */
  const uint8_t *h = o.eh_hdr;
  if (h && o.eh_hdr_size >= 12 && h[0] == 1 && h[3] == 0x3b &&
      ((h[1] & 0x0f) == 0x0b || (h[1] & 0x0f) == 0x03) &&
      ((h[2] & 0x0f) == 0x03 || (h[2] & 0x0f) == 0x0b)) {
    uint32_t fde_count;
    memcpy(&fde_count, h + 8, 4);
    if ((uint64_t)fde_count * 8 <= o.eh_hdr_size - 12) {
      di.u.rti.segbase = o.bias + o.eh_hdr_vaddr;
      di.u.rti.table_data = o.bias + o.eh_hdr_vaddr + 12;
      di.u.rti.table_len = fde_count * 8 / sizeof(unw_word_t);
      rc = dwarf_search_unwind_table(as, ip, &di, pi, need_unwind_info, arg);
    }
  }
  /* Not in .eh_frame (code built without unwind tables): .debug_frame,
   * rewritten by debug_frame.c into the same kind of table. */
  if (rc == -UNW_ENOINFO && o.dbg && o.dbg->data) {
    di.u.rti.segbase = o.bias + o.dbg->vaddr;
    di.u.rti.table_data = o.bias + o.dbg->vaddr;
    di.u.rti.table_len = o.dbg->nentries * 8 / sizeof(unw_word_t);
    rc = dwarf_search_unwind_table(as, ip, &di, pi, need_unwind_info, arg);
  }
  return rc;
}

static void put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg) {}

static int get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t *dilap, void *arg) {
  return -UNW_ENOINFO;
}

/* Reads 8 bytes from a buffer that holds [base, base+len) of the target. */
static int from_buf(const uint8_t *buf, uint64_t base, uint64_t len, uint64_t addr,
                    unw_word_t *val) {
  if (addr < base || addr - base >= len) return -1;
  uint64_t off = addr - base;
  uint64_t v = 0;
  size_t n = len - off >= 8 ? 8 : (size_t)(len - off);
  memcpy(&v, buf + off, n);
  *val = v;
  return 0;
}

static int access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write, void *arg) {
  struct uctx *c = arg;
  if (write) return -UNW_EINVAL;
  if (from_buf(c->stack, c->stack_start, c->stack_len, addr, val) == 0) return 0;
  const struct pp_unwind_object *d = c->have_obj ? &c->obj : NULL;
  if (d && d->eh_hdr) {
    if (from_buf(d->eh_hdr, d->bias + d->eh_hdr_vaddr, d->eh_hdr_size, addr, val) == 0) return 0;
    if (d->eh_frame &&
        from_buf(d->eh_frame, d->bias + d->eh_frame_vaddr, d->eh_frame_size, addr, val) == 0)
      return 0;
  }
  if (d && d->dbg && d->dbg->data &&
      from_buf(d->dbg->data, d->bias + d->dbg->vaddr, d->dbg->size, addr, val) == 0)
    return 0;
  /* Anything else (code bytes for signal-frame detection, data above the
   * copied stack) is not available: libunwind treats that as the end. */
  *val = 0;
  return -UNW_EINVAL;
}

static int unw_to_perf(int reg) {
#if defined(__aarch64__)
  return reg >= UNW_AARCH64_X0 && reg <= UNW_AARCH64_PC ? reg : -1;
#else
  switch (reg) {
    case UNW_X86_64_RAX:
      return PERF_REG_X86_AX;
    case UNW_X86_64_RDX:
      return PERF_REG_X86_DX;
    case UNW_X86_64_RCX:
      return PERF_REG_X86_CX;
    case UNW_X86_64_RBX:
      return PERF_REG_X86_BX;
    case UNW_X86_64_RSI:
      return PERF_REG_X86_SI;
    case UNW_X86_64_RDI:
      return PERF_REG_X86_DI;
    case UNW_X86_64_RBP:
      return PERF_REG_X86_BP;
    case UNW_X86_64_RSP:
      return PERF_REG_X86_SP;
    case UNW_X86_64_R8:
      return PERF_REG_X86_R8;
    case UNW_X86_64_R9:
      return PERF_REG_X86_R9;
    case UNW_X86_64_R10:
      return PERF_REG_X86_R10;
    case UNW_X86_64_R11:
      return PERF_REG_X86_R11;
    case UNW_X86_64_R12:
      return PERF_REG_X86_R12;
    case UNW_X86_64_R13:
      return PERF_REG_X86_R13;
    case UNW_X86_64_R14:
      return PERF_REG_X86_R14;
    case UNW_X86_64_R15:
      return PERF_REG_X86_R15;
    case UNW_X86_64_RIP:
      return PERF_REG_X86_IP;
    default:
      return -1;
  }
#endif
}

static int access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val, int write,
                      void *arg) {
  struct uctx *c = arg;
  if (write) return -UNW_EREADONLYREG;
  int r = unw_to_perf(reg);
  if (r < 0) return -UNW_EBADREG;
  *val = c->regs[r];
  return 0;
}

static int access_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val, int write,
                        void *arg) {
  return -UNW_EBADREG;
}

static int resume(unw_addr_space_t as, unw_cursor_t *cu, void *arg) {
  return -UNW_EINVAL;
}

static int get_proc_name(unw_addr_space_t as, unw_word_t addr, char *buf, size_t len,
                         unw_word_t *offp, void *arg) {
  return -UNW_EINVAL;
}

static unw_accessors_t accessors = {
    .find_proc_info = find_proc_info,
    .put_unwind_info = put_unwind_info,
    .get_dyn_info_list_addr = get_dyn_info_list_addr,
    .access_mem = access_mem,
    .access_reg = access_reg,
    .access_fpreg = access_fpreg,
    .resume = resume,
    .get_proc_name = get_proc_name,
};

int pp_unwinder_new(struct pp_unwinder **out) {
  struct pp_unwinder *u = calloc(1, sizeof(*u));
  if (!u) return -ENOMEM;
  u->as = unw_create_addr_space(&accessors, 0);
  if (!u->as) {
    free(u);
    return -ENOMEM;
  }
  /* One address space serves every process, so libunwind must not cache
   * unwind info by address across samples. */
  unw_set_caching_policy(u->as, UNW_CACHE_NONE);
  *out = u;
  return 0;
}

void pp_unwinder_cache(struct pp_unwinder *u, int on) {
  unw_set_caching_policy(u->as, on ? UNW_CACHE_GLOBAL : UNW_CACHE_NONE);
}

void pp_unwinder_flush(struct pp_unwinder *u) {
  unw_flush_cache(u->as, 0, 0);
}

void pp_unwinder_free(struct pp_unwinder *u) {
  if (!u) return;
  unw_destroy_addr_space(u->as);
  free(u);
}

uint64_t pp_unwind_regs_mask(void) {
#if defined(__aarch64__)
  return (1ull << PERF_REG_ARM64_MAX) - 1; /* x0-x30, sp, pc */
#else
  /* general purpose + ip + sp; perf refuses the segment registers here */
  static const int regs[] = {PERF_REG_X86_AX,  PERF_REG_X86_BX,  PERF_REG_X86_CX,  PERF_REG_X86_DX,
                             PERF_REG_X86_SI,  PERF_REG_X86_DI,  PERF_REG_X86_BP,  PERF_REG_X86_SP,
                             PERF_REG_X86_IP,  PERF_REG_X86_R8,  PERF_REG_X86_R9,  PERF_REG_X86_R10,
                             PERF_REG_X86_R11, PERF_REG_X86_R12, PERF_REG_X86_R13, PERF_REG_X86_R14,
                             PERF_REG_X86_R15};
  uint64_t m = 0;
  for (size_t i = 0; i < sizeof(regs) / sizeof(regs[0]); i++)
    m |= 1ull << regs[i];
  return m;
#endif
}

void pp_unwind_regs_unpack(uint64_t mask, const uint64_t *packed, unsigned n, uint64_t *regs) {
  memset(regs, 0, PP_UNWIND_NREGS * sizeof(*regs));
  /* regs arrive packed in ascending bit order of the mask */
  unsigned k = 0;
  for (int bit = 0; bit < REG_MAX && k < n; bit++)
    if (mask & (1ull << bit)) regs[bit] = packed[k++];
}

int pp_unwind_stack(struct pp_unwinder *u, const uint64_t *regs, const uint8_t *stack,
                    uint64_t stack_len, pp_unwind_find_fn find, void *arg, uint64_t *ips, int max,
                    int *failed) {
  struct uctx c;
  memset(&c, 0, sizeof(c));
  c.find = find;
  c.find_arg = arg;
  c.regs = regs;
  c.stack = stack;
  c.stack_len = stack_len;
  c.stack_start = regs[REG_SP];
  *failed = 0;
  if (max <= 0) return 0;
  ips[0] = regs[REG_IP];
  int n = 1;
  unw_cursor_t cur;
  if (unw_init_remote(&cur, u->as, &c) < 0) return n;
  while (n < max) {
    int r = unw_step(&cur);
    if (r <= 0) {
      if (r < 0) *failed = 1;
      break;
    }
    unw_word_t ip = 0;
    if (unw_get_reg(&cur, UNW_REG_IP, &ip) < 0 || ip == 0) break;
    ips[n++] = ip;
  }
  return n;
}
