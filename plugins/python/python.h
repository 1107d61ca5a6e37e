/* SPDX-License-Identifier: Apache-2.0 */
/*
 * polyprof python plugin: shared declarations.
 *
 * The plugin reads CPython's own data structures out of a running process
 * with process_vm_readv (no code runs in the target, nothing is written to
 * it). One concept per file:
 *   python.c     descriptor, options table, vtable (init .. fini)
 *   attach.c     the target table's attach/release callbacks: locating a
 *                new process, identity checks (exit, exec), what a released
 *                target leaves for the snapshot (version, counts, exec log)
 *   sampler.c    the sampling loop: schedule, thread filter (modes),
 *                blocking mode, stacks into the kit's stack table
 *   offsets.c    per-version struct layouts (<= 3.13)
 *   debug_offsets.c  3.13+: every offset from the target's _Py_DebugOffsets
 *   identity.c   what tells an exec'd image from the one we located
 *   locate.c     finding the interpreter: module, version, anchors
 *   linetable.c  every line-table format (2.7 .. 3.14)
 *   codecache.c  code object -> name/file/line table, bounded, by address
 *   walk.c       interpreters, threads, frames of one process (<GC>, filters)
 *   asyncio*.c   asyncio tasks: the running one, those awaiting it, and
 *                (wall mode) the waiting ones (asyncio_internal.h)
 *   opcodes.c    opcode names (3.11-3.13) for <op: NAME> leaves
 *   object_reader.c  dicts, instance attributes, ints (object_reader.h)
 *   thread_names.c   <thread: NAME>: threading.Thread.name or the kernel's
 *   native*.c    cpu mode with native frames: perf events per thread, their
 *                stack copies unwound and merged with the Python stack
 * Every byte read from the target is hostile: counts, lengths and pointers
 * are bounded and validated before use.
 */
#ifndef POLYPROF_PYTHON_H
#define POLYPROF_PYTHON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "polyprof/kit/stack_table.h"
#include "polyprof/kit/target_table.h"
#include "polyprof/kit/thread_cpu.h"
#include "polyprof/plugin.h"

#define PY_MAX_THREADS 4096          /* thread-list walk cap (as py-spy, Tachyon) */
#define PY_MAX_DEPTH_LIMIT 4096      /* hard cap of python.max_depth */
#define PY_MAX_INTERPS 64            /* sub-interpreters walked per sample */
#define PY_NAME_MAX 1024             /* bytes of UTF-8 kept per name/file name */
#define PY_LINETABLE_MAX 65536       /* larger line tables: line = first line */
#define PY_CHUNK_COPY_MAX (1u << 20) /* bytes of 3.11+ data stack copied per thread */
#define PY_CHUNK_SLACK 2048          /* prefetched past the last top of the data stack */
/* Frames of the first thread that live outside its data stack (3.12/3.13
 * entry frames on the C stack, one per nested activation) prefetched. */
#define PY_SPEC_FRAMES 4

/* Line-table formats (linetable.c). */
enum py_lt_format {
  PY_LT_LNOTAB_U8 = 0, /* 2.7: (addr, line) byte pairs, unsigned line deltas */
  PY_LT_LNOTAB_S8 = 1, /* 3.6-3.9: same, signed line deltas */
  PY_LT_310 = 2,       /* 3.10: (size, line delta) pairs, -128 = no line */
  PY_LT_311 = 3,       /* 3.11+: location table in code units */
};

/* How strings (co_name, co_filename) are laid out. */
enum py_str_kind {
  PY_STR_BYTES27 = 0,   /* PyStringObject: ob_size@16, ob_sval@36 */
  PY_STR_UNICODE33 = 1, /* 3.3-3.11: ASCII header 48, compact header 72 */
  PY_STR_UNICODE312 = 2 /* 3.12+: ASCII header 40, compact header 56 */
};

/* How a thread's innermost frame is found. */
enum py_walk_kind {
  PY_WALK_FRAMEOBJ = 0, /* 2.7-3.10: tstate->frame, PyFrameObject.f_back */
  PY_WALK_CFRAME = 1,   /* 3.11-3.12: tstate->cframe->current_frame */
  PY_WALK_CURFRAME = 2  /* 3.13+: tstate->current_frame */
};

/* Where the GIL holder is read. */
enum py_gil_kind {
  PY_GIL_NONE = 0,
  PY_GIL_TSTATE_SYM = 1, /* 2.7, 3.6: *(_PyThreadState_Current) */
  PY_GIL_RUNTIME = 2,    /* 3.7-3.11: *(_PyRuntime + gilstate.tstate_current) */
  PY_GIL_INTERP_PTR = 3  /* 3.12+: *(interp + ceval.gil) -> {last_holder, locked} */
};

/* Where the collector's "collecting" flag (an int) is read. */
enum py_gc_kind {
  PY_GC_NONE = 0,
  PY_GC_SYMBOL = 1,  /* 2.7, 3.6: gcmodule.c's static `collecting` (.symtab) */
  PY_GC_RUNTIME = 2, /* 3.7, 3.8: _PyRuntime.gc.collecting */
  PY_GC_INTERP = 3   /* 3.9+: interp->gc.collecting */
};

/* Byte offsets of everything the sampler reads, for one CPython minor. */
struct py_offsets {
  uint8_t major, minor;
  uint8_t walk, lt_format, str_kind, gil_kind;
  uint32_t rt_interp_head;    /* _PyRuntime.interpreters.head; 0: interp_head symbol */
  uint32_t rt_tstate_current; /* PY_GIL_RUNTIME */
  uint32_t is_next, is_tstate_head, is_gil_ptr;
  uint32_t is_modules; /* interp->modules (3.12+ imports.modules): sys.modules; 0: unknown */
  uint32_t gil_holder, gil_locked; /* inside _gil_runtime_state */
  uint32_t ts_next, ts_interp, ts_frame, ts_cframe, cf_current;
  uint32_t ts_thread_id, ts_native_tid; /* ts_native_tid 0: none (<= 3.10) */
  uint32_t ts_chunk, ts_top;            /* 3.11+ data stack; 0: none */
  uint32_t ts_read;                     /* bytes of PyThreadState read */
  uint32_t fr_back, fr_code, fr_lasti, fr_owner, fr_read;
  uint32_t co_filename, co_name, co_qualname, co_firstlineno, co_linetable;
  uint32_t co_code_adaptive, co_read;
  uint32_t is_code_gen;   /* 3.14+: interp->_code_object_generation; 0: none */
  uint32_t gc_collecting; /* PY_GC_RUNTIME: from _PyRuntime, PY_GC_INTERP: from interp */
  /* An exception being raised (curexc_type, 3.12+ current_exception) and
   * one being handled: 2.7/3.6 tstate->exc_type inline (ts_exc_inline),
   * 3.7+ through tstate->exc_info to a _PyErr_StackItem whose field at
   * exc_item_field (exc_type <= 3.10, exc_value 3.11+) is set */
  uint32_t ts_curexc, ts_exc_info, exc_item_field;
  bool ts_exc_inline;
  /* asyncio on 3.11-3.13: _PyInterpreterFrame.localsplus, where a
   * coroutine's frame lives inside it (gi_iframe), and the C Task's
   * fut_waiter, coro and name (_asynciomodule.c); 3.6-3.10 take theirs
   * from asyncio_objects.c's own table */
  uint32_t fr_localsplus, gen_iframe, task_fut_waiter, task_coro, task_name;
  uint8_t gc_kind;          /* enum py_gc_kind */
  bool lasti_is_index;      /* 3.10: f_lasti counts instructions (x2 = bytes) */
  bool skip_owner3;         /* 3.12+: frames owned by the C stack / interpreter */
  bool code_tagged;         /* 3.14+: f_executable is a tagged _PyStackRef */
  bool needs_debug_offsets; /* 3.14+: no static table, _Py_DebugOffsets only */
  uint8_t owner_max;        /* 3.11+: highest frame owner value that exists */
  /* From _Py_DebugOffsets (0: the version's fixed layout): where a
   * PyObject's type, a bytes object's size and data, and a str's length,
   * state word and data (compact ASCII / compact) sit. A free-threaded
   * build has a 32-byte object header and keeps `interned` in a byte of
   * its own, so the str kind bits start at bit 8 instead of 2. */
  bool free_threaded;
  uint8_t str_kind_shift;
  uint32_t ob_type, bytes_ob_size, bytes_sval, str_length, str_state;
  uint16_t str_ascii_hdr, str_compact_hdr;
  /* free-threaded 3.14+: a frame runs its thread's copy of the bytecode,
   * co_tlbc->entries[frame->tlbc_index] (0: none) */
  uint32_t fr_tlbc_index, co_tlbc;
};

/* Offsets for a version; 0 or -ENOTSUP. */
int python_offsets_for(int major, int minor, int micro, struct py_offsets *out);
/* Sets the read sizes (ts_read, fr_read, co_read) from the offsets. */
void python_offsets_finish(struct py_offsets *o);
/* debug_offsets.c: 3.13+, overrides *out from the target's
 * _Py_DebugOffsets (first bytes of _PyRuntime), parsed with the layout of
 * the minor it names (a newer minor: the newest layout known, if what it
 * declares fits). 0; -EINVAL with why naming the culprit (no cookie, a
 * field beyond the size its struct declares, object headers that are
 * neither a default nor a free-threaded build's, len too short). */
int python_offsets_from_debug(const uint8_t *dbg, size_t len, struct py_offsets *out, char *why,
                              size_t whylen);
#define PY_DEBUG_OFFSETS_READ 888 /* the largest layout known (3.15) */
/* Fixed buffers the walker reads one struct into. */
#define PY_TSTATE_READ_MAX 512
#define PY_FRAME_READ_MAX 128
#define PY_CODE_READ_MAX 256

/* Line of bytecode position addrq (bytes for <= 3.10, code units for
 * 3.11+); firstlineno when the table says nothing. Never reads beyond len. */
int python_line_for(int fmt, const uint8_t *tab, size_t len, int firstlineno, int64_t addrq);

/* One process, as located. */
struct py_proc {
  uint32_t pid, ns_pid;
  struct py_offsets off;
  int major, minor, micro;
  char version[32];             /* "3.11.7" */
  uint64_t runtime;             /* &_PyRuntime, 0 for 2.7/3.6 */
  uint64_t interp_head;         /* address of the head pointer (runtime + off, or interp_head) */
  uint64_t tstate_cur;          /* 2.7/3.6: &_PyThreadState_Current */
  uint64_t pycode_type;         /* &PyCode_Type (0: unknown, no type check) */
  uint64_t gc_flag;             /* 2.7-3.8: address of the collector's flag (0: unknown) */
  uint64_t none_addr;           /* &_Py_NoneStruct (0: unknown) */
  uint64_t str_type, long_type; /* &PyUnicode_Type, &PyLong_Type (0: unknown) */
  uint64_t map_lo, map_hi;      /* address range that holds the interpreter's module */
  int pthread_tid_off;          /* <= 3.10: offset of tid in struct pthread, -1 unknown */
  struct {                      /* <= 3.10: pthread_t -> tid, cleared every session */
    uint64_t thread_id;
    uint32_t tid;
  } tids[32];
  uint32_t ntids;
  /* Where the last sample found the first interpreter, its first thread's
   * state, that thread's 3.11 cframe and its data-stack chunk: the next
   * sample reads all of them in one system call and checks every address
   * against what it then reads (walk.c, "prefetch"). 0: unknown. */
  struct {
    uint64_t interp, ts, cframe, chunk_lo;
    uint32_t chunk_len, nframes;
    uint64_t frames[PY_SPEC_FRAMES]; /* frames outside the chunk (C stack) */
  } spec;
  uint64_t code_gen[4]; /* 3.14+: _code_object_generation per interpreter */
  uint32_t code_epoch;  /* bumped when any of them moves (codecache.c) */
  char module[64];      /* basename of the file that holds CPython */
};

/* locate.c: 3.13+, once _PyRuntime is found at runtime and the first
 * len bytes of it (its _Py_DebugOffsets) are copied to dbg: version,
 * offsets and the interpreter anchor. 0, or -ENOTSUP with why set
 * (unknown minor, pre-release 3.14, free-threaded build, offsets that do
 * not fit together), or -EINVAL (no debug offsets). */
int python_setup_from_debug(struct py_proc *p, uint64_t runtime, const uint8_t *dbg, size_t len,
                            char *why, size_t whylen);
/* The interpreter list head must point to an interpreter whose first thread
 * points back at it (py-spy's and austin's validation). 0; -ENOENT while
 * the interpreter is not initialised; other -errno. */
int python_validate(struct py_proc *p);
/* locate.c: finds CPython in pid. 0; -ENOTSUP (why says which version);
 * -ENOENT (no interpreter yet); other -errno. */
int python_locate(uint32_t pid, struct py_proc *p, char *why, size_t whylen);

/* identity.c: what changes when a pid exec()s. */
struct py_image_id {
  uint64_t start_time, start_code, start_stack; /* /proc/PID/stat 22, 26, 28 */
  uint64_t exe_id; /* pp_proc_exe_id(): device and inode of the executable */
};
/* 0, -ESRCH (gone, a zombie, or exiting: no memory left) or -errno. */
int python_image_id(uint32_t pid, struct py_image_id *id);
bool python_image_same(const struct py_image_id *a, const struct py_image_id *b);

/* codecache.c ---------------------------------------------------------- */
struct py_code {
  uint32_t pid;
  uint32_t gen;   /* cache generation it was validated in */
  uint32_t epoch; /* py_proc.code_epoch it was validated in */
  uint64_t addr;
  uint64_t last_used;
  uint64_t fp; /* fingerprint of the identifying fields, to re-validate */
  int32_t firstlineno;
  uint32_t lt_len;
  const char *name, *file; /* inside blob */
  uint8_t *lt;             /* inside blob */
  char *blob;
  int64_t memo_addrq[2]; /* last lines computed, so a hot frame costs nothing */
  int32_t memo_line[2];
};

struct py_codecache;
struct py_codecache *python_codecache_new(size_t entries);
void python_codecache_free(struct py_codecache *c);
/* Next session: entries get re-validated once before being trusted again. */
void python_codecache_new_gen(struct py_codecache *c);
/* A sample starts: entries it uses from now on are not evicted until the
 * next one starts (its frames point to them). */
void python_codecache_begin_sample(struct py_codecache *c);
void python_codecache_forget_pid(struct py_codecache *c, uint32_t pid);
/* Entry for code object addr of p (reading it on a miss), or NULL with
 * *err set. */
struct py_code *python_code_get(struct py_codecache *c, const struct py_proc *p, uint64_t addr,
                                int *err);
int python_code_line(struct py_code *e, int fmt, int64_t addrq);
void python_codecache_stats(struct py_codecache *c, uint64_t *hits, uint64_t *misses,
                            uint64_t *evictions);
/* debug_offsets.c: free-threaded 3.14+, where the bytecode a frame (its
 * copy fb) runs starts: co_tlbc->entries[tlbc_index] of its code object
 * when the thread has a copy of its own, else `adaptive`. */
uint64_t python_tlbc_start(const struct py_proc *p, uint64_t code, const uint8_t *fb,
                           uint64_t adaptive);
/* Reads a str object (or 2.7 str) as UTF-8, bounded. Length or -errno. */
int python_read_string(const struct py_proc *p, uint64_t addr, char *out, size_t cap);

/* walk.c -------------------------------------------------------------- */
struct py_frame_ref {
  struct py_code *code; /* NULL: a pseudo frame named by pseudo (<GC>, ...) */
  int32_t line;
  const char *pseudo;
  /* the first frame one run of the interpreter loop executed (its C call
   * of the eval function): native.c splits the stack there */
  bool entry;
};

enum py_thread_filter {
  PY_ALL_THREADS = 0,
  PY_RUNNING_THREADS = 1,
  PY_GIL_THREAD = 2,
  PY_EXCEPTION_THREADS = 3 /* raising or handling an exception, running or not */
};

struct py_walker; /* per-plugin scratch buffers, reused across samples */
struct py_walker *python_walker_new(uint32_t max_depth);
void python_walker_free(struct py_walker *w);
/* While the collector runs, the thread that runs it (the GIL holder) gets
 * a <GC> leaf frame (off by default: callers that do not ask never see a
 * pseudo frame). */
void python_walker_set_gc(struct py_walker *w, bool on);
/* 3.11+: the instruction pointer of the last walked thread's leaf frame,
 * as read (0: none or <= 3.10). */
uint64_t python_walker_leaf_ip(const struct py_walker *w);
/* Only the main thread (the first interpreter's oldest thread). */
void python_walker_set_main_only(struct py_walker *w, bool on);
/* asyncio task chains in the stacks (asyncio.c). */
void python_walker_set_async(struct py_walker *w, bool on);
/* python_async_counters() of the walker's asyncio state. */
void python_walker_async_counters(struct py_walker *w, uint64_t *passes, uint64_t *over);
/* 3.11-3.13: the instruction the leaf frame executes, as a <op: NAME>
 * leaf (opcodes.c). */
void python_walker_set_opcodes(struct py_walker *w, bool on);
/* Name of opcode op of CPython 3.minor; NULL if unknown. */
const char *python_opcode_name(int minor, uint8_t op);

/* asyncio*.c ----------------------------------------------------------- */
#define PY_ASYNC_MAX 16     /* awaiting tasks followed up from a task */
#define PY_ASYNC_CORO_MAX 8 /* coroutine frames shown per awaiting task */
/* Frames the walker may add to a stack: <GC>, <op: NAME>, and per task its
 * coroutine frames and a <task: name> */
#define PY_EXTRA_FRAMES (3 + (PY_ASYNC_CORO_MAX + 1) * (PY_ASYNC_MAX + 1))
struct py_async_state; /* asyncio_internal.h: caches and bounds */
struct py_async_scratch {
  struct py_frame_ref *out; /* room for max_depth + PY_EXTRA_FRAMES */
  char names[PY_ASYNC_MAX + 1][80];
  struct py_async_state *a;
  uint64_t tstate; /* the thread state of the stack being read (3.14+) */
};
struct py_async_state *python_async_state_new(uint32_t max_depth);
void python_async_state_free(struct py_async_state *a);
/* When frames[0..n) (leaf first, at addresses faddr) show a C asyncio
 * Task being stepped by the event loop (Handle._run), inserts after the
 * task's coroutine frames a <task: NAME> frame, then for each task that
 * awaits it (`await task`, gather(), TaskGroup) that task's coroutine
 * frames (each at the line of its await) and <task: NAME>. Returns the
 * new count (n when nothing is recognised). */
uint32_t python_async_chain(struct py_async_scratch *s, const struct py_proc *p,
                            struct py_codecache *cc, struct py_frame_ref *frames,
                            const uint64_t *faddr, uint32_t n, uint32_t cap);
/* Wall mode, waiting tasks: a sample starts (begin), each thread's raw
 * frames are shown to note_loop (a thread running an event loop is
 * remembered), then waiting emits one stack per waiting task of those
 * loops, through fn, on the loop's thread. */
void python_async_begin(struct py_async_scratch *s);
void python_async_note_loop(struct py_async_scratch *s, const struct py_proc *p, uint32_t tid,
                            const struct py_frame_ref *frames, const uint64_t *faddr, uint32_t n);
/* A task (and its type) seen in p: the registry of waiting tasks is found
 * from it. */
void python_async_saw_task(struct py_async_scratch *s, const struct py_proc *p, uint64_t task,
                           uint64_t type);
/* Waiting-task passes made, and those that found more tasks than one
 * pass reads (a rotating window was read), since the last call. */
void python_async_counters(struct py_async_scratch *s, uint64_t *passes, uint64_t *over);

/* Called for each thread whose stack was read; frames[0] is the leaf. */
typedef void (*py_stack_fn)(void *ctx, uint32_t tid, const struct py_frame_ref *frames, uint32_t n,
                            bool truncated);
/* Decides whether a thread is sampled (cpu mode reads its state); tid is the
 * host tid, 0 if unknown. */
typedef bool (*py_thread_pred)(void *ctx, uint32_t tid);

struct py_sample_result {
  uint32_t threads; /* thread states seen */
  uint32_t sampled; /* stacks delivered */
  uint32_t failed;  /* threads whose stack could not be read consistently */
  int err;          /* first error (-errno), 0 if every read was good */
};

void python_async_waiting(struct py_async_scratch *s, const struct py_proc *p,
                          struct py_codecache *cc, struct py_frame_ref *frames, uint32_t cap,
                          py_stack_fn fn, void *ctx);

int python_sample(struct py_walker *w, struct py_proc *p, struct py_codecache *cc,
                  enum py_thread_filter filter, py_thread_pred pred, py_stack_fn fn, void *ctx,
                  struct py_sample_result *res);

/* Maps a <= 3.10 pthread_t to the kernel tid (struct pthread scan). */
int python_discover_tid_offset(struct py_proc *p);

/* python.c, attach.c, sampler.c: the plugin's state --------------------- */

#define PY_MAX_FREEZE 1024 /* threads held in blocking mode */
/* An interpreter still starting has no version or anchors yet: looked for
 * again every PY_LOCATE_RETRY_NS, PY_LOCATE_ATTEMPTS times (~3 s). */
#define PY_LOCATE_RETRY_NS 250000000ull
#define PY_LOCATE_ATTEMPTS 12
#define PY_NS_MAP 256       /* namespace tids mapped per target */
#define PY_THREAD_NAMES 256 /* thread names remembered per target and session */
#define PY_THREAD_NAME_MAX 64
/* threading's names are read again at most this often, and a thread not
 * in the table waits at least PY_THREAD_NAMES_GAP_NS for a new read */
#define PY_THREAD_NAMES_REFRESH_NS 5000000000ull
#define PY_THREAD_NAMES_GAP_NS 1000000000ull

struct py_thread_name {
  uint32_t tid; /* in the target's pid namespace */
  char name[PY_THREAD_NAME_MAX];
};

/* What the plugin holds for an attached target (its entry's data). */
struct py_target {
  struct py_proc proc;
  struct py_image_id image;  /* of the image located (read before locating) */
  struct pp_thread_cpu *cpu; /* cpu mode: its threads' kept-open stat files */
  uint64_t next_check_ns, last_check_ns;
  uint64_t samples, failed, missed, stacks, idle; /* this session */
  uint64_t skipped;     /* cpu mode: ticks skipped, every thread asleep (this session) */
  uint32_t asleep_span; /* cpu mode: ticks between two looks while it sleeps (1: every tick) */
  uint32_t unlooked;    /* ticks since its last look */
  bool was_running;     /* a thread was on a CPU at the last look */
  bool tids_unknown;    /* a thread's host tid was not found: never skipped */
  bool ran_since_check; /* sampled since the last identity check */
  bool exit_logged;
  struct py_thread_name *tnames; /* PY_THREAD_NAMES, allocated at the first name asked */
  uint32_t ntnames;
  uint64_t tnames_read_ns;       /* when threading's names were last read (0: never) */
  uint64_t threading_mod;        /* the threading module as last found (0: look it up) */
  uint64_t tnames_fallback;      /* reads of threading's names that failed (this session) */
  uint32_t ns_map[PY_NS_MAP][2]; /* pid namespace: ns tid -> host tid */
  uint32_t nns;
  uint64_t ns_rebuilt_ns;
};

/* A target released this session: what the snapshot still says of it
 * (version metadata, efficiency line), and whether the next attach of the
 * same process is after an exec. */
struct py_released {
  uint32_t pid;
  uint64_t start_time;
  char version[32], module[64];
  uint64_t samples, failed, missed, stacks;
  bool exec_pending; /* still running when released: an exec, logged at its next attach */
};

struct py_objreader; /* object_reader.h */

struct py_state {
  const struct pp_host *host;
  uint64_t asleep_skips;    /* samples not taken, every thread asleep (this session) */
  uint32_t max_asleep_span; /* the longest wait between two looks, in ticks */
  uint32_t weight;          /* ticks the sample being taken stands for */
  enum py_thread_filter filter;
  /* --mode offcpu: every thread is read (filter PY_ALL_THREADS) and one
   * off its CPU also counts the sampling interval, in microseconds, as an
   * off-CPU sample; `untagged` says which threads still make the plain
   * samples (cpu, or wall when the mode is wall) */
  bool offcpu;
  enum { PY_UNTAGGED_NONE, PY_UNTAGGED_RUNNING, PY_UNTAGGED_ALL } untagged;
  bool blocking;
  bool thread_names;         /* a <thread: name> root frame on every stack */
  struct py_objreader *objs; /* thread names: threading's dicts and objects */
  bool told_gprofiler_mode;  /* the pyperf/auto warning is given once per run */
  int64_t frequency;
  uint32_t max_depth;
  uint64_t interval_ns, due_ns; /* due_ns: when the next sample is due */
  uint64_t now_ns;
  struct pp_target_table *targets;
  /* cpu mode: who is on a CPU, from the kernel's switch records (NULL:
   * unavailable, each process is looked at instead); switches_ok: this
   * tick's answers are exact */
  struct pp_cpu_switches *switches;
  bool switches_ok, switches_refused;
  uint32_t switches_from; /* targets from which they are used (0: never) */
  struct py_codecache *cc;
  struct py_walker *walker;
  struct pp_stack_table *stacks;
  struct pp_frame *frames;     /* max_depth + 1: one stack being counted */
  struct pp_target_entry *cur; /* target being sampled (callbacks) */
  struct pp_sink *dump_sink;   /* python_dump(): stacks go straight to it */
  uint32_t *pre_tids;          /* blocking + cpu: states read before the */
  char *pre_states;            /* threads were held (PY_MAX_FREEZE each) */
  uint32_t npre;
  struct py_native *native;     /* python.native: NULL when off */
  struct py_released *released; /* this session's, bounded */
  size_t nreleased, released_cap;
};

/* attach.c */
int python_attach(void *plugin, struct pp_target_entry *t);
void python_release(void *plugin, struct pp_target_entry *t);
/* Did the process exit, get its pid reused, or exec a new image? */
void python_check_identity(struct py_state *st, struct pp_target_entry *t);
/* The sampler saw the process gone (-ESRCH). */
void python_target_exited(struct py_state *st, struct pp_target_entry *t);
/* Snapshot: version metadata and efficiency lines of the targets, attached
 * and released this session; counters reset for the next session. */
void python_report_targets(struct py_state *st, struct pp_sink *sink, uint64_t *samples,
                           uint64_t *failed, uint64_t *missed);

/* thread_names.c: the name of thread ns_tid of the current target:
 * threading.Thread.name, or the kernel's name when it was set natively
 * (prctl, pthread_setname_np) or threading's cannot be read. Remembered;
 * threading's names are read at most every PY_THREAD_NAMES_REFRESH_NS.
 * NULL if unknown. */
const char *python_thread_name(struct py_state *st, uint32_t ns_tid);
/* walk.c: <= 3.10, the kernel tid of a thread from its pthread_t (0:
 * unknown). */
uint32_t python_thread_tid(struct py_proc *p, uint64_t thread_id);

/* sampler.c */
int python_tick(struct py_state *st, uint64_t now);
/* dump(): every thread of every attached target read once and emitted at
 * once, each with its tid and name; the session's counts are left alone. */
int python_dump(struct py_state *st, struct pp_sink *sink);

#endif
