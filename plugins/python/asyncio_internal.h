/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the asyncio readers share (3.6-3.13): the layouts they need, the
 * kinds of object they tell apart (by their type's tp_name, read once per
 * type), and the per-walker state that bounds and caches their work.
 *   asyncio.c          the running task and the chain of tasks awaiting it
 *   asyncio_objects.c  object kinds, instance attributes, coroutine chains
 *                      (3.6-3.10: a coroutine's frame is a PyFrameObject
 *                      of its own, cr_frame; attributes in a __dict__)
 *   asyncio_awaiter.c  who awaits a task: await, gather(), TaskGroup
 *   asyncio_waiting.c  wall mode: the tasks no thread runs, from the
 *                      registry of all tasks
 */
#ifndef POLYPROF_PYTHON_ASYNCIO_INTERNAL_H
#define POLYPROF_PYTHON_ASYNCIO_INTERNAL_H

#include "object_reader.h"
#include "python.h"

#define PA_TASK_READ 192 /* bytes of a TaskObj read: every field used is below */
#define PA_TYPES 48      /* type -> kind entries */
#define PA_NAMES 32      /* task names remembered (str objects, by address) */
#define PA_AWAITERS 8    /* awaiters remembered within one sample */
#define PA_LOOPS 4       /* threads running an event loop, per sample */
#define PA_REGISTRIES 16 /* processes whose task registry is remembered */
/* Registry entries (tasks) read per sample; a process with more gets a
 * rotating window, each task read as often as the others over time. */
#define PA_TASKS_MAX 64
#define PA_RETRY_SAMPLES 2000 /* samples before a registry not found is looked for again */

enum pa_kind {
  PA_UNKNOWN = 0, /* not read yet */
  PA_OTHER,
  PA_TASK,       /* _asyncio.Task, or a Python class derived from it */
  PA_FUTURE,     /* _asyncio.Future */
  PA_GATHER,     /* asyncio.tasks._GatheringFuture */
  PA_FUTUREITER, /* _asyncio.FutureIter: what `await future` suspends on */
  PA_CORO,       /* coroutine */
  PA_CFUNC,      /* builtin_function_or_method: a task's wakeup */
  PA_FUNC,       /* function: gather()'s _done_callback */
  PA_METHOD,     /* method: TaskGroup._on_task_done */
  PA_TASKGROUP,  /* asyncio.taskgroups.TaskGroup */
  PA_WEAKSET,    /* _weakrefset.WeakSet */
  PA_SET,        /* set */
  PA_WEAKREF,    /* weakref.ReferenceType (3.6-3.9: weakref) */
  PA_MODULE,     /* module */
  PA_DICT,       /* dict */
  PA_GENERATOR,  /* generator: 3.6-3.10, followed in a yield from */
  PA_PARTIAL,    /* functools.partial: 3.6's gather() callback (fn at 16) */
  PA_WAKEUP,     /* 3.6-3.9: TaskWakeupMethWrapper, a task's wakeup (ww_task at 16) */
};

/* Layout facts of one minor (DWARF of pyenv's 3.6.15, 3.7.16, 3.8.18, 3.9.18, 3.10.13,
 * 3.11.7, 3.12.1, 3.13.0; docs/python.md). */
struct pa_layout {
  uint32_t task_waiter, task_coro, task_name; /* TaskObj fields (task_name 0: 3.6, 3.7) */
  uint32_t coro_qualname;                     /* 3.6, 3.7: PyCoroObject.cr_qualname */
  uint32_t co_code;                           /* 3.6-3.10: PyCodeObject.co_code */
  uint32_t task_size;                         /* sizeof(TaskObj): tp_basicsize of _asyncio.Task */
  uint32_t gen_state;                         /* 3.11+: PyGenObject.gi_frame_state (int8) */
  uint32_t gen_iframe;                        /* 3.11+: the frame inside the coroutine */
  uint32_t fr_stacktop; /* 3.11+: _PyInterpreterFrame.stacktop (int, in localsplus slots) */
  uint32_t fr_locals;   /* a frame's first local (self): _PyInterpreterFrame or PyFrameObject */
  uint32_t fut_loop, fut_cb0, fut_state, fut_weakreflist;
  bool cb_list; /* 3.6: fut_cb0 is the list of done-callbacks (no callback0) */
  uint32_t func_closure, func_defaults; /* PyFunctionObject */
  uint32_t type_module;                 /* PyHeapTypeObject.ht_module */
  uint32_t mod_state;                   /* PyModuleObject.md_state */
  uint32_t st_scheduled, st_task_type;  /* 3.12+: asyncio_state.scheduled_tasks, TaskType */
  /* 3.6-3.10: PyGenObject.gi_frame (a PyFrameObject) and the frame's
   * value stack: f_stacktop (3.6-3.9, NULL while running) or
   * f_stackdepth and f_state (3.10) */
  uint32_t gen_frame, f_valuestack, f_stacktop, f_stackdepth, f_state;
  int8_t st_await;               /* gi_frame_state of a coroutine suspended in an await */
  uint8_t resume_op, resume_op2; /* 3.11/3.12: the instruction after that await; 0: none */
  uint8_t minor;
  bool frameobj; /* 3.6-3.10: frames are PyFrameObjects (asyncio_objects.c) */
};
bool pa_layout_for(const struct py_proc *p, struct pa_layout *l);

/* Where a process keeps its tasks: the set of weak references
 * (WeakSet.data), found once and checked by type at every use. */
struct pa_registry {
  uint32_t pid;
  uint32_t cursor; /* first table slot of the next window */
  uint64_t runtime, set, set_type;
  uint64_t task_type;   /* _asyncio.Task (the base of a task's class) */
  uint64_t task;        /* a task seen (3.11 without symbols: the set is found from it) */
  uint64_t table, size; /* the set's table as the last pass found it (0: unknown) */
  uint64_t retry_at;    /* not found: the pass count to look again at */
};

/* 3.14+: _Py_AsyncioModuleDebugOffsets (asyncio_debug.c), checked */
#define PA_DBG_BYTES 104     /* thirteen uint64 */
#define PA_DBG_TASK_MAX 1024 /* largest sizeof(TaskObj) believed */
#define PA_DBG_STATE_MAX                                        \
  (16u << 20) /* largest thread / interpreter state believed (a \
               * real 3.13 interpreter state is ~190 KiB) */
struct pa_dbg {
  uint32_t task_size, task_name, task_awaited_by, task_is_task, task_awaited_by_is_set, task_coro,
      task_node;
  uint32_t is_size, is_tasks_head;
  uint32_t ts_size, ts_running_loop, ts_running_task, ts_tasks_head;
};
struct pa_dbg_slot {
  uint32_t pid;
  bool ok;
  uint64_t retry_at; /* not found: the dbg_clock to look again at */
  struct pa_dbg d;
};

struct py_async_state {
  uint32_t max_depth;
  struct pa_dbg_slot dbgs[PA_REGISTRIES];
  uint32_t next_dbg;
  uint64_t dbg_clock;
  struct {
    uint32_t pid;
    uint8_t kind;
    uint64_t type;
    uint64_t base; /* PA_TASK: the _asyncio.Task it derives from (or is) */
  } types[PA_TYPES];
  uint32_t ntypes, next_type;
  struct py_objreader reader; /* dicts and instance attributes */
  /* task names: a str is immutable, so its address, length and hash (as
   * read from its header at each use) name the same text */
  struct {
    uint32_t pid;
    uint64_t addr, length, hash;
    uint64_t epoch; /* checked against the str in this sample */
    char text[64];
  } names[PA_NAMES];
  uint32_t nnames, next_name;
  /* within one sample (epoch): the awaiter found through a done-callback,
   * so the tasks of one gather() or TaskGroup share the work */
  uint64_t epoch;
  struct {
    uint64_t epoch, callback, parent; /* parent 0: none */
    uint32_t nchain;
    uint8_t pbytes[PA_TASK_READ];
    struct py_frame_ref chain[PY_ASYNC_CORO_MAX];
  } awaiters[PA_AWAITERS];
  uint32_t next_awaiter;
  /* this sample's event loops: the thread, the loop object, and the
   * thread's frames from BaseEventLoop._run_once to the root */
  struct {
    uint32_t tid, n;
    uint64_t loop;
    struct py_frame_ref *prefix; /* max_depth */
  } loops[PA_LOOPS];
  uint32_t nloops;
  struct pa_registry regs[PA_REGISTRIES];
  uint32_t nregs, next_reg;
  uint64_t samples; /* waiting-task passes made (the clock of retry_at) */
  /* since the last report: passes, and those that found more tasks than
   * one pass reads */
  uint64_t passes, tasks_over;
  uint64_t keys[PA_TASKS_MAX], objs[PA_TASKS_MAX];
  /* the last pass's weak references and the tasks they named */
  uint32_t memo_pid, memo_n, memo_m;
  uint64_t memo_keys[PA_TASKS_MAX], memo_objs[PA_TASKS_MAX];
  uint8_t tasks[PA_TASKS_MAX][PA_TASK_READ];
  uint8_t wref[PA_TASKS_MAX][24];
};

bool pa_plausible(uint64_t v);
/* The first done-callback of the future whose bytes are fut (0: none). */
uint64_t pa_first_callback(const struct py_proc *p, const struct pa_layout *l, const uint8_t *fut);
uint64_t pa_rd64(const uint8_t *b, uint32_t off);
/* Kind of the object at obj (its type read, then its tp_name once);
 * *type (may be NULL) gets the type. PA_OTHER when unreadable. */
enum pa_kind pa_kind_of(struct py_async_state *a, const struct py_proc *p, uint64_t obj,
                        uint64_t *type);
enum pa_kind pa_kind_of_type(struct py_async_state *a, const struct py_proc *p, uint64_t type);
/* The _asyncio.Task a task type is or derives from; 0 if it is no task
 * type. */
uint64_t pa_task_base(struct py_async_state *a, const struct py_proc *p, uint64_t type);
/* An instance attribute of a Python class's instance
 * (python_obj_attr()). name must be a literal. 0 or -errno (-ENOENT: not
 * set). */
int pa_attr(struct py_async_state *a, const struct py_proc *p, const struct pa_layout *l,
            uint64_t obj, uint64_t type, const char *name, uint64_t *val);
/* "<task: NAME>" of a task (its bytes) into out. */
void pa_task_name(struct py_async_state *a, const struct py_proc *p, const struct pa_layout *l,
                  const uint8_t *task, char *out, size_t cap);
/* The coroutine chain of coro: coro's frame, then the coroutine it awaits,
 * and so on (cr_await), into out innermost first, at most cap frames.
 * *awaited gets the future the innermost one awaits (through the
 * FutureIter it is suspended on), 0 if none. Returns the frame count. */
uint32_t pa_coro_chain(struct py_async_state *a, const struct py_proc *p, struct py_codecache *cc,
                       const struct pa_layout *l, uint64_t coro, struct py_frame_ref *out,
                       uint32_t cap, uint64_t *awaited);
/* The same for 3.6-3.10 (asyncio_objects.c). */
uint32_t pa_coro_chain_fo(struct py_async_state *a, const struct py_proc *p,
                          struct py_codecache *cc, const struct pa_layout *l, uint64_t coro,
                          struct py_frame_ref *out, uint32_t cap, uint64_t *awaited);
/* 3.6-3.10: the frame (a PyFrameObject) of coroutine coro; 0 if none. */
uint64_t pa_coro_frame_fo(const struct py_proc *p, const struct pa_layout *l, uint64_t coro);
/* The task awaiting task `child` (its bytes): directly (`await child`),
 * through gather() or through a TaskGroup. Two independent pointers must
 * agree: the future `child` completes (itself, the gather future, the
 * group's completion future) is both the parent's fut_waiter and what the
 * parent's coroutine chain is suspended on. On success parent/pbytes get
 * the parent and its bytes, chain[0..*nchain) its coroutine frames
 * (innermost first). 0 or -errno. */
int pa_awaiter(struct py_async_state *a, const struct py_proc *p, struct py_codecache *cc,
               const struct pa_layout *l, uint64_t child, const uint8_t *cbytes, uint64_t *parent,
               uint8_t *pbytes, struct py_frame_ref *chain, uint32_t cap, uint32_t *nchain);
/* Appends to out[m..cap) the tasks awaiting task (addr, bytes): per
 * ancestor its coroutine frames then its <task: NAME> (names from
 * names[first..]). Returns the new m. */
uint32_t pa_ancestors(struct py_async_scratch *s, const struct py_proc *p, struct py_codecache *cc,
                      const struct pa_layout *l, uint64_t task, const uint8_t *tbytes,
                      struct py_frame_ref *out, uint32_t m, uint32_t cap, uint32_t first);

/* asyncio_debug.c (3.14+). The struct's bytes (b, len) into d, every
 * offset checked (ob_hdr: the object header's size). 0, or -EINVAL with
 * why naming the field. */
int pa_dbg_parse(const uint8_t *b, size_t len, uint32_t ob_hdr, struct pa_dbg *d, char *why,
                 size_t whylen);
/* The process's checked offsets, found once (NULL: none yet). */
const struct pa_dbg *pa_dbg_for(struct py_async_state *a, const struct py_proc *p);
/* python_async_chain() for 3.14+, from the thread state at tstate. */
uint32_t pa_dbg_chain(struct py_async_scratch *s, const struct py_proc *p, struct py_codecache *cc,
                      const struct pa_dbg *d, uint64_t tstate, struct py_frame_ref *frames,
                      const uint64_t *faddr, uint32_t n, uint32_t cap);
/* Wall mode on 3.14+: a thread running an event loop (BaseEventLoop._run_once
 * on its stack) is remembered with its thread state (s->tstate); then every
 * task on those threads' task lists that awaits no other task and is not
 * running is given as a stack of its own on the loop's thread. */
void pa_dbg_note_loop(struct py_async_scratch *s, const struct py_proc *p, uint32_t tid,
                      const struct py_frame_ref *frames, uint32_t n);
void pa_dbg_waiting(struct py_async_scratch *s, const struct py_proc *p, struct py_codecache *cc,
                    struct py_frame_ref *frames, uint32_t cap, py_stack_fn fn, void *ctx);

#endif
