/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One thread held for an instant: registers and stack top (see
 * polyprof/kit/thread_snapshot.h).
 */
#include "polyprof/kit/thread_snapshot.h"

#include <asm/perf_regs.h>
#include <elf.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>

#include "polyprof/kit/proc.h"

/* A thread stuck in an uninterruptible sleep past the caller's timeout is
 * waited for at most this long in all before it is given up. */
#define SNAPSHOT_HARD_WAIT_MS 1000
#define SNAPSHOT_MAX_IOV 64
#define PAGE 4096u

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((format(printf, 3, 4))) static void say(char *why, size_t whylen, const char *fmt,
                                                      ...) {
  if (!why || !whylen) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, whylen, fmt, ap);
  va_end(ap);
}

/* Why PTRACE_SEIZE was refused: another tracer, or no permission. */
static int refused(uint32_t pid, uint32_t tid, int err, char *why, size_t whylen) {
  if (err == ESRCH) {
    say(why, whylen, "thread %u is gone", tid);
    return -ESRCH;
  }
  char path[64], buf[2048];
  snprintf(path, sizeof(path), "/proc/%u/task/%u/status", pid, tid);
  long tracer = 0;
  if (pp_read_file(path, buf, sizeof(buf), NULL) == 0) {
    const char *v = pp_proc_status_field(buf, "TracerPid:");
    if (v) tracer = strtol(v, NULL, 10);
  } else {
    say(why, whylen, "thread %u is gone", tid);
    return -ESRCH;
  }
  if (tracer > 0) {
    say(why, whylen, "traced by process %ld (a debugger or tracer): not touched", tracer);
    return -EPERM;
  }
  say(why, whylen, "ptrace refused (%s): needs CAP_SYS_PTRACE", strerror(err));
  return -err;
}

/* The kernel stack of a thread, one name a line; read before it is held,
 * when it still shows where the thread waits. */
static void read_kernel_stack(uint32_t pid, uint32_t tid, char *out, size_t cap) {
  char path[64], buf[4096];
  out[0] = '\0';
  snprintf(path, sizeof(path), "/proc/%u/task/%u/stack", pid, tid);
  if (pp_read_file(path, buf, sizeof(buf), NULL) < 0) return;
  size_t len = 0;
  for (char *line = buf; line && *line;) {
    char *next = strchr(line, '\n');
    if (next) *next++ = '\0';
    /* "[<0>] do_sys_poll+0x3d6/0x580" */
    const char *name = strstr(line, "] ");
    if (name) {
      name += 2;
      size_t n = strcspn(name, "+ ");
      if (n && len + n + 2 <= cap) {
        memcpy(out + len, name, n);
        len += n;
        out[len++] = '\n';
        out[len] = '\0';
      }
    }
    line = next;
  }
}

static char proc_state(uint32_t pid, uint32_t tid) {
  char path[64], buf[512];
  snprintf(path, sizeof(path), "/proc/%u/task/%u/stat", pid, tid);
  if (pp_read_file(path, buf, sizeof(buf), NULL) < 0) return 0;
  const char *close = strrchr(buf, ')');
  return close && close[1] == ' ' ? close[2] : 0;
}

/* Waits for the stop the interrupt asked for. 1 stopped (*sig: a signal
 * to hand back on detach), 0 not in time, -ESRCH gone. */
static int wait_stop(uint32_t tid, int timeout_ms, int *sig) {
  uint64_t deadline = mono_ns() + (uint64_t)timeout_ms * 1000000ull;
  struct timespec nap = {0, 20000};
  for (;;) {
    int status;
    pid_t r = waitpid((pid_t)tid, &status, __WALL | WNOHANG);
    if (r == (pid_t)tid) {
      if (WIFEXITED(status) || WIFSIGNALED(status)) return -ESRCH;
      if (!WIFSTOPPED(status)) continue;
      /* a signal that arrived first is delivered on detach, not lost */
      *sig = (status >> 16) == PTRACE_EVENT_STOP ? 0 : WSTOPSIG(status);
      return 1;
    }
    if (r < 0 && errno != EINTR) return -ESRCH;
    if (mono_ns() >= deadline) return 0;
    nanosleep(&nap, NULL);
  }
}

static int read_regs(uint32_t tid, struct pp_thread_snapshot *out) {
  struct user_regs_struct r;
  struct iovec iov = {&r, sizeof(r)};
  if (ptrace(PTRACE_GETREGSET, tid, (void *)(uintptr_t)NT_PRSTATUS, &iov) != 0) return -errno;
  memset(out->regs, 0, sizeof(out->regs));
#if defined(__x86_64__)
  if (iov.iov_len < sizeof(r)) return -EIO;
  uint64_t *g = out->regs;
  g[PERF_REG_X86_AX] = r.rax;
  g[PERF_REG_X86_BX] = r.rbx;
  g[PERF_REG_X86_CX] = r.rcx;
  g[PERF_REG_X86_DX] = r.rdx;
  g[PERF_REG_X86_SI] = r.rsi;
  g[PERF_REG_X86_DI] = r.rdi;
  g[PERF_REG_X86_BP] = r.rbp;
  g[PERF_REG_X86_SP] = r.rsp;
  g[PERF_REG_X86_IP] = r.rip;
  g[PERF_REG_X86_FLAGS] = r.eflags;
  g[PERF_REG_X86_CS] = r.cs;
  g[PERF_REG_X86_SS] = r.ss;
  g[PERF_REG_X86_DS] = r.ds;
  g[PERF_REG_X86_ES] = r.es;
  g[PERF_REG_X86_FS] = r.fs;
  g[PERF_REG_X86_GS] = r.gs;
  g[PERF_REG_X86_R8] = r.r8;
  g[PERF_REG_X86_R9] = r.r9;
  g[PERF_REG_X86_R10] = r.r10;
  g[PERF_REG_X86_R11] = r.r11;
  g[PERF_REG_X86_R12] = r.r12;
  g[PERF_REG_X86_R13] = r.r13;
  g[PERF_REG_X86_R14] = r.r14;
  g[PERF_REG_X86_R15] = r.r15;
  out->ip = r.rip;
  out->sp = r.rsp;
#elif defined(__aarch64__)
  if (iov.iov_len < sizeof(r)) return -EIO;
  for (int i = 0; i < 31; i++)
    out->regs[PERF_REG_ARM64_X0 + i] = r.regs[i];
  out->regs[PERF_REG_ARM64_SP] = r.sp;
  out->regs[PERF_REG_ARM64_PC] = r.pc;
  out->ip = r.pc;
  out->sp = r.sp;
#else
#error "thread snapshots know the registers of x86-64 and aarch64 only"
#endif
  return 0;
}

/* Copies [sp, sp + cap) as far as it is mapped: page by page, so that the
 * end of the stack mapping ends the copy rather than failing it. */
static size_t read_stack(uint32_t pid, uint64_t sp, uint8_t *buf, size_t cap) {
  struct iovec local[SNAPSHOT_MAX_IOV], remote[SNAPSHOT_MAX_IOV];
  size_t n = 0, off = 0;
  while (off < cap && n < SNAPSHOT_MAX_IOV) {
    uint64_t at = sp + off;
    size_t chunk = PAGE - (size_t)(at % PAGE);
    if (chunk > cap - off) chunk = cap - off;
    local[n] = (struct iovec){buf + off, chunk};
    remote[n] = (struct iovec){(void *)(uintptr_t)at, chunk};
    n++;
    off += chunk;
  }
  ssize_t got = process_vm_readv((pid_t)pid, local, n, remote, n, 0);
  return got > 0 ? (size_t)got : 0;
}

int pp_thread_snapshot(uint32_t pid, uint32_t tid, uint8_t *stack, size_t stack_cap, int timeout_ms,
                       struct pp_thread_snapshot *out, char *why, size_t whylen) {
  if (why && whylen) why[0] = '\0';
  out->stack_len = 0;
  out->held_ns = 0;
  out->ip = out->sp = 0;
  out->state_before = proc_state(pid, tid);
  read_kernel_stack(pid, tid, out->kernel, sizeof(out->kernel));
  uint64_t t0 = mono_ns();
  if (ptrace(PTRACE_SEIZE, tid, 0, 0) != 0) return refused(pid, tid, errno, why, whylen);
  if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) != 0) {
    int e = errno;
    ptrace(PTRACE_DETACH, tid, 0, 0);
    say(why, whylen, "interrupt refused (%s)", strerror(e));
    return e == ESRCH ? -ESRCH : -EIO;
  }
  int sig = 0;
  int w = wait_stop(tid, timeout_ms, &sig);
  /* past the timeout the thread is not read, but a stop that comes soon
   * is still waited for: a thread left attached would stop at it */
  if (w == 0 && timeout_ms < SNAPSHOT_HARD_WAIT_MS) {
    w = wait_stop(tid, SNAPSHOT_HARD_WAIT_MS - timeout_ms, &sig);
    if (w > 0) {
      ptrace(PTRACE_DETACH, tid, 0, (void *)(uintptr_t)sig);
      say(why, whylen, "thread %u did not stop within %d ms", tid, timeout_ms);
      return -ETIMEDOUT;
    }
  }
  if (w < 0) {
    say(why, whylen, "thread %u is gone", tid);
    return -ESRCH;
  }
  if (w == 0) {
    /* not stopped: detaching fails, and the pending interrupt is dropped
     * by the kernel when this tracer detaches or exits; a stop that
     * happened since is released here */
    ptrace(PTRACE_DETACH, tid, 0, 0);
    say(why, whylen, "thread %u did not stop in time (uninterruptible sleep)", tid);
    return -ETIMEDOUT;
  }
  int rc = read_regs(tid, out);
  if (rc == 0 && stack && stack_cap) out->stack_len = read_stack(pid, out->sp, stack, stack_cap);
  ptrace(PTRACE_DETACH, tid, 0, (void *)(uintptr_t)sig);
  out->held_ns = mono_ns() - t0;
  if (rc < 0) {
    say(why, whylen, "registers unreadable (%s)", strerror(-rc));
    return -EIO;
  }
  return 0;
}
