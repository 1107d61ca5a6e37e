/* SPDX-License-Identifier: Apache-2.0 */
/*
 * DWARF unwinding of a user stack copied by the kernel
 * (PERF_SAMPLE_REGS_USER + PERF_SAMPLE_STACK_USER) with libunwind's remote
 * API. Nothing of the target is read live: the unwinder reads the stack
 * copy and the unwind tables the caller loaded from the object files
 * (pp_unwind_tables_load), so a sample costs no system call.
 *
 * Linked from the separate static library libpolyprof-kit-unwind.a
 * (it needs libunwind-generic); the table loader is in the kit proper.
 */
#ifndef POLYPROF_KIT_UNWIND_H
#define POLYPROF_KIT_UNWIND_H

#include <stddef.h>
#include <stdint.h>

#include "polyprof/kit/debug_frame.h"
#include "polyprof/kit/elf_symbols.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Registers of a sample, indexed by perf's register numbers
 * (PERF_REG_X86_* / PERF_REG_ARM64_*). */
#define PP_UNWIND_NREGS 33
/* The registers to ask perf for (perf_event_attr.sample_regs_user). */
uint64_t pp_unwind_regs_mask(void);
/* Spreads perf's packed registers (ascending bit order of mask) into
 * regs[PP_UNWIND_NREGS]. */
void pp_unwind_regs_unpack(uint64_t mask, const uint64_t *packed, unsigned n, uint64_t *regs);

/* What the caller knows of the object that holds an address: its mapping,
 * load bias (runtime address = ELF vaddr + bias) and tables, which stay
 * valid for the duration of the unwind. */
struct pp_unwind_object {
  uint64_t start, end, bias;
  const uint8_t *eh_hdr; /* NULL: no .eh_frame_hdr */
  uint64_t eh_hdr_vaddr, eh_hdr_size;
  const uint8_t *eh_frame;
  uint64_t eh_frame_vaddr, eh_frame_size;
  const struct pp_debug_frame *dbg; /* NULL or empty: none */
};
/* 0 with *obj filled, or negative: no unwind info for ip. */
typedef int (*pp_unwind_find_fn)(void *arg, uint64_t ip, struct pp_unwind_object *obj);

struct pp_unwinder;
int pp_unwinder_new(struct pp_unwinder **out);
void pp_unwinder_free(struct pp_unwinder *u);
/* Lets libunwind remember what it worked out per address (the register
 * rules of a code address: most of an unwind's cost). Only for an
 * unwinder that serves a single process, which must call
 * pp_unwinder_flush() whenever that process's mappings may have changed
 * (an address can then hold other code). Off by default. */
void pp_unwinder_cache(struct pp_unwinder *u, int on);
void pp_unwinder_flush(struct pp_unwinder *u);

/* Return addresses of the stack, innermost first (ips[0] = the sampled
 * IP); returns how many (at most max). *failed is set when libunwind
 * reported an error (not a plain end of the stack). */
int pp_unwind_stack(struct pp_unwinder *u, const uint64_t *regs, const uint8_t *stack,
                    uint64_t stack_len, pp_unwind_find_fn find, void *arg, uint64_t *ips, int max,
                    int *failed);

/* One object's tables, read from its file (fd) with the facts of info:
 * .eh_frame_hdr + .eh_frame (checked with pp_eh_frame_ok) and
 * .debug_frame (converted). 0, -ENOENT (none usable), -errno. */
struct pp_unwind_tables {
  uint8_t *eh_hdr, *eh_frame;
  uint64_t eh_hdr_size, eh_frame_size;
  struct pp_debug_frame dbg;
};
int pp_unwind_tables_load(int fd, const struct pp_elf_info *info, struct pp_unwind_tables *t);
void pp_unwind_tables_free(struct pp_unwind_tables *t);
size_t pp_unwind_tables_bytes(const struct pp_unwind_tables *t);

#ifdef __cplusplus
}
#endif

#endif
