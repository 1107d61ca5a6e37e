/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ring buffers' records, oldest first: a SAMPLE becomes one stack per
 * mode (frame-pointer callchain, DWARF-unwound stack copy, or both in smart
 * mode) counted in stacks.c; MMAP2, COMM, FORK and EXIT keep procs.c's view
 * of processes current; LOST and THROTTLE are counted. Every record is
 * bounds-checked against its own size.
 */
#include <string.h>
#include <time.h>

#include <asm/perf_regs.h>

#include "perf.h"

/* ---- records ---- */

struct sample_view {
  uint32_t pid, tid;
  const uint64_t *chain;
  uint64_t nchain;
  uint64_t abi;
  const uint64_t *regs;
  unsigned nregs;
  const uint8_t *stack;
  uint64_t stack_len;
};

/* Parses a SAMPLE record against our sample_type; 0 or -1 if it does not
 * fit its own size. */
static int parse_sample(const struct perf_state *st, const uint8_t *rec, size_t size,
                        struct sample_view *v) {
  size_t off = sizeof(struct perf_event_header);
  memset(v, 0, sizeof(*v));
#define NEED(n)                      \
  do {                               \
    if ((n) > size - off) return -1; \
  } while (0)
  NEED(24);
  uint32_t pt[2];
  memcpy(pt, rec + off + 8, 8);
  v->pid = pt[0];
  v->tid = pt[1];
  off += 24; /* ip, pid/tid, time */
  NEED(8);
  memcpy(&v->nchain, rec + off, 8);
  off += 8;
  if (v->nchain > (size - off) / 8) return -1;
  v->chain = (const uint64_t *)(rec + off); /* records are 8-byte aligned */
  off += v->nchain * 8;
  if (st->ev.sample_type & PERF_SAMPLE_REGS_USER) {
    NEED(8);
    memcpy(&v->abi, rec + off, 8);
    off += 8;
    if (v->abi) {
      unsigned nregs = (unsigned)__builtin_popcountll(st->ev.regs_mask);
      NEED((size_t)nregs * 8);
      v->regs = (const uint64_t *)(rec + off);
      v->nregs = nregs;
      off += (size_t)nregs * 8;
    }
  }
  if (st->ev.sample_type & PERF_SAMPLE_STACK_USER) {
    NEED(8);
    uint64_t ssize;
    memcpy(&ssize, rec + off, 8);
    off += 8;
    if (ssize) {
      if (ssize > size - off) return -1;
      const uint8_t *data = rec + off;
      off += ssize;
      NEED(8);
      uint64_t dyn;
      memcpy(&dyn, rec + off, 8);
      v->stack = data;
      v->stack_len = dyn < ssize ? dyn : ssize;
    }
  }
#undef NEED
  return 0;
}

/* The user instruction pointer among the sampled registers. */
static uint64_t user_ip(const struct perf_state *st, const uint64_t *regs, unsigned nregs) {
  unsigned k = 0;
  for (int bit = 0; bit < 64 && k < nregs; bit++) {
    if (!(st->ev.regs_mask & (1ull << bit))) continue;
#if defined(__aarch64__)
    if (bit == PERF_REG_ARM64_PC) return regs[k];
#else
    if (bit == PERF_REG_X86_IP) return regs[k];
#endif
    k++;
  }
  return 0;
}

static void handle_sample(struct perf_state *st, const uint8_t *rec, size_t size) {
  struct sample_view v;
  if (parse_sample(st, rec, size, &v) < 0) {
    st->ev.malformed++;
    return;
  }
  if (!perf_pid_wanted(st, v.pid)) {
    st->filtered++;
    return;
  }
  st->samples++;
  const char *comm = perf_thread_comm(st, v.pid, v.tid);
  struct perf_proc *p = perf_proc_get(st, v.pid, true);
  if (!p) return;
  p->sampled = true;
  p->last_used = st->tick;

  uint32_t kframes[PERF_MAX_FRAMES], ufp[PERF_MAX_FRAMES], fr[PERF_MAX_FRAMES];
  uint32_t nk = 0, nufp = 0;
  uint64_t uips[PERF_MAX_FRAMES];
  int nuips = 0;
  uint64_t ctx = 0;
  bool uleaf = true, maps_ok = false, maps_tried = false;
  for (uint64_t i = 0; i < v.nchain; i++) {
    uint64_t ip = v.chain[i];
    if (ip >= (uint64_t)PERF_CONTEXT_MAX) {
      ctx = ip;
      continue;
    }
    if (ctx == (uint64_t)PERF_CONTEXT_KERNEL) {
      if (nk < PERF_MAX_FRAMES) kframes[nk++] = perf_sym_kernel(st, ip); /* as perf: no -1 */
    } else if (ctx == (uint64_t)PERF_CONTEXT_USER) {
      if (!maps_tried) {
        maps_ok = perf_proc_need_maps(st, p) == 0;
        maps_tried = true;
      }
      if (nufp < PERF_MAX_FRAMES)
        ufp[nufp++] = maps_ok ? perf_sym_user(st, p, ip, uleaf) : PERF_FRAME_ID_UNKNOWN;
      uleaf = false;
    }
  }
  if (st->mode != PERF_MODE_DWARF) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < nk && n < PERF_MAX_FRAMES; i++)
      fr[n++] = kframes[i];
    for (uint32_t i = 0; i < nufp && n < PERF_MAX_FRAMES; i++)
      fr[n++] = ufp[i];
    n = perf_sym_fold_jit(st, fr, n);
    if (n == 0) fr[n++] = PERF_FRAME_ID_UNKNOWN;
    perf_stacks_add(&st->fp, v.pid, comm, fr, n);
  }
  if (st->mode != PERF_MODE_FP) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < nk && n < PERF_MAX_FRAMES; i++)
      fr[n++] = kframes[i];
    if (v.abi && v.regs && v.stack_len && v.pid != 0) {
      if (!maps_tried) maps_ok = perf_proc_need_maps(st, p) == 0;
      if (maps_ok) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
        nuips = perf_unwind_user(st, p, v.regs, v.nregs, v.stack, v.stack_len, uips,
                                 (int)st->max_depth);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
        st->unwind_ns +=
            (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000ll + (t1.tv_nsec - t0.tv_nsec));
        for (int i = 0; i < nuips && n < PERF_MAX_FRAMES; i++)
          fr[n++] = perf_sym_user(st, p, uips[i], i == 0);
      }
    } else if (v.abi && v.regs && v.pid != 0 && n < PERF_MAX_FRAMES) {
      /* registers without a stack copy: the user leaf is still known */
      if (!maps_tried) maps_ok = perf_proc_need_maps(st, p) == 0;
      if (maps_ok) fr[n++] = perf_sym_user(st, p, user_ip(st, v.regs, v.nregs), true);
    }
    n = perf_sym_fold_jit(st, fr, n);
    if (n == 0) fr[n++] = PERF_FRAME_ID_UNKNOWN;
    perf_stacks_add(&st->dwarf, v.pid, comm, fr, n);
  }
}

/* Strings in records are NUL-terminated within the record; never trust it. */
static const char *rec_str(const uint8_t *rec, size_t off, size_t size, size_t trailer, char *buf,
                           size_t cap) {
  if (off + trailer >= size) return NULL;
  size_t avail = size - off - trailer;
  size_t n = strnlen((const char *)rec + off, avail);
  if (n >= cap) n = cap - 1;
  memcpy(buf, rec + off, n);
  buf[n] = '\0';
  return buf;
}

#define TRAILER 16 /* sample_id_all: pid/tid + time */

/* Task records with pid 0: the idle task never forks, execs or maps, so a
 * 0 is the kernel's name for a task outside the agent's pid namespace
 * (an agent run in a container or under unshare). Their mappings and names
 * must not pile up on pid 0, whose samples are kernel-only for us. */

static void on_record(void *arg, const struct perf_event_header *h, const uint8_t *rec) {
  struct perf_state *st = arg;
  size_t size = h->size;
  const size_t hs = sizeof(*h);
  switch (h->type) {
    case PERF_RECORD_SAMPLE:
      handle_sample(st, rec, size);
      break;
    case PERF_RECORD_MMAP2: {
      if (size < hs + 64 + TRAILER) break;
      uint32_t pt[2];
      uint64_t addr, len, pgoff, ino;
      uint32_t maj, min, prot;
      memcpy(pt, rec + hs, 8);
      memcpy(&addr, rec + hs + 8, 8);
      memcpy(&len, rec + hs + 16, 8);
      memcpy(&pgoff, rec + hs + 24, 8);
      memcpy(&maj, rec + hs + 32, 4);
      memcpy(&min, rec + hs + 36, 4);
      memcpy(&ino, rec + hs + 40, 8);
      memcpy(&prot, rec + hs + 56, 4);
      if (h->misc & PERF_RECORD_MISC_MMAP_BUILD_ID) maj = min = 0, ino = 0;
      char path[4096];
      if (!rec_str(rec, hs + 64, size, TRAILER, path, sizeof(path))) break;
      if (pt[0] == 0) break; /* task outside our pid namespace */
      perf_proc_on_mmap2(st, pt[0], addr, len, pgoff, maj, min, ino, prot, path);
      break;
    }
    case PERF_RECORD_COMM: {
      if (size < hs + 8 + TRAILER) break;
      uint32_t pt[2];
      memcpy(pt, rec + hs, 8);
      char comm[PERF_COMM_LEN];
      if (!rec_str(rec, hs + 8, size, TRAILER, comm, sizeof(comm))) break;
      if (pt[0] == 0) break; /* task outside our pid namespace */
      perf_proc_on_comm(st, pt[0], pt[1], comm, (h->misc & PERF_RECORD_MISC_COMM_EXEC) != 0);
      break;
    }
    case PERF_RECORD_FORK:
    case PERF_RECORD_EXIT: {
      if (size < hs + 16) break;
      uint32_t v[4]; /* pid, ppid, tid, ptid */
      memcpy(v, rec + hs, 16);
      if (v[0] == 0) break; /* task outside our pid namespace */
      if (h->type == PERF_RECORD_FORK) {
        perf_follow_fork(st, v[0], v[1]);
        perf_proc_on_fork(st, v[0], v[1], v[2], v[3]);
      } else {
        perf_follow_exit(st, v[0], v[2]);
        perf_proc_on_exit(st, v[0], v[2]);
      }
      break;
    }
    case PERF_RECORD_LOST: {
      if (size < hs + 16) break;
      uint64_t lost;
      memcpy(&lost, rec + hs + 8, 8);
      st->lost += lost;
      break;
    }
    case PERF_RECORD_LOST_SAMPLES: {
      if (size < hs + 8) break;
      uint64_t lost;
      memcpy(&lost, rec + hs, 8);
      st->lost += lost;
      break;
    }
    case PERF_RECORD_THROTTLE:
      st->throttled++;
      break;
    case PERF_RECORD_UNTHROTTLE:
      st->unthrottled++;
      break;
    default:
      break;
  }
}

void perf_drain(struct perf_state *st) {
  st->dsos.clock = ++st->tick;
  perf_events_drain(&st->ev, on_record, st);
  perf_procs_reap(st, false);
  perf_dsos_trim(&st->dsos);
}
