/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal interfaces of the ruby plugin. One concept per file:
 *   ruby.c             descriptor, options, vtable (init/start/add/snapshot/stop)
 *   ruby_attach.c      finding the VM in a process and choosing the layout; the
 *                      target table's attach and release callbacks
 *   ruby_sampler.c     the sampling thread: CPU alarms, ticks, housekeeping
 *   ruby_cpuclock.c    per-thread CPU-time alarms (perf task-clock events)
 *   ruby_threads.c     Ruby threads, their tids, and whether they are on CPU
 *   ruby_walk.c        control frames -> frame ids
 *   ruby_iseq.c        iseqs -> label, path, line of a pc (batched, cached)
 *   ruby_objects.c     RString / RArray / line table / C method names
 *   ruby_appid.c       appids of Ruby servers (puma, unicorn, sidekiq, rails)
 *   ruby_layout.c      per-version offsets (ruby_layout.h)
 *   ruby_frame_cache.c interned strings, distinct frames, frame caches
 * Stacks are counted in the kit's stack table and targets live in the kit's
 * target table (polyprof/kit.h).
 */
#ifndef POLYPROF_RUBY_H
#define POLYPROF_RUBY_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "polyprof/kit/stack_table.h"
#include "polyprof/kit/target_table.h"
#include "polyprof/kit/thread_cpu.h"
#include "polyprof/plugin.h"
#include "ruby_layout.h"

/* A word read out of a buffer copied from the target (unaligned-safe). */
static inline uint64_t ruby_rd64(const unsigned char *p) {
  uint64_t v;
  memcpy(&v, p, sizeof(v));
  return v;
}

/* Could this value point at a Ruby heap object or VM structure? A user
 * space address, 8-byte aligned: anything else read from the target is
 * not followed. */
static inline bool ruby_heap_ptr(uint64_t a) {
  return a >= 4096 && a < (1ull << 47) && (a & 7) == 0;
}

#define RUBY_MAX_THREADS_HARD 1024
#define RUBY_STR_MAX 1024    /* longest label or path we keep */
#define RUBY_PREFETCH_ENVS 4 /* C-frame envs read along with a thread's frames */

/* C methods as rbspy's gProfiler fork prints them: the whole text, no
 * `_[rb]` suffix, so they are native frames
 * whose name carries the text -- the form the core's .col test expects. */
#define RUBY_CFUNC_FMT "%s [c function] - (unknown):0"
#define RUBY_CFUNC_UNKNOWN "(unknown) [c function] - (unknown):0"

/* Hard limits on what the target may claim (rbspy uses the same bounds). */
#define RUBY_MAX_VM_STACK_WORDS 3000000u

/* ---- ruby_frame_cache.c: bounded tables, sized once at init from the
 * config; a full table drops (and counts) instead of allocating ---- */

#define RUBY_NO_ID UINT32_MAX

/* Interned strings, referenced by 32-bit ids (offsets into one arena). */
struct ruby_strings {
  char *arena;
  size_t arena_cap, arena_used;
  uint32_t *slots; /* hash -> offset+1 (0 = empty) */
  size_t nslots, used;
};

struct ruby_frame {
  uint32_t name, file; /* string ids; file RUBY_NO_ID if none */
  uint32_t line;
  uint32_t kind;
};

/* Distinct frames, deduplicated, referenced by index. */
struct ruby_frames {
  struct ruby_frame *v;
  size_t cap, n;
  uint32_t *slots; /* hash -> index+1 */
  size_t nslots;
};

/* (pid, key1, key2) -> frame id: iseq+pc for Ruby frames, method entry for
 * C frames, ID for C function names. Cleared wholesale when full: cheaper
 * than LRU bookkeeping on the hot path, and it refills in a few samples. */
struct ruby_cache_ent {
  uint64_t k1, k2;
  uint32_t pid, val; /* val RUBY_NO_ID = empty */
};
struct ruby_cache {
  struct ruby_cache_ent *v;
  size_t cap, used;
  uint64_t clears;
};

int ruby_strings_init(struct ruby_strings *s, size_t arena_bytes);
void ruby_strings_free(struct ruby_strings *s);
void ruby_strings_clear(struct ruby_strings *s);
/* Interns len bytes; RUBY_NO_ID if the arena is full. */
uint32_t ruby_strings_intern(struct ruby_strings *s, const char *str, size_t len);
const char *ruby_strings_get(const struct ruby_strings *s, uint32_t id);

int ruby_frames_init(struct ruby_frames *f, size_t cap);
void ruby_frames_free(struct ruby_frames *f);
void ruby_frames_clear(struct ruby_frames *f);
uint32_t ruby_frames_add(struct ruby_frames *f, const struct ruby_frame *fr);

int ruby_cache_init(struct ruby_cache *c, size_t cap);
void ruby_cache_free(struct ruby_cache *c);
void ruby_cache_clear(struct ruby_cache *c);
uint32_t ruby_cache_get(const struct ruby_cache *c, uint32_t pid, uint64_t k1, uint64_t k2);
void ruby_cache_put(struct ruby_cache *c, uint32_t pid, uint64_t k1, uint64_t k2, uint32_t val);
/* Forgets every entry of a pid (the process is gone or was reused). */
void ruby_cache_forget_pid(struct ruby_cache *c, uint32_t pid);

struct ruby_thread {
  uint64_t addr; /* rb_thread_t */
  uint32_t tid;  /* host tid (0: unknown) */
  int pfd;       /* CPU alarm (ruby_cpuclock.c), -1 if none */
  void *ring;    /* its mmapped ring */
  /* what the last sample saw, to read the next one in one system call */
  uint64_t ec, vm_stack, words; /* ec 0: nothing known */
  uint32_t depth;
  uint32_t nenv;
  uint64_t env[RUBY_PREFETCH_ENVS]; /* eps of frames without iseq (C methods) */
};

/* What the plugin holds for one attached process: the target table's
 * entry->data, freed by its release callback (ruby_target_release). */
struct ruby_target {
  struct pp_target_entry *entry; /* its entry in st->tt */
  uint32_t pid;
  uint32_t ns_pid;
  uint64_t start_time;
  char version[24];
  const struct ruby_layout *L;

  uint64_t vm_ptr_addr;    /* &ruby_current_vm_ptr */
  uint64_t vm;             /* rb_vm_t* */
  uint64_t ec_ptr_addr;    /* 2.x: &ruby_current_execution_context_ptr, 0 if none */
  uint64_t main_ractor;    /* 3.x */
  int running_ec_off;      /* 3.x: offset of threads.running_ec in the ractor */
  uint64_t global_symbols; /* rb_symbols_t*, 0: C functions are "(unknown)" */
  int pthread_tid_off;     /* tid's offset in libc's struct pthread (ruby_threads.c), -1 unknown */

  struct ruby_thread *threads; /* max_threads entries */
  struct pp_thread_cpu *cpu;   /* on-CPU state of its threads (kept-open /proc files) */
  uint32_t nthreads;
  bool per_thread;        /* thread list + tids usable; else the GVL holder */
  uint64_t threads_at_ns; /* last thread-list refresh */
  uint64_t threads_every; /* refresh interval: short while threads come and go */
  bool threads_changed;   /* the last refresh saw threads come or go */

  bool cpuclock;        /* every thread has a CPU alarm: no ticks for this target */
  bool cpuclock_failed; /* alarms could not be set up: ticks, said once */

  uint64_t cpu_ns; /* process CPU time at the last tick */
  uint64_t samples, torn, idle;
  bool meta_sent;
};

/* The line table of an iseq, decoded from its body once and kept with
 * the iseq (ruby_iseq.c), so a pc first seen costs the table reads only. */
struct ruby_lines {
  uint64_t encoded;    /* iseq_encoded: the iseq's pcs lie in [encoded, encoded + 8 * iseq_size] */
  uint64_t entries;    /* insns_info.body */
  uint64_t succ;       /* insns_info.succ_index_table (2.6+), 0 if none */
  uint32_t iseq_size;  /* words of encoded instructions */
  uint32_t nentries;   /* insns_info.size; 0: no usable table */
  uint32_t first_line; /* location.first_lineno: the line of a pc without one; 0 unknown */
};
/* What one iseq says (ruby_iseq.c), per (pid, iseq address). */
struct ruby_iseq_ent {
  uint64_t iseq;
  uint32_t pid;
  uint32_t name; /* frame id (line 0) of its label and path; RUBY_NO_ID: empty slot */
  struct ruby_lines lines;
};
struct ruby_iseqs {
  struct ruby_iseq_ent *v;
  size_t cap, used; /* cleared when 3/4 full */
};

/* A Ruby frame the frame cache did not know: its slot in st->ids. */
struct ruby_miss {
  uint64_t iseq, pc;
  uint32_t slot;
};

struct ruby_state {
  const struct pp_host *host;
  int64_t max_depth, max_threads, cache_size, max_stacks, attach_retries, wake_batch_ms;
  bool oncpu;
  bool offcpu; /* --mode offcpu: every thread on ticks, blocked ones as off-CPU time */
  bool cfunc_names;
  bool tids_from_pthread; /* thread_ids: pthread -- even where Ruby keeps a tid (tests) */

  struct pp_target_table *tt; /* between start() and stop(); entries' data: ruby_target */

  /* The sampling thread (ruby_sampler.c). `lock` guards everything in this
   * struct against the host's calls (add_targets, snapshot). */
  pthread_mutex_t lock;
  pthread_t thread;
  bool thread_started;
  int epfd;              /* CPU alarms + wakefd */
  int wakefd;            /* eventfd: new targets, stop */
  bool stopping;         /* under lock */
  bool use_cpuclock;     /* oncpu and perf task-clock events work here */
  uint64_t period_ns;    /* 1 / frequency: of CPU time (alarms) or wall time (ticks) */
  uint64_t batch_ns;     /* alarms served together after a sampling wake-up (<= period) */
  uint64_t alarms_total; /* overflows ever, for the rate below */
  uint64_t rate_since_ns, rate_alarms0;
  double alarm_rate;      /* overflows per second over the last window: whether batching pays */
  uint64_t next_tick_ns;  /* wall-clock ticks, only while a target needs them */
  uint64_t next_house_ns; /* attach retries, thread lists */

  struct ruby_strings strings;
  struct ruby_frames frames;
  struct ruby_cache iseq_cache;  /* (pid, iseq, pc) -> frame id */
  struct ruby_cache cfunc_cache; /* (pid, method entry, 0) / (pid, 0, ID) -> frame id */
  struct ruby_iseqs iseqs;       /* (pid, iseq) -> name frame, line table */
  struct pp_stack_table *stacks; /* this session's stacks */
  struct pp_frame *out;          /* max_depth frames of the stack being counted */

  /* scratch for one walk, sized from max_depth */
  unsigned char *cfp_buf;
  uint32_t *ids;
  uint64_t *eps;
  struct ruby_miss *misses;

  uint64_t now_ns;
  /* c_full: a frame table or cache was full (the stack table counts its
   * own drops as "dropped_stacks") */
  uint64_t c_ticks, c_samples, c_torn, c_full, c_truncated, c_idle, c_gone, c_str_fail;
  uint64_t c_wakeups, c_alarms; /* sampler wake-ups; CPU-alarm overflows (= weight) */
  uint64_t c_pauses;            /* batching pauses (ruby_sampler.c batch_pause) */
  uint64_t c_guess_hits;        /* samples read in one system call (ruby_walk_thread) */
  uint32_t unknown_cfunc_id;    /* "(unknown) [c function]" frame */
};

/* ruby_attach.c: the target table's callbacks (plugin: the ruby_state,
 * called with st->lock held). attach: 0 attached (e->data), -EAGAIN not
 * yet (retried with backoff), PP_ATTACH_SKIP unsupported, PP_ATTACH_IGNORE
 * no Ruby in a process not named ruby*, -ESRCH gone, PP_ATTACH_FAIL
 * otherwise; e->reason says why. release frees what ruby_attach built:
 * threads, their CPU alarms and kept-open /proc files, cache entries. */
int ruby_attach(void *plugin, struct pp_target_entry *e);
void ruby_target_release(void *plugin, struct pp_target_entry *e);

/* ruby_sampler.c: the thread that samples (started by start(), joined by
 * stop()). */
int ruby_sampler_start(struct ruby_state *st);
void ruby_sampler_stop(struct ruby_state *st);
void ruby_sampler_wake(struct ruby_state *st);
/* Gives every Ruby thread of an attached target a CPU alarm, or none
 * (caller holds st->lock). */
void ruby_sync_alarms(struct ruby_state *st, struct ruby_target *t);

/* ruby_cpuclock.c: a CPU-time alarm on one OS thread, every period_ns of
 * its CPU time; registered in epfd (if >= 0) with `key`. 0 or -errno. */
int ruby_cpuclock_open(struct ruby_thread *th, uint32_t tid, uint64_t period_ns, int epfd,
                       uint64_t key);
/* Closes the alarm (and takes it out of the epoll set). */
void ruby_cpuclock_close(struct ruby_thread *th);
/* Overflows since the previous call (consumes them). */
uint64_t ruby_cpuclock_drain(struct ruby_thread *th);
/* 0 if alarms work in this process (tried on the calling thread). */
int ruby_cpuclock_probe(uint64_t period_ns);

/* ruby_threads.c */
/* Whether the thread list can be mapped to tids in this target. */
bool ruby_tids_known(const struct ruby_state *st, const struct ruby_target *t);
/* Finds where libc's struct pthread keeps the tid, from the main thread
 * (whose tid is the pid), for layouts that read tids there. */
void ruby_find_pthread_tid(struct ruby_state *st, struct ruby_target *t);
/* Re-reads the thread list; keeps the alarms of threads still there,
 * closes those of threads gone. */
int ruby_threads_refresh(struct ruby_state *st, struct ruby_target *t);
void ruby_threads_close(struct ruby_state *st, struct ruby_target *t);
/* True if any task of the process is running (state R), through the
 * target's kept-open task files. */
bool ruby_any_task_running(struct ruby_target *t);

/* ruby_walk.c: frame ids of the stack of one execution context, leaf
 * first, into st->ids. Returns the count, or -errno for a torn read. */
int ruby_walk(struct ruby_state *st, struct ruby_target *t, uint64_t ec, bool *truncated);
/* The same for a Ruby thread (its current EC), in one read when the last
 * sample of the thread predicts where things are. -ENOENT: no EC. */
int ruby_walk_thread(struct ruby_state *st, struct ruby_target *t, struct ruby_thread *th,
                     bool *truncated);
/* dump(): every thread of every attached target, once (ruby_sampler.c);
 * st->lock held. */
int ruby_dump_locked(struct ruby_state *st, struct pp_sink *sink);

/* ruby_iseq.c */
int ruby_iseqs_init(struct ruby_iseqs *c, size_t cap);
void ruby_iseqs_free(struct ruby_iseqs *c);
void ruby_iseqs_clear(struct ruby_iseqs *c);
void ruby_iseqs_forget_pid(struct ruby_iseqs *c, uint32_t pid);
/* Frame ids of the n missed Ruby frames into st->ids[slot] (RUBY_NO_ID:
 * unreadable), a few batched reads for all of them. 0 or -ESRCH. */
int ruby_iseq_resolve(struct ruby_state *st, struct ruby_target *t, const struct ruby_miss *m,
                      uint32_t n);

/* ruby_objects.c */
/* Bytes of a String object (bounded, NUL-terminated, control chars
 * replaced). Length or -errno. */
int ruby_read_string(const struct ruby_target *t, uint64_t value, char *buf, size_t cap);
/* Element i of an Array object into *out. */
int ruby_array_at(const struct ruby_target *t, uint64_t value, uint64_t i, uint64_t *out);
/* Fills *out from a body read into `body` (`body_len` bytes, at least up
 * to first_lineno + 8). False if it holds no usable line table (nentries
 * 0; first_line may still be set). */
bool ruby_lines_parse(const struct ruby_target *t, const unsigned char *body, size_t body_len,
                      struct ruby_lines *out);
/* Whether pc points into this iseq's instructions (a cheap check that an
 * iseq address still holds the iseq the table was read from). */
bool ruby_lines_has(const struct ruby_lines *ln, uint64_t pc);
/* Instruction position of pc, or -1 if pc is not in the iseq. */
int64_t ruby_lines_pos(const struct ruby_lines *ln, uint64_t pc);
/* Succinct tables (2.6+), the two reads of a lookup, so a caller can batch
 * them over many pcs: the bytes holding pos's entry index (*len 0: none
 * needed, or no table) ... */
void ruby_lines_succ_read(const struct ruby_lines *ln, uint64_t pos, uint64_t *addr, uint32_t *len);
/* ... the 1-based entry index out of them (0: invalid) ... */
uint64_t ruby_lines_succ_index(const struct ruby_lines *ln, uint64_t pos, const unsigned char *buf,
                               uint32_t len);
/* ... and the address of that entry's int32 line number (0: out of range). */
uint64_t ruby_lines_entry_line(const struct ruby_target *t, const struct ruby_lines *ln,
                               uint64_t idx);
/* The whole lookup with its reads one after the other (both table kinds).
 * 0 if unknown. */
uint32_t ruby_lines_lookup(const struct ruby_target *t, const struct ruby_lines *ln, uint64_t pc);
/* Line of a pc in an iseq body (already read into `body`, `body_len`
 * bytes). 0 if unknown. */
uint32_t ruby_line_of(const struct ruby_target *t, const unsigned char *body, size_t body_len,
                      uint64_t pc);
/* Name of a method ID via the global symbol table. Length or -errno. */
int ruby_id_name(const struct ruby_target *t, uint64_t id, char *buf, size_t cap);

/* ruby_appid.c: an appid for a Ruby server process from its argv (NUL
 * separated) and cwd, or 0 (none: the core's script rule applies). */
int ruby_server_appid(const char *argv, size_t argv_len, const char *cwd, char *out, size_t cap);

#endif
