/* SPDX-License-Identifier: Apache-2.0 */
/*
 * python.native (cpu mode): native frames below, between and above the
 * interpreter's frames, as gProfiler's PyPerf shows them.
 *
 *   native_events.c  a perf cpu-clock event per thread of each target, with
 *                    the user registers and a copy of the user stack in
 *                    each sample; one ring per thread
 *   native_objects.c a target's executable mappings and the objects behind
 *                    them (ELF facts, unwind tables, symbols; bounded LRU)
 *   native.c         each sample: the stack copy unwound, the thread's
 *                    Python stack read at once, and the two merged
 */
#ifndef POLYPROF_PYTHON_NATIVE_H
#define POLYPROF_PYTHON_NATIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "polyprof/kit/elf_symbols.h"
#include "polyprof/kit/maps.h"
#include "polyprof/kit/unwind.h"
#include "python.h"

#define PYN_STACK_COPY 16384u       /* bytes of user stack the kernel copies per sample */
#define PYN_RING_PAGES 32u          /* data pages of each thread's ring (a power of 2) */
#define PYN_THREADS 64u             /* threads with an event, per target */
#define PYN_TARGETS 64u             /* targets with events at once */
#define PYN_OBJECTS 64u             /* objects with tables and symbols, all targets */
#define PYN_MAX_NATIVE 128          /* native frames unwound per sample */
#define PYN_MAX_KERNEL 64           /* kernel frames kept per sample */
#define PYN_NAME_MAX 128            /* bytes of a native frame's name */
#define PYN_READ_MIN_NS 1000000ull  /* rings read every tenth of a sampling interval, */
#define PYN_READ_MAX_NS 10000000ull /* within these bounds */
#define PYN_STALE_NS 20000000ull    /* a sample read later than this: no interleaving */
#define PYN_IP_SLACK 64             /* bytes between a saved instruction pointer and the one read */
#define PYN_RESCAN_NS 1000000000ull /* a target's thread list is read again this often */

/* ---- native_events.c ---- */

struct pyn_thread {
  uint32_t tid;
  int fd;
  uint8_t *ring; /* 1 + PYN_RING_PAGES pages */
  bool seen;     /* found by the last rescan */
};

/* Opens a sampling event on thread tid of pid at period_ns; 0 or -errno. */
int pyn_thread_open(struct pyn_thread *t, uint32_t tid, uint64_t period_ns);
void pyn_thread_close(struct pyn_thread *t);

/* One sample read from a ring (pointers into a scratch buffer, valid until
 * the next record). */
struct pyn_sample {
  uint32_t pid, tid;
  uint64_t time;
  uint64_t kips[PYN_MAX_KERNEL]; /* kernel callchain, innermost first */
  uint32_t nkips;
  uint64_t regs[PP_UNWIND_NREGS];
  bool have_regs;
  const uint8_t *stack;
  uint64_t stack_len;
};
typedef void (*pyn_sample_fn)(void *ctx, const struct pyn_sample *s);
/* Hands each sample of the ring to fn; returns records lost (the kernel's
 * count) and counts malformed records in *bad. */
uint64_t pyn_thread_drain(struct pyn_thread *t, uint8_t *scratch, size_t scratch_len,
                          pyn_sample_fn fn, void *ctx, uint64_t *bad);

/* ---- native_objects.c ---- */

struct pyn_objects; /* the object cache, all targets */
struct pyn_objects *pyn_objects_new(void);
void pyn_objects_free(struct pyn_objects *c);
size_t pyn_objects_bytes(const struct pyn_objects *c);

/* One target's executable mappings (re-read on a miss, at most every
 * 100 ms) and its unwinder. */
struct pyn_maps {
  uint32_t pid;
  struct pp_map *maps;
  size_t n;
  uint64_t read_ns;
  /* the target's own unwinder, caching per address (flushed when the
   * maps are read again) */
  struct pp_unwinder *unw;
};
void pyn_maps_clear(struct pyn_maps *m);

/* What an address is. */
struct pyn_where {
  const struct pp_map *map; /* NULL: in no executable mapping */
  struct pyn_object *obj;   /* NULL: its file has no usable ELF */
  uint64_t vaddr;           /* ELF virtual address inside obj */
};
int pyn_locate(struct pyn_objects *c, struct pyn_maps *m, uint64_t ip, uint64_t now_ns,
               struct pyn_where *w);
/* The unwinder's callback; arg: struct pyn_unwind_arg. */
struct pyn_unwind_arg {
  struct pyn_objects *c;
  struct pyn_maps *m;
  uint64_t now_ns;
};
int pyn_find_object(void *arg, uint64_t ip, struct pp_unwind_object *out);
/* Name of the function at w (into buf), or "(path)" of its mapping, or
 * "[unknown]". */
const char *pyn_name(const struct pyn_where *w, char *buf, size_t cap);
/* Is w inside the interpreter's eval loop (_PyEval_EvalFrameDefault, 2.7's
 * PyEval_EvalFrameEx, and their .cold parts)? */
bool pyn_is_eval(const struct pyn_where *w);

/* ---- native.c (the plugin's hooks) ---- */

struct py_native *python_native_new(const struct pp_host *host, uint32_t max_depth);
void python_native_free(struct py_native *n);
/* plain_tick_ns: the tick interval to go back to when the kernel refuses
 * the events (session kept until stop()). */
void python_native_start(struct py_native *n, uint64_t frequency_hz, struct pp_session *session,
                         uint64_t plain_tick_ns);
/* The kernel refused the events: sample the plain way. */
bool python_native_refused(const struct py_native *n);
/* Reads every sample taken since the last tick, for every attached target
 * (events opened for new targets and threads, closed for gone ones). */
void python_native_tick(struct py_state *st, uint64_t now);
/* Counters of the session into the snapshot, then reset. */
void python_native_report(struct py_native *n, struct pp_sink *sink);

/* sampler.c: the host tid of a thread of target t seen as ns_tid inside
 * its pid namespace (0: unknown). */
uint32_t python_host_tid(struct py_state *st, struct pp_target_entry *t, uint32_t ns_tid);

#endif
