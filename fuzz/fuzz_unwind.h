/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The input of the unwind fuzz target, shared with the seed generator
 * (seed_unwind.c): one object's unwind sections and one user stack sample
 * as perf copies it. Little-endian, no padding: the header, then
 * stack_len bytes of stack (starting at regs[SP]), hdr_len bytes of
 * .eh_frame_hdr, frame_len bytes of .eh_frame and dbg_len bytes of
 * .debug_frame. A length past the end of the input is cut to what is left.
 */
#ifndef PP_FUZZ_UNWIND_H
#define PP_FUZZ_UNWIND_H

#include <stdint.h>

#define FUZZ_UNWIND_NREGS 24 /* PERF_REG_X86_64_MAX */

struct fuzz_unwind_hdr {
  uint64_t regs[FUZZ_UNWIND_NREGS]; /* indexed by PERF_REG_X86_* */
  uint64_t map_start, map_end;      /* the object's executable mapping */
  uint64_t bias;                    /* runtime address - ELF vaddr */
  uint64_t eh_frame_hdr_vaddr, eh_frame_vaddr;
  uint64_t load_top; /* end of the highest PT_LOAD (places .debug_frame's table) */
  uint32_t stack_len, hdr_len, frame_len, dbg_len;
};

#endif
