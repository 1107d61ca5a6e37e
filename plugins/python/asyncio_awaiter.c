/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Who awaits a task (3.6-3.13). A task tells the futures waiting for it
 * through its first done-callback (fut_callback0):
 *   - `await child`: the parent's wakeup, a builtin method whose m_self is
 *     the parent (3.6-3.9: a TaskWakeupMethWrapper, ww_task); the future
 *     the parent waits for is the child itself;
 *   - gather(): the gather's _done_callback, a closure (3.6: bound to
 *     the child's index by functools.partial, fn at 16); one of its cells
 *     holds the _GatheringFuture, whose own first callback is the
 *     parent's wakeup; the parent waits for that future;
 *   - TaskGroup: the group's bound _on_task_done; the group's
 *     _parent_task is the parent, waiting (in __aexit__) for the group's
 *     _on_completed_fut.
 * A candidate is the parent only if the future found that way is both its
 * fut_waiter and the future its coroutine chain is suspended on (through
 * the FutureIter of the innermost await): two pointers the parent holds,
 * independent of the path that led to it.
 */
#include <errno.h>
#include <string.h>

#include "asyncio_internal.h"
#include "polyprof/kit/remote.h"

#define CLOSURE_CELLS 8 /* gather's _done_callback closes over six names */

/* First bytes of a callable (its type at 8; ww_task at 16; m_self /
 * im_self at 24; func_closure at 48 or 72), read in one go; a short object near the end of a
 * mapping gets the header and self only. Its kind, PA_OTHER if unreadable. */
#define CALLABLE_READ 80
static enum pa_kind read_callable(struct py_async_state *a, const struct py_proc *p, uint64_t obj,
                                  uint8_t *b) {
  memset(b, 0, CALLABLE_READ);
  if (!pa_plausible(obj)) return PA_OTHER;
  if (pp_remote_read((pid_t)p->pid, obj, b, CALLABLE_READ) < 0 &&
      pp_remote_read((pid_t)p->pid, obj, b, 32) < 0)
    return PA_OTHER;
  return pa_kind_of_type(a, p, pa_rd64(b, 8));
}

/* The task of a wakeup callable of kind k (bytes cb). */
static int wakeup_task(enum pa_kind k, const uint8_t *cb, uint64_t *task) {
  if (k == PA_CFUNC)
    *task = pa_rd64(cb, 24); /* m_self */
  else if (k == PA_WAKEUP)
    *task = pa_rd64(cb, 16); /* ww_task */
  else
    return -ENOENT;
  return 0;
}

/* gather(): the _GatheringFuture among the callback's closure cells, and
 * the task whose wakeup it calls. */
static int gather_parent(struct py_async_state *a, const struct py_proc *p,
                         const struct pa_layout *l, uint64_t closure, uint64_t *fut,
                         uint64_t *parent) {
  pid_t pid = (pid_t)p->pid;
  uint8_t tup[24 + 8 * CLOSURE_CELLS];
  if (!pa_plausible(closure) || pp_remote_read(pid, closure, tup, sizeof(tup)) < 0) return -EINVAL;
  int64_t size = (int64_t)pa_rd64(tup, 16);
  if (size <= 0) return -EINVAL;
  if (size > CLOSURE_CELLS) size = CLOSURE_CELLS;
  for (int64_t i = 0; i < size; i++) {
    uint64_t cell = pa_rd64(tup, 24 + 8 * (uint32_t)i), ref = 0;
    if (!pa_plausible(cell) || pp_remote_read(pid, cell + 16, &ref, 8) < 0) continue;
    uint8_t f[32], cb[CALLABLE_READ];
    if (!pa_plausible(ref) || pp_remote_read(pid, ref, f, sizeof(f)) < 0 ||
        pa_kind_of_type(a, p, pa_rd64(f, 8)) != PA_GATHER)
      continue;
    /* the gather future's first callback: the awaiting task's wakeup */
    uint64_t up = 0;
    if (wakeup_task(read_callable(a, p, pa_first_callback(p, l, f), cb), cb, &up) < 0)
      return -ENOENT;
    *fut = ref;
    *parent = up;
    return 0;
  }
  return -ENOENT;
}

static int find_awaiter(struct py_async_state *a, const struct py_proc *p, struct py_codecache *cc,
                        const struct pa_layout *l, uint64_t child, uint64_t callback,
                        uint64_t *parent, uint8_t *pbytes, struct py_frame_ref *chain, uint32_t cap,
                        uint32_t *nchain) {
  pid_t pid = (pid_t)p->pid;
  uint8_t cb[CALLABLE_READ];
  uint64_t fut = 0, up = 0, type = 0;
  enum pa_kind kind = read_callable(a, p, callback, cb);
  switch (kind) {
    case PA_CFUNC: /* await child: the wakeup's task */
    case PA_WAKEUP:
      wakeup_task(kind, cb, &up);
      fut = child;
      break;
    case PA_PARTIAL: /* 3.6's gather(): partial(_done_callback, i) */
    case PA_FUNC:    /* gather() */
      if ((kind == PA_PARTIAL && read_callable(a, p, pa_rd64(cb, 16), cb) != PA_FUNC) ||
          gather_parent(a, p, l, pa_rd64(cb, l->func_closure), &fut, &up) < 0)
        return -ENOENT;
      break;
    case PA_METHOD: { /* TaskGroup._on_task_done: im_self is the group */
      uint64_t group = pa_rd64(cb, 24);
      if (pa_kind_of(a, p, group, &type) != PA_TASKGROUP ||
          pa_attr(a, p, l, group, type, "_parent_task", &up) < 0 ||
          pa_attr(a, p, l, group, type, "_on_completed_fut", &fut) < 0)
        return -ENOENT;
      break;
    }
    default:
      return -ENOENT;
  }
  if (up == child || !pa_plausible(fut) || !pa_plausible(up) ||
      pp_remote_read(pid, up, pbytes, PA_TASK_READ) < 0 ||
      pa_kind_of_type(a, p, pa_rd64(pbytes, 8)) != PA_TASK ||
      pa_rd64(pbytes, l->task_waiter) != fut)
    return -ENOENT;
  uint64_t awaited = 0;
  *nchain = pa_coro_chain(a, p, cc, l, pa_rd64(pbytes, l->task_coro), chain, cap, &awaited);
  if (*nchain == 0 || awaited != fut) return -ENOENT;
  *parent = up;
  return 0;
}

int pa_awaiter(struct py_async_state *a, const struct py_proc *p, struct py_codecache *cc,
               const struct pa_layout *l, uint64_t child, const uint8_t *cbytes, uint64_t *parent,
               uint8_t *pbytes, struct py_frame_ref *chain, uint32_t cap, uint32_t *nchain) {
  uint64_t callback = pa_first_callback(p, l, cbytes);
  if (!pa_plausible(callback)) return -ENOENT;
  /* the tasks of one gather() or TaskGroup share one done-callback: what
   * it led to in this sample, found or not, is not looked for again */
  for (uint32_t i = 0; i < PA_AWAITERS; i++) {
    if (a->awaiters[i].epoch != a->epoch || a->awaiters[i].callback != callback) continue;
    if (!a->awaiters[i].parent || a->awaiters[i].parent == child || a->awaiters[i].nchain > cap)
      return -ENOENT;
    *parent = a->awaiters[i].parent;
    memcpy(pbytes, a->awaiters[i].pbytes, PA_TASK_READ);
    *nchain = a->awaiters[i].nchain;
    memcpy(chain, a->awaiters[i].chain, *nchain * sizeof(chain[0]));
    return 0;
  }
  int rc = find_awaiter(a, p, cc, l, child, callback, parent, pbytes, chain,
                        cap < PY_ASYNC_CORO_MAX ? cap : PY_ASYNC_CORO_MAX, nchain);
  uint32_t slot = a->next_awaiter++ % PA_AWAITERS;
  a->awaiters[slot].epoch = a->epoch;
  a->awaiters[slot].callback = callback;
  a->awaiters[slot].parent = rc == 0 ? *parent : 0;
  a->awaiters[slot].nchain = rc == 0 ? *nchain : 0;
  if (rc == 0) {
    memcpy(a->awaiters[slot].pbytes, pbytes, PA_TASK_READ);
    memcpy(a->awaiters[slot].chain, chain, *nchain * sizeof(chain[0]));
  }
  return rc;
}

uint32_t pa_ancestors(struct py_async_scratch *s, const struct py_proc *p, struct py_codecache *cc,
                      const struct pa_layout *l, uint64_t task, const uint8_t *tbytes,
                      struct py_frame_ref *out, uint32_t m, uint32_t cap, uint32_t first) {
  uint8_t cur[PA_TASK_READ], parent[PA_TASK_READ];
  struct py_frame_ref chain[PY_ASYNC_CORO_MAX];
  memcpy(cur, tbytes, sizeof(cur));
  for (uint32_t level = first; level <= PY_ASYNC_MAX; level++) {
    uint64_t up = 0;
    uint32_t nchain = 0;
    if (pa_awaiter(s->a, p, cc, l, task, cur, &up, parent, chain, PY_ASYNC_CORO_MAX, &nchain) < 0 ||
        m + nchain + 1 > cap)
      break;
    memcpy(out + m, chain, nchain * sizeof(chain[0]));
    m += nchain;
    pa_task_name(s->a, p, l, parent, s->names[level], sizeof(s->names[level]));
    out[m++] = (struct py_frame_ref){.pseudo = s->names[level]};
    memcpy(cur, parent, sizeof(cur));
    task = up;
  }
  return m;
}
