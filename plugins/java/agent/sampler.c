/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sampling half of the agent: the SIGPROF handler and the lock-free
 * store it writes into.
 *
 * Everything the handler touches is preallocated at init. It identifies the
 * interrupted thread with pthread_getspecific on HotSpot's own thread key and
 * a registry of JavaThread pointers we learnt from ThreadStart and
 * GetAllThreads, derives that thread's JNIEnv from a fixed offset, and calls
 * AsyncGetCallTrace. It never calls GetEnv: on a thread that has not touched
 * libjvm's dynamic TLS yet, GetEnv may go through __tls_get_addr and malloc,
 * and a signal landing inside malloc would deadlock.
 *
 * The store has two halves. Handlers write into the active half (counting
 * themselves in and out); the dump flips the active index, waits until no
 * handler is still inside the old half, reads it and clears it. Within a half
 * a stack is an open-addressing slot claimed by CAS on its 64-bit hash; its
 * frames are bump-allocated from the half's frame pool. Full table or pool:
 * the sample is dropped and counted.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "agent.h"

typedef struct {
  jint lineno; /* bci; -3 for a native method */
  jmethodID method_id;
} asgct_frame;

typedef struct {
  JNIEnv *env_id;
  jint num_frames;
  asgct_frame *frames;
} asgct_trace;

typedef void (*asgct_fn)(asgct_trace *, jint, void *);

struct slot {
  _Atomic uint64_t hash; /* 0: free */
  uint32_t offcpu;       /* an off-CPU stack: its count is microseconds */
  _Atomic uint64_t count;
  _Atomic uint32_t ready; /* frames written */
  uint32_t nframes;
  uint32_t frame_off;
  pid_t tid;
  void *thread;
};

struct half {
  struct slot *slots;
  uintptr_t *methods;
  uint8_t *types;
  _Atomic size_t frames_used;
  _Atomic int inflight;
  _Atomic uint64_t samples, dropped, no_thread;
};

static struct half halves[2];
static _Atomic int active_half;
static _Atomic int armed;
static _Atomic uint64_t deadline;
static _Atomic uint32_t weight = 1;
static _Atomic int wall;
static _Atomic int offcpu;             /* --mode offcpu: blocked threads' stacks apart */
static _Atomic uint64_t offcpu_us = 0; /* what a blocked thread's sample weighs */
static size_t slot_mask, frame_cap;
static int max_depth;
static asgct_fn asgct;
static pthread_key_t thread_key;
static ptrdiff_t env_off;

/* Registry of live JavaThread pointers, open addressing. Readers are the
 * handlers; writers (ThreadStart/End, attach) serialise on the agent lock. */
#define REG_SIZE 16384
#define REG_TOMB ((uintptr_t)1)
static _Atomic uintptr_t registry[REG_SIZE];

static size_t reg_hash(uintptr_t p) {
  return (size_t)((p >> 4) * 0x9E3779B97F4A7C15ull >> 32) & (REG_SIZE - 1);
}

void ja_thread_add(void *t) {
  uintptr_t p = (uintptr_t)t;
  if (p <= REG_TOMB) return;
  size_t h = reg_hash(p), tomb = (size_t)-1;
  for (size_t i = 0; i < REG_SIZE; i++) {
    size_t k = (h + i) & (REG_SIZE - 1);
    uintptr_t v = atomic_load(&registry[k]);
    if (v == p) return;
    if (v == REG_TOMB && tomb == (size_t)-1) tomb = k;
    if (v == 0) {
      atomic_store(&registry[tomb != (size_t)-1 ? tomb : k], p);
      return;
    }
  }
  if (tomb != (size_t)-1) atomic_store(&registry[tomb], p);
}

void ja_thread_remove(void *t) {
  uintptr_t p = (uintptr_t)t;
  size_t h = reg_hash(p);
  for (size_t i = 0; i < REG_SIZE; i++) {
    size_t k = (h + i) & (REG_SIZE - 1);
    uintptr_t v = atomic_load(&registry[k]);
    if (v == 0) return;
    if (v == p) {
      atomic_store(&registry[k], REG_TOMB);
      return;
    }
  }
}

static int thread_known(uintptr_t p) {
  size_t h = reg_hash(p);
  for (size_t i = 0; i < 64; i++) { /* short probe: a miss only costs a sample */
    uintptr_t v = atomic_load_explicit(&registry[(h + i) & (REG_SIZE - 1)], memory_order_acquire);
    if (v == p) return 1;
    if (v == 0) return 0;
  }
  return 0;
}

int ja_sampler_init(const struct ja_sampler_config *cfg, void *fn, pthread_key_t key,
                    ptrdiff_t offset) {
  size_t n = 16;
  while (n < cfg->table_entries)
    n *= 2;
  for (int i = 0; i < 2; i++) {
    halves[i].slots = calloc(n, sizeof(struct slot));
    halves[i].methods = calloc(cfg->frame_capacity, sizeof(uintptr_t));
    halves[i].types = calloc(cfg->frame_capacity, 1);
    if (!halves[i].slots || !halves[i].methods || !halves[i].types) return -ENOMEM;
  }
  slot_mask = n - 1;
  frame_cap = cfg->frame_capacity;
  max_depth = cfg->depth > JA_MAX_DEPTH ? JA_MAX_DEPTH : cfg->depth;
  asgct = (asgct_fn)fn;
  thread_key = key;
  env_off = offset;
  return 0;
}

void ja_sampler_set_armed(int a) {
  atomic_store(&armed, a);
}

int ja_sampler_armed(void) {
  uint64_t d = atomic_load(&deadline);
  return atomic_load(&armed) && !(d && ja_now_ns() > d);
}

void ja_sampler_set_weight(uint32_t w) {
  atomic_store(&weight, w ? w : 1);
}

void ja_sampler_set_wall(int w) {
  atomic_store(&wall, w);
}

void ja_sampler_set_offcpu(int on, uint64_t interval_ns) {
  atomic_store(&offcpu_us, interval_ns / 1000 ? interval_ns / 1000 : 1);
  atomic_store(&offcpu, on);
}

/* Was the thread the signal interrupted waiting in a system call? The
 * kernel delivers a signal to a thread blocked in one either to restart
 * the call (the instruction pointer moved back onto the system call
 * instruction) or to return EINTR (just after it, the return register
 * -EINTR). A running thread is almost never found exactly there. Only
 * bytes of the instruction at ip, or of ip's own page before it, are
 * read: mapped, since the thread executes there. */
static int blocked_in_syscall(void *ucontext) {
  ucontext_t *uc = ucontext;
#if defined(__x86_64__)
  const unsigned char *ip = (const unsigned char *)uc->uc_mcontext.gregs[REG_RIP];
  long ret = (long)uc->uc_mcontext.gregs[REG_RAX];
  if (!ip) return 0;
  if (ip[0] == 0x0f && ip[1] == 0x05) return 1; /* syscall, to be restarted */
  return ret == -EINTR && ((uintptr_t)ip & 4095) >= 2 && ip[-2] == 0x0f && ip[-1] == 0x05;
#elif defined(__aarch64__)
  const uint32_t *pc = (const uint32_t *)uc->uc_mcontext.pc;
  long ret = (long)uc->uc_mcontext.regs[0];
  if (!pc || ((uintptr_t)pc & 3)) return 0;
  if (pc[0] == 0xd4000001u) return 1; /* svc #0, to be restarted */
  return ret == -EINTR && ((uintptr_t)pc & 4095) >= 4 && pc[-1] == 0xd4000001u;
#else
  (void)uc;
  return 0;
#endif
}

void ja_sampler_set_deadline(uint64_t d) {
  atomic_store(&deadline, d);
}

uint64_t ja_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO, async-signal-safe */
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uintptr_t context_pc(void *ucontext) {
  ucontext_t *uc = ucontext;
#if defined(__x86_64__)
  return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
  return (uintptr_t)uc->uc_mcontext.pc;
#else
  (void)uc;
  return 0;
#endif
}

/* AsyncGetCallTrace's codes for a thread in Java code whose top frame it
 * could not read (ticks_unknown_Java, ticks_not_walkable_Java) */
#define ASGCT_UNKNOWN_JAVA (-5)
#define ASGCT_NOT_WALKABLE_JAVA (-6)

/* AsyncGetCallTrace gives up on a thread stopped where its top frame is not
 * built yet (a compiled method's entry before it pushed its frame, a call
 * stub): javac, whose JIT is busy, lost a tenth of its samples so. The
 * return address is then the word at sp: the walk is retried from the
 * caller, as async-profiler does, and the method whose code holds the pc
 * (from the code cache map) is put back on top. Reading [sp] is safe: the
 * kernel built the signal frame just below it on the same stack. The
 * context is the thread's own and is restored before returning. */
static void retry_from_caller(asgct_trace *trace, jint depth, void *ucontext) {
#if defined(__x86_64__)
  ucontext_t *uc = ucontext;
  greg_t pc = uc->uc_mcontext.gregs[REG_RIP], sp = uc->uc_mcontext.gregs[REG_RSP];
  if (!sp || (sp & 7)) return;
  jint code = trace->num_frames;
  uc->uc_mcontext.gregs[REG_RIP] = (greg_t) * (const uintptr_t *)(uintptr_t)sp;
  uc->uc_mcontext.gregs[REG_RSP] = sp + 8;
  asgct(trace, depth, ucontext);
  uc->uc_mcontext.gregs[REG_RIP] = pc;
  uc->uc_mcontext.gregs[REG_RSP] = sp;
  if (trace->num_frames <= 0) {
    trace->num_frames = code;
    return;
  }
  jmethodID root = NULL;
  int level = 0;
  if (ja_codecache_lookup((uintptr_t)pc, &root, &level) != 1 || !root ||
      trace->frames[0].method_id == root)
    return;
  jint n = trace->num_frames < depth ? trace->num_frames : depth - 1;
  memmove(trace->frames + 1, trace->frames, (size_t)n * sizeof(trace->frames[0]));
  trace->frames[0] = (asgct_frame){.lineno = 0, .method_id = root};
  trace->num_frames = n + 1;
#else
  (void)trace;
  (void)depth;
  (void)ucontext;
#endif
}

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

/* Stores one stack (async-signal-safe). */
static void store(pid_t tid, void *thread, const uintptr_t *methods, const uint8_t *types,
                  uint32_t n, uint32_t is_off) {
  int hi = atomic_load(&active_half);
  struct half *h = &halves[hi];
  atomic_fetch_add(&h->inflight, 1);
  if (atomic_load(&active_half) != hi) { /* the dump flipped meanwhile */
    atomic_fetch_sub(&h->inflight, 1);
    hi = atomic_load(&active_half);
    h = &halves[hi];
    atomic_fetch_add(&h->inflight, 1);
  }
  uint64_t hash = mix(0x51ed270b27b0full + is_off, (uint64_t)tid);
  for (uint32_t i = 0; i < n; i++)
    hash = mix(mix(hash, methods[i]), types[i]);
  if (hash == 0) hash = 1;
  uint64_t w = atomic_load_explicit(&weight, memory_order_relaxed);
  if (is_off) w *= atomic_load_explicit(&offcpu_us, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->samples, 1, memory_order_relaxed);
  for (size_t probe = 0; probe < 32; probe++) {
    struct slot *s = &h->slots[(hash + probe) & slot_mask];
    uint64_t cur = atomic_load(&s->hash);
    if (cur == 0) {
      uint64_t zero = 0;
      if (atomic_compare_exchange_strong(&s->hash, &zero, hash)) {
        size_t off = atomic_fetch_add(&h->frames_used, n);
        if (off + n > frame_cap) {
          s->nframes = 0; /* pool full: keep the slot, count it as dropped */
          atomic_fetch_add(&h->dropped, 1);
        } else {
          memcpy(&h->methods[off], methods, n * sizeof(uintptr_t));
          memcpy(&h->types[off], types, n);
          s->frame_off = (uint32_t)off;
          s->nframes = n;
          s->tid = tid;
          s->thread = thread;
          s->offcpu = is_off;
          atomic_fetch_add(&s->count, w);
        }
        atomic_store_explicit(&s->ready, 1, memory_order_release);
        goto out;
      }
      cur = zero;
    }
    if (cur == hash) {
      atomic_fetch_add(&s->count, w);
      goto out;
    }
  }
  atomic_fetch_add(&h->dropped, 1);
out:
  atomic_fetch_sub(&h->inflight, 1);
}

static void on_sigprof(int sig, siginfo_t *info, void *ucontext) {
  (void)sig;
  (void)info;
  int saved_errno = errno;
  pid_t tid = (pid_t)syscall(SYS_gettid);
  uint64_t d = atomic_load_explicit(&deadline, memory_order_relaxed);
  if (d && ja_now_ns() > d) {
    /* nobody collected for too long: the profiler is gone. Every thread
     * whose timer still fires deletes it. */
    atomic_store(&armed, 0);
    ja_timer_delete_self(tid);
    errno = saved_errno;
    return;
  }
  if (!atomic_load_explicit(&armed, memory_order_relaxed)) {
    errno = saved_errno;
    return;
  }
  uintptr_t methods[JA_MAX_DEPTH];
  uint8_t types[JA_MAX_DEPTH];
  void *thread = pthread_getspecific(thread_key);
  if (!thread || !thread_known((uintptr_t)thread)) {
    if (atomic_load_explicit(&wall, memory_order_relaxed) ||
        atomic_load_explicit(&offcpu, memory_order_relaxed)) {
      /* on wall-clock timers: waiting is all GC and compiler threads do,
       * nothing to show for it but an error frame */
      ja_timer_not_java(tid);
      errno = saved_errno;
      return;
    }
    /* a JVM-internal thread (GC, compiler, VM): CPU time without Java frames */
    int hi = atomic_load(&active_half);
    atomic_fetch_add_explicit(&halves[hi].no_thread, 1, memory_order_relaxed);
    methods[0] = 0;
    types[0] = JA_T_ERROR;
    store(tid, NULL, methods, types, 1, 0);
    errno = saved_errno;
    return;
  }
  asgct_frame frames[JA_MAX_DEPTH];
  asgct_trace trace = {.env_id = (JNIEnv *)((char *)thread + env_off), .frames = frames};
  asgct(&trace, max_depth, ucontext);
  if (trace.num_frames == ASGCT_UNKNOWN_JAVA || trace.num_frames == ASGCT_NOT_WALKABLE_JAVA)
    retry_from_caller(&trace, max_depth, ucontext);
  uint32_t n = 0;
  if (trace.num_frames <= 0) {
    methods[0] = (uintptr_t)(intptr_t)trace.num_frames;
    types[0] = JA_T_ERROR;
    n = 1;
  } else {
    n = (uint32_t)trace.num_frames;
    if (n > (uint32_t)max_depth) n = (uint32_t)max_depth;
    for (uint32_t i = 0; i < n; i++) {
      methods[i] = (uintptr_t)frames[i].method_id;
      types[i] = frames[i].lineno == -3 ? JA_T_NATIVE : JA_T_UNKNOWN;
    }
    /* Only the leaf's code is known from the pc; the callers are typed at
     * dump time from their methods' compile state. */
    if (types[0] != JA_T_NATIVE) {
      jmethodID root = NULL;
      int level = 0;
      int where = ja_codecache_lookup(context_pc(ucontext), &root, &level);
      if (where == 2) {
        types[0] = JA_T_INTERP;
      } else if (where == 1) {
        uint32_t k = 0;
        while (k < n && methods[k] != (uintptr_t)root)
          k++;
        if (k == n) k = 0; /* root not on the stack: classify the leaf only */
        for (uint32_t i = 0; i < k; i++)
          types[i] = JA_T_INLINED;
        types[k] = level >= 1 && level <= 3 ? JA_T_C1 : JA_T_JIT;
      }
    }
  }
  /* --mode offcpu: a blocked thread's sample is off-CPU time, and a
   * plain (cpu) sample only in wall mode, where every thread makes one */
  int off = atomic_load_explicit(&offcpu, memory_order_relaxed) && blocked_in_syscall(ucontext);
  if (!off || atomic_load_explicit(&wall, memory_order_relaxed))
    store(tid, thread, methods, types, n, 0);
  if (off) store(tid, thread, methods, types, n, 1);
  errno = saved_errno;
}

int ja_sampler_install_handler(char *err, size_t errlen) {
  struct sigaction old;
  if (sigaction(SIGPROF, NULL, &old) != 0) {
    snprintf(err, errlen, "sigaction: %s", strerror(errno));
    return -1;
  }
  if ((old.sa_flags & SA_SIGINFO) && old.sa_sigaction == on_sigprof) return 0;
  if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN) {
    /* someone else (another profiler, the application) owns SIGPROF */
    snprintf(err, errlen, "SIGPROF already has a handler in this JVM");
    return -1;
  }
  if ((old.sa_flags & SA_SIGINFO) && old.sa_sigaction) {
    snprintf(err, errlen, "SIGPROF already has a handler in this JVM");
    return -1;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_sigprof;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGPROF, &sa, NULL) != 0) {
    snprintf(err, errlen, "sigaction: %s", strerror(errno));
    return -1;
  }
  return 0;
}

void ja_sampler_drain(void (*fn)(const struct ja_trace_view *, void *), void *arg,
                      struct ja_sampler_stats *stats) {
  int old = atomic_load(&active_half);
  atomic_store(&active_half, 1 - old);
  struct half *h = &halves[old];
  /* handlers are short: wait (bounded) for the ones still in the old half */
  for (int i = 0; i < 2000 && atomic_load(&h->inflight) > 0; i++) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  if (atomic_load(&h->inflight) > 0) {
    /* practically impossible; rather lose this round than read torn slots */
    stats->dropped += atomic_load(&h->samples);
    return;
  }
  for (size_t i = 0; i <= slot_mask; i++) {
    struct slot *s = &h->slots[i];
    if (atomic_load(&s->hash) == 0) continue;
    uint64_t c = atomic_load(&s->count);
    if (atomic_load_explicit(&s->ready, memory_order_acquire) && s->nframes && c) {
      struct ja_trace_view v = {.count = c,
                                .offcpu = s->offcpu,
                                .tid = s->tid,
                                .thread = s->thread,
                                .nframes = s->nframes,
                                .methods = &h->methods[s->frame_off],
                                .types = &h->types[s->frame_off]};
      fn(&v, arg);
    }
  }
  stats->samples += atomic_exchange(&h->samples, 0);
  stats->dropped += atomic_exchange(&h->dropped, 0);
  stats->no_thread += atomic_exchange(&h->no_thread, 0);
  memset(h->slots, 0, (slot_mask + 1) * sizeof(struct slot));
  atomic_store(&h->frames_used, 0);
}
