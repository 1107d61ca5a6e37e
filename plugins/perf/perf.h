/* SPDX-License-Identifier: Apache-2.0 */
/*
 * polyprof perf plugin: shared declarations of its parts.
 *
 *   perf.c       descriptor, options, vtable (init, start, tick, snapshot)
 *   records.c    the rings' records: samples into stacks per mode,
 *                MMAP2/COMM/FORK/EXIT into procs, lost/throttle counters
 *   events.c     perf_event_open per CPU, mmap ring buffers, time-ordered drain
 *   events_task.c the same per thread of given pids (rootless mode)
 *   procs.c      processes, threads and their executable mappings (from
 *                /proc and COMM/MMAP2/FORK/EXIT records)
 *   dso.c        mapped objects: ELF facts, symbol tables, unwind tables,
 *                opened through the kit's safe access to a process's files
 *                (identity-checked); LRU bounded by bytes
 *   symbolize.c  address -> frame id (kernel, ELF, JIT perf map and jitdump
 *                read through the kit) and the session's frame table
 *   unwind.c     DWARF unwinding of user stack copies: the kit's unwinder
 *                (polyprof/kit/unwind.h, libunwind's remote API) told
 *                which object, bias and tables hold an address
 *   stacks.c     per-session stacks of frame ids, smart-mode choice, emit
 *   offcpu.c     off-CPU profile: switch-out stacks weighted by blocked time
 *   alloc.c      native allocation profile: uprobes on the allocator of
 *                the given pids, sampled, weighted by bytes
 *   alloc_probes.c the allocator libraries a process maps, their functions
 *   dump.c       dump(): every thread's native stack now, blocked ones included
 *   follow.c     the pids sampled: the ones given, and the processes they start
 *   idmap.h      the integer-keyed hash map of processes, threads, objects
 */
#ifndef PERF_PLUGIN_H
#define PERF_PLUGIN_H

#include <linux/perf_event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "idmap.h"
#include "polyprof/kit/elf_symbols.h"
#include "polyprof/kit/jitdump.h"
#include "polyprof/kit/kallsyms.h"
#include "polyprof/kit/log.h"
#include "polyprof/kit/perfmap.h"
#include "polyprof/plugin.h"

#define PERF_MAX_FRAMES 256 /* frames kept per stack (kernel + user) */
#define PERF_COMM_LEN 16

enum perf_mode { PERF_MODE_FP = 0, PERF_MODE_DWARF = 1, PERF_MODE_SMART = 2 };

/* ---------------- events.c ---------------- */

struct perf_ring {
  int fd;
  int cpu;
  uint8_t *base; /* mmap: control page + data */
  uint8_t *data;
  uint64_t size; /* data bytes, power of two */
  uint64_t head, tail;
  uint64_t next_time; /* timestamp of the record at tail, valid if has_next */
  int has_next;
};

struct perf_events_config {
  const char *event; /* NULL/"": cpu-clock */
  uint32_t frequency;
  uint64_t period;     /* > 0: sample every `period` events instead */
  int user_callchain;  /* kernel collects user frames by frame pointers */
  int regs_and_stack;  /* copy user registers + stack for DWARF */
  uint32_t stack_size; /* bytes of user stack per sample */
  int exclude_kernel;
  uint32_t data_pages; /* per CPU, power of two */
  uint16_t max_stack;  /* sample_max_stack */
  /* Per-task mode (rootless): sample only these processes' threads, with
   * one event per (thread, CPU) feeding the CPU's ring, instead of
   * system-wide per-CPU events. Threads they start later are inherited. */
  const uint32_t *pids;
  size_t npids;
};

struct perf_events {
  struct perf_ring *rings;
  int nrings;
  uint64_t sample_type;
  uint64_t regs_mask;
  uint8_t *scratch;   /* 64 KiB: a record that wraps around the ring end */
  uint64_t malformed; /* records refused by bounds checks */
  char event_name[64];
  /* per-task mode: the events beyond each ring's own, redirected into it */
  int *task_fds;
  size_t ntask_fds;
  bool per_task;
  bool kernel_refused; /* kernel frames were asked but the kernel allows user space only */
};

typedef void (*perf_record_fn)(void *arg, const struct perf_event_header *h, const uint8_t *rec);

/* Opens one event per online CPU. On failure err says what to change. */
int perf_events_open(struct perf_events *ev, const struct perf_events_config *cfg, char *err,
                     size_t errlen);
/* Same for the threads of cfg->pids only (cfg->npids > 0): what an
 * unprivileged user may open under kernel.perf_event_paranoid <= 2. If the
 * kernel refuses kernel-space sampling, retries user space only and sets
 * ev->kernel_refused. */
int perf_events_open_tasks(struct perf_events *ev, const struct perf_events_config *cfg, char *err,
                           size_t errlen);
/* Shared by the two openers (events.c, events_task.c). */
int perf_sys_event_open(struct perf_event_attr *a, pid_t pid, int cpu, int group,
                        unsigned long flags);
int perf_online_cpus(int *cpus, int max);
/* Resets ev and fills the attributes of cfg's event. 0 or -EINVAL (unknown
 * event, err says which). */
int perf_events_attr(struct perf_events *ev, const struct perf_events_config *cfg,
                     struct perf_event_attr *out, char *err, size_t errlen);
/* The per-CPU ring table and the scratch buffer of an event set being
 * opened; on failure the set is closed and err says why. */
int perf_events_alloc(struct perf_events *ev, int ncpu, char *err, size_t errlen);
/* mmaps fd's ring and appends it to ev->rings (sized by the caller). 0, or
 * -1 with errno and err set. */
int perf_ring_map(struct perf_events *ev, int fd, int cpu, uint32_t data_pages, char *err,
                  size_t errlen);
/* What to change after perf_event_open failed with err. */
void perf_events_explain(int err, const struct perf_events_config *cfg, const char *ev, char *out,
                         size_t cap);
/* Events are opened disabled; this starts sampling. */
void perf_events_enable(struct perf_events *ev);
void perf_events_close(struct perf_events *ev);
/* Hands every complete record of all rings to fn, oldest first (by
 * timestamp across CPUs), and frees the ring space. Returns records read. */
size_t perf_events_drain(struct perf_events *ev, perf_record_fn fn, void *arg);

/* ---------------- follow.c ---------------- */

struct perf_state;
/* After perf.pids is read: sorts it and remembers it as the pids given;
 * follow_children (with pids) makes their descendants wanted too. 0 or
 * -ENOMEM. */
int perf_follow_init(struct perf_state *st, bool follow_children);
/* Adds the descendants /proc shows now (follow_children only). */
void perf_follow_scan(struct perf_state *st);
/* FORK and EXIT records: a process started by a wanted one is wanted; a
 * followed one that exits is not any more. */
void perf_follow_fork(struct perf_state *st, uint32_t pid, uint32_t ppid);
void perf_follow_exit(struct perf_state *st, uint32_t pid, uint32_t tid);
/* Samples of pid are kept: no pids given, or pid is one of the set. */
bool perf_pid_wanted(const struct perf_state *st, uint32_t pid);

/* ---------------- unwind tables (the kit's debug_frame.h) ---------------- */

#include "polyprof/kit/debug_frame.h"

/* ---------------- dso.c ---------------- */

struct perf_dso {
  uint32_t id;   /* unique for the plugin's lifetime */
  uint32_t refs; /* mappings pointing here */
  uint64_t key;
  uint64_t dev, ino; /* ino 0: keyed by path */
  char *path;        /* as the process sees it */
  bool special;      /* "[vdso]", "[vsyscall]"...: no file */
  int info_state;    /* 0 untried, 1 loaded, <0 -errno */
  struct pp_elf_info info;
  int sym_state; /* 0 untried, 1 loaded (symtab may be NULL: no symbols), <0 failed */
  struct pp_elf_symtab *symtab;
  int unw_state;              /* 0 untried, 1 loaded, <0 none/failed */
  uint8_t *eh_hdr, *eh_frame; /* NULL if the object has no .eh_frame_hdr */
  uint64_t eh_frame_hdr_size, eh_frame_size;
  struct pp_debug_frame dbg; /* from .debug_frame, if it has one */
  size_t bytes;              /* symtab + unwind data, counted against the budget */
  uint64_t lru;              /* clock of last use */
  char *build_id_hex;
  /* a .NET (PE) image: its precompiled (ReadyToRun) code is named from
   * its own tables, held and evicted as symbol tables are */
  bool is_pe;
  int r2r_state; /* 0 untried, 1 loaded, <0 none/failed */
  struct pp_r2r *r2r;
  bool logged;      /* a failure was logged */
  bool logged_open; /* a refused open was logged */
};

struct perf_dsos {
  struct perf_idmap map; /* key -> dso */
  uint32_t next_id;
  size_t bytes, budget; /* heavy data held / allowed */
  uint64_t clock;
  bool debug_files; /* look for /usr/lib/debug files */
  uint64_t open_errors, evictions;
  uint64_t loads;                    /* symbol tables read since the last snapshot */
  size_t name_files, max_name_files; /* tables reading names from their file: held fds */
  uint64_t dropped;           /* objects whose tables went with the last process mapping them */
  size_t r2r_tables;          /* ReadyToRun tables held (capped apart from the byte budget) */
  const struct pp_host *host; /* for debug lines: each table loaded and dropped */
  struct pp_elf_info vdso_info;
  struct pp_elf_symtab *vdso_symtab;
};

struct perf_proc;
struct perf_map;
void perf_dsos_init(struct perf_dsos *d, size_t budget, bool debug_files);
void perf_dsos_fini(struct perf_dsos *d);
/* Finds or creates the object for a mapping (takes a reference). */
struct perf_dso *perf_dso_get(struct perf_dsos *d, uint32_t maj, uint32_t min, uint64_t ino,
                              const char *path);
void perf_dso_put(struct perf_dsos *d, struct perf_dso *dso);
/* Loads ELF facts / symbols / unwind tables, opening the file through the
 * process that maps it. Return 0 if available. */
int perf_dso_need_info(struct perf_dsos *d, struct perf_dso *dso, const struct perf_proc *p,
                       const struct perf_map *m);
int perf_dso_need_symbols(struct perf_dsos *d, struct perf_dso *dso, const struct perf_proc *p,
                          const struct perf_map *m);
int perf_dso_need_unwind(struct perf_dsos *d, struct perf_dso *dso, const struct perf_proc *p,
                         const struct perf_map *m);
/* Loads the ReadyToRun table of a .NET image (dso->is_pe). 0 if available. */
int perf_dso_need_r2r(struct perf_dsos *d, struct perf_dso *dso, const struct perf_proc *p,
                      const struct perf_map *m);
/* Frees symbol and unwind data of the least recently used objects until the
 * budget holds. */
void perf_dsos_trim(struct perf_dsos *d);
/* Drops objects no mapping refers to any more, with their tables: the
 * samples that used them are symbolized already. Returns the number of
 * objects that still held tables. */
size_t perf_dsos_collect(struct perf_dsos *d);
/* Objects holding symbol or unwind tables now. */
size_t perf_dsos_with_tables(const struct perf_dsos *d);

/* ---------------- procs.c ---------------- */

struct perf_map {
  uint64_t start, end, pgoff;
  struct perf_dso *dso; /* NULL: anonymous executable memory (JIT) */
  uint64_t bias;        /* runtime address - ELF vaddr; valid if bias_ok */
  int bias_ok;          /* 0 unknown, 1 valid, -1 cannot be computed */
};

struct perf_thread {
  uint32_t tid, pid;
  char comm[PERF_COMM_LEN];
};

struct perf_proc {
  uint32_t pid;
  char comm[PERF_COMM_LEN];
  int maps_state; /* 0 not loaded, 1 loaded, <0 failed (-errno) */
  struct perf_map *maps;
  size_t nmaps, cap;
  bool exited;
  uint64_t exit_tick;
  uint64_t last_used; /* tick of last sample */
  bool sampled;       /* has samples in the current session */
  /* JIT perf map */
  struct pp_perfmap *jit;
  int64_t jit_size, jit_mtime;
  uint64_t jit_checked_tick;
  bool jit_missing;
  bool jit_refused_logged;    /* the kit refused its perf map: said once */
  int jit_open_err;           /* why its perf map could not be opened (-errno), 0: opened */
  struct pp_jitdump *jitdump; /* used when there is no perf map */
  uint64_t jitdump_tick;      /* next tick it may be read */
  uint32_t ns_pid;
  /* Go */
  char go_version[32];
  bool go_static;
};

struct perf_state;
struct perf_procs {
  struct perf_idmap procs;   /* pid -> perf_proc */
  struct perf_idmap threads; /* tid -> perf_thread */
  size_t max_procs, max_maps;
  uint64_t maps_errors;
};

void perf_procs_init(struct perf_procs *t, size_t max_procs, size_t max_maps);
void perf_procs_fini(struct perf_state *st);
struct perf_proc *perf_proc_get(struct perf_state *st, uint32_t pid, bool create);
/* Makes sure the process's maps are known (reads /proc/PID/maps once). */
int perf_proc_need_maps(struct perf_state *st, struct perf_proc *p);
/* The mapping containing addr, or NULL. */
struct perf_map *perf_proc_find_map(struct perf_proc *p, uint64_t addr);
const char *perf_thread_comm(struct perf_state *st, uint32_t pid, uint32_t tid);
void perf_proc_on_comm(struct perf_state *st, uint32_t pid, uint32_t tid, const char *comm,
                       bool exec);
void perf_proc_on_mmap2(struct perf_state *st, uint32_t pid, uint64_t start, uint64_t len,
                        uint64_t pgoff, uint32_t maj, uint32_t min, uint64_t ino, uint32_t prot,
                        const char *path);
void perf_proc_on_fork(struct perf_state *st, uint32_t pid, uint32_t ppid, uint32_t tid,
                       uint32_t ptid);
void perf_proc_on_exit(struct perf_state *st, uint32_t pid, uint32_t tid);
/* Frees exited processes whose samples are all in, and idle ones over the
 * cap. Called once per tick / snapshot. */
void perf_procs_reap(struct perf_state *st, bool session_end);

/* ---------------- symbolize.c ---------------- */

struct perf_frame {
  uint64_t ka, kb; /* key */
  uint32_t name;   /* offset into the arena */
  uint32_t file;   /* offset into the arena, UINT32_MAX: none */
  uint32_t kind;   /* enum pp_frame_kind */
  uint32_t flags;  /* PERF_FRAME_* */
};
#define PERF_FRAME_UNKNOWN 1u /* counts as [unknown] for smart mode */
#define PERF_FRAME_JIT_RUN 2u /* unnamed JIT code: a run of them is one frame */

struct perf_frames {
  struct perf_frame *v;
  size_t n, cap, max;
  uint32_t *slots; /* open addressing, frame index + 1 */
  size_t nslots;
  char *arena;
  size_t arena_len, arena_cap;
  uint64_t dropped;
};

void perf_frames_init(struct perf_frames *f, size_t max);
void perf_frames_reset(struct perf_frames *f);
void perf_frames_fini(struct perf_frames *f);
static inline const char *perf_frames_str(const struct perf_frames *f, uint32_t off) {
  return off == UINT32_MAX ? NULL : f->arena + off;
}
/* Frame id of a kernel address / of a user address in process p. leaf: the
 * address is where the CPU was (not a return address). */
uint32_t perf_sym_kernel(struct perf_state *st, uint64_t addr);
uint32_t perf_sym_user(struct perf_state *st, struct perf_proc *p, uint64_t addr, bool leaf);
/* Frames of one stack (leaf first) with each run of unnamed JIT frames
 * made one frame; returns the new count. */
uint32_t perf_sym_fold_jit(const struct perf_state *st, uint32_t *fr, uint32_t n);
/* The fixed id of "[unknown]". */
#define PERF_FRAME_ID_UNKNOWN 0u

/* ---------------- unwind.c ---------------- */

struct perf_unwind;
int perf_unwind_init(struct perf_unwind **u);
void perf_unwind_fini(struct perf_unwind *u);
/* Unwinds a user stack copy. regs: the sample's user registers in
 * perf_events.regs_mask order. Writes up to max addresses (leaf first).
 * Returns the count (0: nothing usable). */
int perf_unwind_user(struct perf_state *st, struct perf_proc *p, const uint64_t *regs,
                     unsigned nregs, const uint8_t *stack, uint64_t stack_len, uint64_t *ips,
                     int max);
/* The same from registers already in the kit's layout (PP_UNWIND_NREGS,
 * perf's numbering), as a thread snapshot gives them. */
int perf_unwind_user_regs(struct perf_state *st, struct perf_proc *p, const uint64_t *regs,
                          const uint8_t *stack, uint64_t stack_len, uint64_t *ips, int max);

/* ---------------- dump.c ---------------- */

/* dump(): one sample per thread of the given pids with the native stack it
 * is in now (each thread held for an instant), or why it was not read. */
int perf_dump(struct perf_state *st, struct pp_sink *sink);

/* ---------------- records.c ---------------- */

/* Reads every ring up to now and handles each record; trims the symbol
 * tables to their budget. Called from tick() and snapshot(). */
void perf_drain(struct perf_state *st);

/* ---------------- stacks.c ---------------- */

struct perf_stack {
  uint64_t hash;
  uint64_t count;
  uint32_t pid;
  uint32_t nframes;
  uint32_t off; /* into perf_stacks.pool */
  char comm[PERF_COMM_LEN];
};

struct perf_stacks {
  struct perf_stack *v;
  size_t n, cap, max;
  uint32_t *slots; /* open addressing, index + 1 */
  size_t nslots;
  uint32_t *pool;
  size_t pool_len, pool_cap;
  uint64_t total, dropped;
};

void perf_stacks_init(struct perf_stacks *s, size_t max);
void perf_stacks_reset(struct perf_stacks *s);
void perf_stacks_fini(struct perf_stacks *s);
void perf_stacks_add(struct perf_stacks *s, uint32_t pid, const char *comm, const uint32_t *frames,
                     uint32_t n);
/* The same with a weight (off-CPU nanoseconds) instead of one sample. */
void perf_stacks_add_n(struct perf_stacks *s, uint32_t pid, const char *comm,
                       const uint32_t *frames, uint32_t n, uint64_t weight);
/* One stack to the sink as a sample of `type` (enum pp_profile_type). */
void perf_emit_stack(struct perf_state *st, struct pp_sink *sink, const struct perf_stacks *s,
                     const struct perf_stack *e, uint64_t count, uint32_t type);
/* Emits the session: FP, DWARF, or per process the better of both. */
void perf_stacks_emit(struct perf_state *st, struct pp_sink *sink);

/* ---------------- offcpu.c ---------------- */

#define OFFCPU_MAX_IPS 128 /* addresses kept per blocked thread (kernel + user) */

struct offcpu_entry;
struct perf_offcpu {
  struct perf_events ev; /* context-switch event per CPU */
  bool open;
  struct offcpu_entry *slots; /* blocked threads by tid, open addressing */
  size_t nslots, n, max;
  uint64_t *pool;        /* OFFCPU_MAX_IPS addresses per entry */
  uint32_t *free_blocks; /* free pool blocks */
  size_t nfree;
  uint64_t threshold_ns;
  struct perf_stacks stacks; /* this session's, counts in nanoseconds */
  /* since the last snapshot */
  uint64_t switches, recorded, below_threshold, table_full, lost, throttled;
};

/* Tables for at most max_threads threads blocked at once. 0 or -ENOMEM. */
int perf_offcpu_init(struct perf_offcpu *o, size_t max_threads, uint64_t threshold_us);
void perf_offcpu_fini(struct perf_offcpu *o);
/* Opens and enables the context-switch event on every CPU; err says why not. */
int perf_offcpu_open(struct perf_offcpu *o, uint32_t data_pages, uint16_t max_stack, char *err,
                     size_t errlen);
void perf_offcpu_close(struct perf_offcpu *o);
/* Reads the rings (pairing switch-outs with switch-ins). */
void perf_offcpu_drain(struct perf_state *st);
/* Emits the session's off-CPU stacks (PP_PROFILE_OFFCPU, microseconds). */
void perf_offcpu_emit(struct perf_state *st, struct pp_sink *sink);

/* ---------------- alloc.c, alloc_probes.c ---------------- */

#define ALLOC_MAX_PROBES 8 /* allocation functions probed per library */
#define ALLOC_MAX_FILES 4  /* allocator libraries probed per process */
#define ALLOC_NO_ARG 255

struct alloc_probe {
  uint64_t offset;   /* file offset of the function's entry */
  const char *name;  /* "malloc" */
  uint8_t size_arg;  /* argument holding the byte count (0: first) */
  uint8_t count_arg; /* calloc's element count, or ALLOC_NO_ARG */
};

struct alloc_file {
  int fd; /* opened through the target's root; the probe names /proc/self/fd/N */
  uint32_t dev_major, dev_minor;
  uint64_t inode;
  char path[256]; /* as the process maps it, for messages */
  struct alloc_probe probes[ALLOC_MAX_PROBES];
  size_t nprobes;
};

/* The allocator libraries process pid maps, each opened with its probes
 * (at most cap). 0, -EAGAIN if none yet but a dynamic loader is mapped (a
 * program just started), -ENOENT for none (statically linked), or -errno;
 * why says what is missing. */
int perf_alloc_find_probes(uint32_t pid, struct alloc_file *files, size_t cap, size_t *n, char *why,
                           size_t whylen);

struct perf_alloc {
  bool open;
  int pmu_type;    /* the uprobe PMU's perf type */
  uint64_t period; /* calls per sample, on average */
  uint64_t rng;    /* xorshift state of the period jitter */
  uint32_t pages;  /* ring data pages per thread */
  size_t max_threads;
  struct perf_idmap procs;   /* pid -> alloc_proc */
  struct perf_idmap threads; /* tid -> alloc_thread */
  uint64_t scan_tick;
  /* duty cycle: probes in place for on_len_ns of every second */
  uint64_t on_len_ns, origin_ns;
  bool on;
  uint64_t on_since, on_ns, session_ns; /* on_ns: probed time since session_ns */
  struct perf_stacks stacks;            /* this session's, counts in bytes */
  /* since the last snapshot */
  uint64_t samples, lost, throttled, oversize, malformed, threads_refused;
};

/* Looks for the uprobe PMU; the probes are placed by the first tick. 0 or
 * -errno with err saying why native allocations cannot be profiled. */
int perf_alloc_open(struct perf_state *st, char *err, size_t errlen);
void perf_alloc_close(struct perf_state *st);
/* Probes threads and processes that appeared, drops those gone, and reads
 * the rings. */
void perf_alloc_tick(struct perf_state *st);
/* Emits the session's allocation stacks (PP_PROFILE_ALLOC, bytes). */
void perf_alloc_emit(struct perf_state *st, struct pp_sink *sink);

/* ---------------- perf.c: the state ---------------- */

struct perf_state {
  const struct pp_host *host;
  /* options */
  int mode;
  uint32_t stack_size;
  char event[64];
  uint32_t data_pages;
  uint64_t event_period;
  bool kernel;
  uint32_t max_depth;
  /* the processes sampled (none: all), sorted, with the children followed
   * beyond the ones given (follow.c) */
  uint32_t *pids;
  size_t npids, pids_cap;
  uint32_t *pids_given;
  size_t npids_given;
  bool follow_children, follow_full_logged;
  size_t perfmap_max_bytes;
  /* sampling */
  struct perf_events ev;
  bool running;
  uint64_t tick; /* tick counter */
  uint32_t self_pid;
  /* tables */
  struct perf_procs procs;
  struct perf_dsos dsos;
  struct pp_kallsyms *kallsyms;
  int kallsyms_state; /* 0 untried, 1 ok, <0 failed */
  struct perf_frames frames;
  struct perf_stacks fp, dwarf;
  struct perf_unwind *unwind;
  /* counters since the last snapshot */
  uint64_t samples, lost, throttled, unthrottled, unwind_errors, filtered;
  uint64_t unwind_ns; /* time spent unwinding (DWARF cost per sample) */
  /* frames in .NET images: named from their ReadyToRun tables, or not */
  uint64_t r2r_frames, r2r_unnamed;
  /* profile types of the session (PP_SESSION_* bits) */
  bool cpu_on, offcpu_on;
  uint64_t offcpu_threshold_us;
  size_t offcpu_max_threads;
  uint32_t offcpu_pages;
  struct perf_offcpu offcpu;
  bool alloc_on;
  uint32_t alloc_pages;
  uint64_t alloc_period;
  uint32_t alloc_duty; /* percent of each second the probes are in place */
  size_t alloc_max_threads;
  struct perf_alloc alloc;
  /* totals since start, for the log */
  uint64_t total_samples, total_lost;
};

#endif
