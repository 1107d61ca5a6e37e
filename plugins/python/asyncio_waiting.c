/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Wall mode: the asyncio tasks no thread runs (3.6-3.13).
 *
 * A task waiting for something is on no thread's stack, so the tasks are
 * read from asyncio's registry of all tasks, a WeakSet: its `data` set
 * holds a weak reference to each task. Where it is:
 *   3.12, 3.13  the _asyncio module's state (scheduled_tasks), reached from
 *               a Task's type (a heap type: ht_module, md_state), and only
 *               believed if that state's TaskType is the very type;
 *   3.6-3.11    _asynciomodule.c's static all_tasks, from the .symtab of
 *               the _asyncio extension the process maps; where that is
 *               stripped (Debian's) or built in, from a task's weak
 *               references (registry_from_task).
 * The task to start from comes from a sample that found one running, or
 * is the future BaseEventLoop.run_until_complete was given (asyncio.run's
 * main task). The eager-task set is not read: a task is in it only while its
 * first step runs, and a running task is on its thread's stack.
 *
 * A thread running an event loop has BaseEventLoop._run_once (3.6-3.10:
 * _run_once, no qualified names) on its stack,
 * whose `self` is the loop. Every task of that loop that waits for a
 * future which is not another task or a gather (those tasks appear above
 * the tasks they wait for) gives one stack: its coroutine chain (down to
 * the await that suspends it, which must be suspended on its fut_waiter),
 * its <task: NAME>, the tasks awaiting it, then the loop thread's frames
 * from _run_once to the root; attributed to that thread with the weight
 * of the sample. At most PA_TASKS_MAX tasks are read a sample: a larger
 * registry is read in a rotating window (and counted), so each task is
 * seen as often as the others over a session.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asyncio_internal.h"
#include "polyprof/kit/elf_lookup.h"
#include "polyprof/kit/remote.h"

#define TABLE_SCAN 1024 /* set slots looked at a sample */
#define TABLE_CHUNK 256 /* slots a read */

struct py_async_state *python_async_state_new(uint32_t max_depth) {
  struct py_async_state *a = calloc(1, sizeof(*a));
  if (!a) return NULL;
  for (uint32_t i = 0; i < PA_LOOPS; i++) {
    a->loops[i].prefix = calloc(max_depth + 1, sizeof(struct py_frame_ref));
    if (!a->loops[i].prefix) {
      python_async_state_free(a);
      return NULL;
    }
  }
  a->max_depth = max_depth;
  return a;
}

void python_async_state_free(struct py_async_state *a) {
  if (!a) return;
  for (uint32_t i = 0; i < PA_LOOPS; i++)
    free(a->loops[i].prefix);
  free(a);
}

void python_async_counters(struct py_async_scratch *s, uint64_t *passes, uint64_t *over) {
  *passes = *over = 0;
  if (!s->a) return;
  *passes = s->a->passes;
  *over = s->a->tasks_over;
  s->a->passes = s->a->tasks_over = 0;
}

static bool ends_with(const char *s, const char *tail) {
  size_t a = strlen(s), b = strlen(tail);
  return a >= b && strcmp(s + a - b, tail) == 0;
}

static struct pa_registry *registry_of(struct py_async_state *a, const struct py_proc *p) {
  for (uint32_t i = 0; i < a->nregs; i++)
    if (a->regs[i].pid == p->pid && a->regs[i].runtime == p->runtime) return &a->regs[i];
  uint32_t slot = a->nregs < PA_REGISTRIES ? a->nregs++ : (a->next_reg++ % PA_REGISTRIES);
  a->regs[slot] = (struct pa_registry){.pid = p->pid, .runtime = p->runtime};
  return &a->regs[slot];
}

void python_async_saw_task(struct py_async_scratch *s, const struct py_proc *p, uint64_t task,
                           uint64_t type) {
  if (!s->a || !pa_plausible(type)) return;
  struct pa_registry *r = registry_of(s->a, p);
  if (r->set) return; /* found already */
  /* the registry is _asyncio's: found from _asyncio.Task, whatever class
   * derived from it the task has */
  uint64_t base = pa_task_base(s->a, p, type);
  if (!base) return;
  r->task = task; /* the latest: the likeliest to be alive */
  if (r->task_type != base) {
    r->task_type = base;
    r->retry_at = 0; /* something to start from: look again now */
  }
}

void python_async_begin(struct py_async_scratch *s) {
  if (!s->a) return;
  s->a->nloops = 0;
  s->a->epoch++;
}

void python_async_note_loop(struct py_async_scratch *s, const struct py_proc *p, uint32_t tid,
                            const struct py_frame_ref *frames, const uint64_t *faddr, uint32_t n) {
  struct py_async_state *a = s->a;
  struct pa_layout l;
  if (a && p->off.needs_debug_offsets) {
    pa_dbg_note_loop(s, p, tid, frames, n);
    return;
  }
  if (!a || a->nloops >= PA_LOOPS || !pa_layout_for(p, &l)) return;
  /* 3.6-3.10 have no qualified names */
  const char *run_once = l.frameobj ? "_run_once" : "BaseEventLoop._run_once";
  const char *run_until = l.frameobj ? "run_until_complete" : "BaseEventLoop.run_until_complete";
  for (uint32_t k = 0; k < n; k++) {
    const struct py_code *c = frames[k].code;
    if (!c || !ends_with(c->file, "/asyncio/base_events.py")) continue;
    if (strcmp(c->name, run_once) == 0) {
      uint64_t loop = 0;
      if (pp_remote_read((pid_t)p->pid, faddr[k] + l.fr_locals, &loop, 8) < 0 ||
          !pa_plausible(loop) || n - k > a->max_depth)
        return;
      a->loops[a->nloops].tid = tid;
      a->loops[a->nloops].loop = loop;
      a->loops[a->nloops].n = n - k;
      memcpy(a->loops[a->nloops].prefix, frames + k, (n - k) * sizeof(frames[0]));
      a->nloops++;
    } else if (strcmp(c->name, run_until) == 0) {
      struct pa_registry *r = registry_of(a, p);
      uint64_t fut = 0, type = 0;
      if (r->task || pp_remote_read((pid_t)p->pid, faddr[k] + l.fr_locals + 8, &fut, 8) < 0)
        continue;
      if (pa_kind_of(a, p, fut, &type) == PA_TASK) python_async_saw_task(s, p, fut, type);
    }
  }
}

/* The registry's WeakSet -> its data set. */
static int registry_set(struct py_async_state *a, const struct py_proc *p,
                        const struct pa_layout *l, uint64_t weakset, struct pa_registry *r) {
  uint64_t type = 0, set = 0, set_type = 0;
  if (pa_kind_of(a, p, weakset, &type) != PA_WEAKSET ||
      pa_attr(a, p, l, weakset, type, "data", &set) < 0 ||
      pa_kind_of(a, p, set, &set_type) != PA_SET)
    return -ENOENT;
  r->set = set;
  r->set_type = set_type;
  return 0;
}

/* 3.6-3.11 without symbols: a WeakSet holding a task holds a weak reference
 * to it (on the task's list of weak references) whose callback is the
 * set's _remove function, whose default argument is a weak reference to
 * the set itself. Only a WeakSet reached that way, through a task asyncio
 * created (asyncio.run's main task), is taken. */
#define WEAKREFS_WALKED 16
static int registry_from_task(struct py_async_state *a, const struct py_proc *p,
                              const struct pa_layout *l, struct pa_registry *r) {
  pid_t pid = (pid_t)p->pid;
  uint8_t t[PA_TASK_READ];
  if (!pa_plausible(r->task) || pp_remote_read(pid, r->task, t, sizeof(t)) < 0 ||
      pa_kind_of_type(a, p, pa_rd64(t, 8)) != PA_TASK)
    return -ENOENT;
  uint64_t ref = pa_rd64(t, l->fut_weakreflist);
  for (int i = 0; i < WEAKREFS_WALKED && pa_plausible(ref); i++) {
    uint8_t w[56], f[64], d[32], sr[24];
    if (pp_remote_read(pid, ref, w, sizeof(w)) < 0 || pa_rd64(w, 16) != r->task) break;
    uint64_t cb = pa_rd64(w, 24), defaults = 0;
    if (pa_plausible(cb) && pp_remote_read(pid, cb, f, sizeof(f)) == 0 &&
        pa_kind_of_type(a, p, pa_rd64(f, 8)) == PA_FUNC &&
        pa_plausible(defaults = pa_rd64(f, l->func_defaults)) &&
        pp_remote_read(pid, defaults, d, 32) == 0 && pa_rd64(d, 16) == 1 &&
        pp_remote_read(pid, pa_rd64(d, 24), sr, sizeof(sr)) == 0 &&
        pa_kind_of_type(a, p, pa_rd64(sr, 8)) == PA_WEAKREF &&
        registry_set(a, p, l, pa_rd64(sr, 16), r) == 0)
      return 0;
    ref = pa_rd64(w, 48); /* wr_next */
  }
  return -ENOENT;
}

/* 3.6-3.11: the static all_tasks of the _asyncio extension */
static int registry_static(struct py_async_state *a, const struct py_proc *p,
                           const struct pa_layout *l, struct pa_registry *r) {
  struct pp_module m;
  char pattern[40];
  snprintf(pattern, sizeof(pattern), "_asyncio.cpython-3%u*.so", (unsigned)l->minor);
  if (pp_find_module(p->pid, pattern, &m, NULL, 0) < 0)
    return registry_from_task(a, p, l, r); /* built in, or not loaded yet */
  static const char *const names[] = {"all_tasks", "TaskType"};
  uint64_t v[2] = {0, 0};
  int found = pp_elf_lookup_symbols(m.fd, names, 2, 0, v, NULL);
  uint64_t bias = m.bias;
  pp_module_close(&m);
  if (found < 2 || !v[0] || !v[1]) return registry_from_task(a, p, l, r); /* stripped */
  uint64_t weakset = 0;
  if (r->task_type && r->task_type != v[1] + bias) return -EINVAL; /* not this module's Task */
  if (pp_remote_read((pid_t)p->pid, v[0] + bias, &weakset, 8) < 0) return -EFAULT;
  return registry_set(a, p, l, weakset, r);
}

static int registry_312(struct py_async_state *a, const struct py_proc *p,
                        const struct pa_layout *l, struct pa_registry *r) {
  pid_t pid = (pid_t)p->pid;
  uint64_t mod = 0, state = 0;
  uint8_t st[64];
  if (!r->task_type || pp_remote_read(pid, r->task_type + l->type_module, &mod, 8) < 0 ||
      pa_kind_of(a, p, mod, NULL) != PA_MODULE ||
      pp_remote_read(pid, mod + l->mod_state, &state, 8) < 0 || !pa_plausible(state) ||
      pp_remote_read(pid, state, st, sizeof(st)) < 0 ||
      pa_rd64(st, l->st_task_type) != r->task_type)
    return -ENOENT;
  return registry_set(a, p, l, pa_rd64(st, l->st_scheduled), r);
}

/* Up to PA_TASKS_MAX weak references from the set's table, starting at
 * the registry's cursor. Returns how many; *partial when the set holds
 * more than one pass reads. */
static uint32_t collect_refs(struct py_async_state *a, const struct py_proc *p,
                             struct pa_registry *r, bool *partial) {
  pid_t pid = (pid_t)p->pid;
  uint8_t hdr[48];
  uint64_t ent[2 * TABLE_CHUNK];
  *partial = false;
  /* the table where the last pass found it, read with the header: used
   * only if the header still says so */
  uint64_t guess_len = r->size - r->cursor < TABLE_CHUNK ? r->size - r->cursor : TABLE_CHUNK;
  bool guessed = false;
  if (r->table && r->cursor < r->size) {
    struct pp_remote_iov iov[2] = {{r->set, hdr, sizeof(hdr)},
                                   {r->table + (uint64_t)r->cursor * 16, ent, guess_len * 16}};
    guessed = pp_remote_readv(pid, iov, 2) == 0;
  }
  if (!guessed && pp_remote_read(pid, r->set, hdr, sizeof(hdr)) < 0) hdr[8] = 0xff;
  if (pa_rd64(hdr, 8) != r->set_type) {
    r->set = r->table = 0; /* freed or replaced: found again */
    return 0;
  }
  int64_t used = (int64_t)pa_rd64(hdr, 24);
  uint64_t mask = pa_rd64(hdr, 32), table = pa_rd64(hdr, 40);
  if (used <= 0 || mask >= (1u << 24) || ((mask + 1) & mask) || !pa_plausible(table)) return 0;
  uint64_t size = mask + 1, scan = size < TABLE_SCAN ? size : TABLE_SCAN;
  guessed = guessed && table == r->table && size == r->size;
  r->table = table;
  r->size = size;
  if (r->cursor >= size) r->cursor = 0;
  uint32_t n = 0, seen = 0;
  while (seen < scan && n < PA_TASKS_MAX) {
    uint64_t at = r->cursor, len = size - at;
    if (len > TABLE_CHUNK) len = TABLE_CHUNK;
    if (len > scan - seen) len = scan - seen;
    if (guessed && len <= guess_len) {
      guessed = false; /* the first chunk came with the header */
    } else if (pp_remote_read(pid, table + at * 16, ent, len * 16) < 0) {
      return n;
    }
    uint64_t i = 0;
    for (; i < len && n < PA_TASKS_MAX; i++) {
      uint64_t key = ent[2 * i];
      /* empty, or a removed entry (the dummy key, hash -1) */
      if (key && ent[2 * i + 1] != UINT64_MAX && pa_plausible(key)) a->keys[n++] = key;
    }
    seen += (uint32_t)i;
    r->cursor = (uint32_t)((at + i) % size);
  }
  *partial = seen < size || (int64_t)n < used;
  return n;
}

/* Reads the m tasks at a->objs into a->tasks (dropping unreadable ones);
 * returns how many were read. */
static uint32_t read_task_bodies(struct py_async_state *a, const struct py_proc *p, uint32_t m) {
  pid_t pid = (pid_t)p->pid;
  struct pp_remote_iov iov[PA_TASKS_MAX];
  if (m == 0 || m > PA_TASKS_MAX) return 0;
  for (uint32_t i = 0; i < m; i++)
    iov[i] = (struct pp_remote_iov){a->objs[i], a->tasks[i], PA_TASK_READ};
  if (pp_remote_readv(pid, iov, m) == 0) return m;
  uint32_t k = 0;
  for (uint32_t i = 0; i < m; i++)
    if (pp_remote_read(pid, a->objs[i], a->tasks[k], PA_TASK_READ) == 0) a->objs[k++] = a->objs[i];
  return k;
}

/* Reads the tasks the weak references point to, into a->objs/a->tasks;
 * returns how many were read. */
static uint32_t read_tasks(struct py_async_state *a, const struct py_proc *p, uint32_t n) {
  pid_t pid = (pid_t)p->pid;
  struct pp_remote_iov iov[PA_TASKS_MAX] = {{0, NULL, 0}};
  if (n == 0 || n > PA_TASKS_MAX) return 0;
  /* the same weak references as the last pass (of this process): the
   * same tasks (a dead task's reference leaves the set at once) */
  if (a->memo_pid == p->pid && a->memo_n == n && memcmp(a->memo_keys, a->keys, n * 8) == 0) {
    memcpy(a->objs, a->memo_objs, a->memo_m * 8);
    return read_task_bodies(a, p, a->memo_m);
  }
  a->memo_n = 0;
  for (uint32_t i = 0; i < n; i++)
    iov[i] = (struct pp_remote_iov){a->keys[i], a->wref[i], 24};
  bool batch = pp_remote_readv(pid, iov, n) == 0;
  uint32_t m = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (!batch && pp_remote_read(pid, a->keys[i], a->wref[i], 24) < 0) continue;
    uint64_t obj = pa_rd64(a->wref[i], 16); /* wr_object */
    if (pa_plausible(obj)) a->objs[m++] = obj;
  }
  if (m == 0) return 0;
  a->memo_pid = p->pid;
  a->memo_n = n;
  a->memo_m = m;
  memcpy(a->memo_keys, a->keys, n * 8);
  memcpy(a->memo_objs, a->objs, m * 8);
  return read_task_bodies(a, p, m);
}

void python_async_waiting(struct py_async_scratch *s, const struct py_proc *p,
                          struct py_codecache *cc, struct py_frame_ref *frames, uint32_t cap,
                          py_stack_fn fn, void *ctx) {
  struct py_async_state *a = s->a;
  struct pa_layout l;
  if (a && p->off.needs_debug_offsets) {
    pa_dbg_waiting(s, p, cc, frames, cap, fn, ctx);
    return;
  }
  if (!a || !a->nloops || !pa_layout_for(p, &l)) return;
  struct pa_registry *r = registry_of(a, p);
  a->epoch++; /* the threads' chains were read a moment ago: read afresh */
  a->samples++;
  a->passes++;
  if (!r->set) {
    if (a->samples < r->retry_at) return;
    int rc = l.minor <= 11 ? registry_static(a, p, &l, r) : registry_312(a, p, &l, r);
    if (rc < 0) {
      r->retry_at = a->samples + PA_RETRY_SAMPLES;
      return;
    }
  }
  bool partial = false;
  uint32_t n = collect_refs(a, p, r, &partial);
  if (partial) a->tasks_over++;
  n = read_tasks(a, p, n);
  /* the pending tasks of a loop a thread runs that wait for something;
   * then what each waits for, its header only, in one read */
  uint32_t cand[PA_TASKS_MAX], loop_of[PA_TASKS_MAX], nc = 0;
  struct pp_remote_iov iov[PA_TASKS_MAX];
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t *t = a->tasks[i];
    if (pa_kind_of_type(a, p, pa_rd64(t, 8)) != PA_TASK) continue;
    int32_t state;
    memcpy(&state, t + l.fut_state, 4);
    uint64_t waiter = pa_rd64(t, l.task_waiter), loop = pa_rd64(t, l.fut_loop);
    if (state != 0 || !pa_plausible(waiter)) continue; /* done, or running / about to run */
    uint32_t li = 0;
    while (li < a->nloops && a->loops[li].loop != loop)
      li++;
    if (li == a->nloops) continue; /* a loop no thread runs now */
    loop_of[nc] = li;
    iov[nc] = (struct pp_remote_iov){waiter, a->wref[nc], 16};
    cand[nc++] = i;
  }
  if (nc == 0) return;
  bool batch = pp_remote_readv((pid_t)p->pid, iov, nc) == 0;
  for (uint32_t c = 0; c < nc; c++) {
    uint32_t i = cand[c], li = loop_of[c];
    const uint8_t *t = a->tasks[i];
    if (!batch && pp_remote_read((pid_t)p->pid, pa_rd64(t, l.task_waiter), a->wref[c], 16) < 0)
      continue;
    enum pa_kind wk = pa_kind_of_type(a, p, pa_rd64(a->wref[c], 8));
    if (wk == PA_TASK || wk == PA_GATHER) continue; /* shown above what it waits for */
    uint32_t rest = a->loops[li].n;
    if (cap < rest + PY_ASYNC_CORO_MAX + 1) continue;
    uint64_t awaited = 0;
    uint32_t m =
        pa_coro_chain(a, p, cc, &l, pa_rd64(t, l.task_coro), frames, PY_ASYNC_CORO_MAX, &awaited);
    if (m == 0 || awaited != pa_rd64(t, l.task_waiter)) continue;
    pa_task_name(s->a, p, &l, t, s->names[0], sizeof(s->names[0]));
    frames[m++] = (struct py_frame_ref){.pseudo = s->names[0]};
    m = pa_ancestors(s, p, cc, &l, a->objs[i], t, frames, m, cap - rest, 1);
    memcpy(frames + m, a->loops[li].prefix, rest * sizeof(frames[0]));
    fn(ctx, a->loops[li].tid, frames, m + rest, false);
  }
}
