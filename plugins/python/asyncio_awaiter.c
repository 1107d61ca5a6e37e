/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Who awaits a task (3.11-3.13). A task tells the futures waiting for it
 * through its first done-callback (fut_callback0):
 *   - `await child`: the parent's wakeup, a builtin method whose m_self is
 *     the parent; the future the parent waits for is the child itself;
 *   - gather(): the gather's _done_callback, a closure; one of its cells
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

/* The parent of future fut through fut's first callback when that is a
 * task's wakeup: 0 or -errno. */
static int wakeup_owner(struct py_async_state *a, const struct py_proc *p,
                        const struct pa_layout *l, uint64_t fut, uint64_t *parent) {
  uint64_t cb = 0, self = 0;
  if (pp_remote_read((pid_t)p->pid, fut + l->fut_cb0, &cb, 8) < 0 ||
      pa_kind_of(a, p, cb, NULL) != PA_CFUNC ||
      pp_remote_read((pid_t)p->pid, cb + 24, &self, 8) < 0)
    return -EINVAL;
  *parent = self;
  return 0;
}

/* gather(): the _GatheringFuture among the callback's closure cells, and
 * the task whose wakeup it calls. */
static int gather_parent(struct py_async_state *a, const struct py_proc *p,
                         const struct pa_layout *l, uint64_t func, uint64_t *fut,
                         uint64_t *parent) {
  pid_t pid = (pid_t)p->pid;
  uint64_t closure = 0;
  uint8_t tup[24 + 8 * CLOSURE_CELLS];
  if (pp_remote_read(pid, func + 72, &closure, 8) < 0 || !pa_plausible(closure) ||
      pp_remote_read(pid, closure, tup, sizeof(tup)) < 0)
    return -EINVAL;
  int64_t size = (int64_t)pa_rd64(tup, 16);
  if (size <= 0) return -EINVAL;
  if (size > CLOSURE_CELLS) size = CLOSURE_CELLS;
  for (int64_t i = 0; i < size; i++) {
    uint64_t cell = pa_rd64(tup, 24 + 8 * (uint32_t)i), ref = 0;
    if (!pa_plausible(cell) || pp_remote_read(pid, cell + 16, &ref, 8) < 0) continue;
    if (pa_kind_of(a, p, ref, NULL) != PA_GATHER) continue;
    *fut = ref;
    return wakeup_owner(a, p, l, ref, parent);
  }
  return -ENOENT;
}

int pa_awaiter(struct py_async_state *a, const struct py_proc *p, struct py_codecache *cc,
               const struct pa_layout *l, uint64_t child, const uint8_t *cbytes, uint64_t *parent,
               uint8_t *pbytes, struct py_frame_ref *chain, uint32_t cap, uint32_t *nchain) {
  pid_t pid = (pid_t)p->pid;
  uint64_t cb = pa_rd64(cbytes, l->fut_cb0), fut = 0, up = 0, type = 0;
  switch (pa_kind_of(a, p, cb, NULL)) {
    case PA_CFUNC: /* await child */
      if (pp_remote_read(pid, cb + 24, &up, 8) < 0) return -EFAULT;
      fut = child;
      break;
    case PA_FUNC: /* gather() */
      if (gather_parent(a, p, l, cb, &fut, &up) < 0) return -ENOENT;
      break;
    case PA_METHOD: { /* TaskGroup._on_task_done */
      uint64_t group = 0;
      if (pp_remote_read(pid, cb + 24, &group, 8) < 0 ||
          pa_kind_of(a, p, group, &type) != PA_TASKGROUP ||
          pa_attr(a, p, l, group, type, "_parent_task", &up) < 0 ||
          pa_attr(a, p, l, group, type, "_on_completed_fut", &fut) < 0)
        return -ENOENT;
      break;
    }
    default:
      return -ENOENT;
  }
  if (up == child || !pa_plausible(fut) || pa_kind_of(a, p, up, NULL) != PA_TASK ||
      pp_remote_read(pid, up, pbytes, PA_TASK_READ) < 0 ||
      pa_rd64(pbytes, p->off.task_fut_waiter) != fut)
    return -ENOENT;
  uint64_t awaited = 0;
  *nchain = pa_coro_chain(a, p, cc, l, pa_rd64(pbytes, p->off.task_coro), chain, cap, &awaited);
  if (*nchain == 0 || awaited != fut) return -ENOENT;
  *parent = up;
  return 0;
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
    pa_task_name(p, parent, s->names[level], sizeof(s->names[level]));
    out[m++] = (struct py_frame_ref){.pseudo = s->names[level]};
    memcpy(cur, parent, sizeof(cur));
    task = up;
  }
  return m;
}
