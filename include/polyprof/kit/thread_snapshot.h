/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One thread of another process, held for an instant: its user registers
 * and a copy of the top of its stack, what a DWARF or frame-pointer
 * unwinder needs to walk the thread's native stack where it is now (a
 * thread blocked in a system call included, which a CPU sampler never
 * sees).
 *
 * The thread is held with PTRACE_SEIZE + PTRACE_INTERRUPT (no signal is
 * sent to the target), its registers read with PTRACE_GETREGSET, its stack
 * with process_vm_readv, and it is let go with PTRACE_DETACH at once. It
 * is never left stopped: a thread that does not reach the stop within the
 * timeout is given up, its pending interrupt cancelled by the kernel at
 * the latest when the caller exits. A thread traced by another process is
 * not touched. Needs ptrace permission over the target (CAP_SYS_PTRACE,
 * or the same user under kernel.yama.ptrace_scope 0) and the ptrace and
 * wait4 system calls.
 */
#ifndef POLYPROF_KIT_THREAD_SNAPSHOT_H
#define POLYPROF_KIT_THREAD_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Registers indexed by perf's register numbers (PERF_REG_X86_* or
 * PERF_REG_ARM64_*), the layout of polyprof/kit/unwind.h. */
#define PP_SNAPSHOT_NREGS 33

struct pp_thread_snapshot {
  uint64_t regs[PP_SNAPSHOT_NREGS];
  uint64_t ip, sp;
  size_t stack_len;  /* bytes copied from sp into the caller's buffer */
  uint64_t held_ns;  /* from PTRACE_SEIZE to PTRACE_DETACH */
  char state_before; /* /proc state letter before it was held ('S', 'R'...), 0 unknown */
  char kernel[1024]; /* /proc/PID/task/TID/stack read before it was held: one
                      * function name a line, innermost first; "" if unreadable */
};

/* Holds thread tid of process pid, reads its registers and up to
 * stack_cap bytes of its stack from sp into stack, and lets it go.
 * timeout_ms bounds the wait for the stop. Returns 0, or a negative errno
 * with why saying it in one line: -EPERM (traced by another process, or
 * not permitted), -ESRCH (gone), -ETIMEDOUT (did not stop in time),
 * -EIO (registers unreadable). On every return the thread runs as before. */
int pp_thread_snapshot(uint32_t pid, uint32_t tid, uint8_t *stack, size_t stack_cap, int timeout_ms,
                       struct pp_thread_snapshot *out, char *why, size_t whylen);

#ifdef __cplusplus
}
#endif

#endif
