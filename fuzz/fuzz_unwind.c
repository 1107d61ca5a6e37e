/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the kit's DWARF unwinder (sdk/unwind.c) as the perf plugin
 * drives it (plugins/perf/unwind.c), with libunwind's remote API over an
 * object's .eh_frame_hdr, .eh_frame and .debug_frame (converted by
 * sdk/debug_frame.c as dso.c does) and a user stack sample (registers and stack copy), all from the
 * input (fuzz_unwind.h). The unwinder checks the .eh_frame_hdr before handing its table to
 * libunwind and serves every byte libunwind reads from these buffers, so a bad length or offset in
 * the tables must end the unwind, never read outside them. Unwound three times: with both tables,
 * with .debug_frame only, and with a 3-frame cap. Seeds are real samples of a small program
 * compiled at seed time by gcc and clang (seed_unwind.c).
 *
 * dso.c and procs.c, which read files and /proc, are replaced by the two
 * functions unwind.c calls there: the object's tables are loaded already
 * and the process has one mapping.
 */
#include <asm/perf_regs.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "fuzz_unwind.h"
#include "perf.h"

static struct perf_map the_map;

struct perf_map *perf_proc_find_map(struct perf_proc *p, uint64_t addr) {
  (void)p;
  if (addr >= the_map.start && addr < the_map.end) return &the_map;
  return NULL;
}

int perf_dso_need_unwind(struct perf_dsos *d, struct perf_dso *dso, const struct perf_proc *p,
                         const struct perf_map *m) {
  (void)d, (void)p, (void)m;
  return dso->eh_hdr || dso->dbg.data ? 0 : -ENOENT;
}

/* The seeds and the input layout are x86-64 samples (the register set
 * perf copies there). */
#if defined(__x86_64__)
_Static_assert(FUZZ_UNWIND_NREGS == PERF_REG_X86_64_MAX, "register count");

/* The next n bytes of the input (cut to what is left), copied so that
 * ASan sees a read past them. */
static uint8_t *take(const uint8_t **p, const uint8_t *end, uint32_t n, uint64_t *len) {
  size_t left = (size_t)(end - *p);
  size_t k = n < left ? n : left;
  uint8_t *b = malloc(k ? k : 1);
  if (!b) abort();
  if (k) memcpy(b, *p, k);
  *p += k;
  *len = k;
  return b;
}

static void unwind(struct perf_state *st, struct perf_proc *proc, const uint64_t *regs,
                   const uint8_t *stack, uint64_t stack_len, int max) {
  uint64_t ips[64];
  int n = perf_unwind_user(st, proc, regs, FUZZ_UNWIND_NREGS, stack, stack_len, ips, max);
  if (n < 1 || n > max || ips[0] != regs[PERF_REG_X86_IP]) abort();
  for (int i = 1; i < n; i++)
    if (ips[i] == 0) abort(); /* a zero IP ends the stack, it is not a frame */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static struct perf_state *st;
  static struct perf_proc proc;
  if (!st) {
    st = calloc(1, sizeof(*st));
    if (!st || perf_unwind_init(&st->unwind) < 0) abort();
    st->ev.regs_mask = (1ull << PERF_REG_X86_64_MAX) - 1;
  }
  struct fuzz_unwind_hdr h;
  if (size < sizeof(h)) return 0;
  memcpy(&h, data, sizeof(h));
  const uint8_t *p = data + sizeof(h), *end = data + size;

  struct perf_dso dso;
  memset(&dso, 0, sizeof(dso));
  uint64_t stack_len;
  uint8_t *stack = take(&p, end, h.stack_len, &stack_len);
  uint8_t *hdr = take(&p, end, h.hdr_len, &dso.eh_frame_hdr_size);
  uint8_t *frame = take(&p, end, h.frame_len, &dso.eh_frame_size);
  uint64_t dbg_len;
  uint8_t *dbg = take(&p, end, h.dbg_len, &dbg_len);
  dso.info.eh_frame_hdr_vaddr = h.eh_frame_hdr_vaddr;
  dso.info.eh_frame_vaddr = h.eh_frame_vaddr;
  /* dso.c keeps an .eh_frame only if libunwind can take all of it */
  if (dso.eh_frame_hdr_size && dso.eh_frame_size &&
      pp_eh_frame_ok(hdr, dso.eh_frame_hdr_size, h.eh_frame_hdr_vaddr, frame, dso.eh_frame_size,
                     h.eh_frame_vaddr)) {
    dso.eh_hdr = hdr;
    dso.eh_frame = frame;
  }
  if (dbg_len && h.load_top) {
    /* where dso.c lays the converted table: a page past the last PT_LOAD */
    uint64_t base = ((h.load_top + 0xfff) & ~0xfffull) + 0x1000;
    pp_debug_frame_convert(dbg, (size_t)dbg_len, base, &dso.dbg);
  }
  dso.unw_state = 1;
  the_map = (struct perf_map){
      .start = h.map_start, .end = h.map_end, .dso = &dso, .bias = h.bias, .bias_ok = 1};

  unwind(st, &proc, h.regs, stack, stack_len, 64);
  unwind(st, &proc, h.regs, stack, stack_len, 3);
  if (dso.dbg.data) {
    dso.eh_hdr = NULL;
    dso.eh_frame = NULL;
    unwind(st, &proc, h.regs, stack, stack_len, 64);
  }

  the_map.dso = NULL;
  free(dso.dbg.data);
  free(stack);
  free(hdr);
  free(frame);
  free(dbg);
  return 0;
}
#else
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  (void)data, (void)size;
  return 0;
}
#endif
