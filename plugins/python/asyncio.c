/* SPDX-License-Identifier: Apache-2.0 */
/*
 * asyncio task chains (3.6-3.13, the C Task of _asynciomodule.c).
 *
 * A thread running a task shows the event loop's Handle._run frame with the
 * task's coroutine frames above it. Handle._run's `self` (its first local)
 * is the Handle, whose _callback (the first slot after _args: CPython sorts
 * __slots__) is the task's step wrapper (TaskStepMethWrapper.sw_task) or
 * its wakeup (3.6-3.9 TaskWakeupMethWrapper.ww_task, then
 * PyCFunctionObject.m_self). That candidate is the running task only if
 * its coroutine's frame (3.11+: inside the coroutine object, at
 * gi_iframe; before: the PyFrameObject at cr_frame) is the very frame
 * above Handle._run (3.6-3.10 name it `_run`: no qualified names).
 *
 * Above it come the tasks awaiting it, found and checked as
 * asyncio_awaiter.c says (`await task`, gather(), TaskGroup), each with the
 * chain of coroutine frames it is suspended in (the line of each await)
 * and its name.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "asyncio_internal.h"
#include "polyprof/kit/remote.h"

static bool async_ends_with(const char *s, const char *tail) {
  size_t a = strlen(s), b = strlen(tail);
  return a >= b && strcmp(s + a - b, tail) == 0;
}

static int read_task(const struct py_proc *p, uint64_t addr, uint8_t *t) {
  if (!pa_plausible(addr)) return -EINVAL;
  return pp_remote_read((pid_t)p->pid, addr, t, PA_TASK_READ);
}

/* The frame a task's coroutine runs in. */
static uint64_t task_frame(const struct py_proc *p, const struct pa_layout *l,
                           const uint8_t *task) {
  uint64_t coro = pa_rd64(task, l->task_coro);
  if (l->frameobj) return pa_coro_frame_fo(p, l, coro);
  return pa_plausible(coro) ? coro + l->gen_iframe : 0;
}

uint32_t python_async_chain(struct py_async_scratch *s, const struct py_proc *p,
                            struct py_codecache *cc, struct py_frame_ref *frames,
                            const uint64_t *faddr, uint32_t n, uint32_t cap) {
  struct pa_layout l;
  if (s->a && p->off.needs_debug_offsets) {
    const struct pa_dbg *d = pa_dbg_for(s->a, p);
    return d ? pa_dbg_chain(s, p, cc, d, s->tstate, frames, faddr, n, cap) : n;
  }
  if (!s->a || !pa_layout_for(p, &l)) return n;
  const char *run = l.frameobj ? "_run" : "Handle._run";
  uint32_t k = 1;
  while (k < n && !(frames[k].code && strcmp(frames[k].code->name, run) == 0 &&
                    async_ends_with(frames[k].code->file, "/asyncio/events.py")))
    k++;
  if (k >= n) return n;
  pid_t pid = (pid_t)p->pid;
  uint64_t handle = 0, cb = 0;
  uint8_t cbo[32];
  if (pp_remote_read(pid, faddr[k] + l.fr_locals, &handle, 8) < 0 || !pa_plausible(handle) ||
      pp_remote_read(pid, handle + 24, &cb, 8) < 0 || !pa_plausible(cb) ||
      pp_remote_read(pid, cb, cbo, sizeof(cbo)) < 0)
    return n;
  /* the running task: sw_task of a step wrapper, ww_task or m_self of a
   * wakeup */
  uint8_t task[PA_TASK_READ];
  uint64_t cur = 0;
  for (uint32_t off = 16; off <= 24 && !cur; off += 8) {
    uint64_t cand = pa_rd64(cbo, off);
    if (read_task(p, cand, task) == 0 && pa_kind_of_type(s->a, p, pa_rd64(task, 8)) == PA_TASK &&
        task_frame(p, &l, task) == faddr[k - 1])
      cur = cand;
  }
  if (!cur) return n;
  s->a->epoch++; /* nothing remembered from another thread's chain */
  /* remembered for the registry of waiting tasks (asyncio_waiting.c) */
  python_async_saw_task(s, p, cur, pa_rd64(task, 8));

  memcpy(s->out, frames, k * sizeof(frames[0]));
  uint32_t m = k;
  pa_task_name(s->a, p, &l, task, s->names[0], sizeof(s->names[0]));
  s->out[m++] = (struct py_frame_ref){.pseudo = s->names[0]};
  if (m + (n - k) > cap) return n;
  m = pa_ancestors(s, p, cc, &l, cur, task, s->out, m, cap - (n - k), 1);
  memcpy(s->out + m, frames + k, (n - k) * sizeof(frames[0]));
  m += n - k;
  memcpy(frames, s->out, m * sizeof(frames[0]));
  return m;
}
