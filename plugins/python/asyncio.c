/* SPDX-License-Identifier: Apache-2.0 */
/*
 * asyncio task chains (3.11-3.13, the C Task of _asynciomodule.c).
 *
 * A thread running a task shows the event loop's Handle._run frame with the
 * task's coroutine frames above it. Handle._run's `self` (its first local)
 * is the Handle, whose _callback (the first slot after _args: CPython sorts
 * __slots__) is the task's step wrapper (TaskStepMethWrapper.sw_task) or
 * its wakeup method (PyCFunctionObject.m_self). That candidate is the
 * running task only if its coroutine's frame (inside the coroutine
 * object, at gi_iframe) is the very frame above Handle._run.
 *
 * A task B that awaits task A (`await A`) registered its wakeup method as
 * A's first done-callback (fut_callback0) and has A as its fut_waiter:
 * both are checked before B is taken as A's awaiter, so nothing read here
 * is believed unless two independent pointers agree. The chain shows each
 * awaiting task's own coroutine frame (the line of its await) and its name;
 * coroutines that task awaits inside that frame are not followed.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "polyprof/kit/remote.h"
#include "python.h"

#define TASK_READ 192 /* bytes of a TaskObj read: the fields used are below */

static bool async_plausible(uint64_t v) {
  return v >= 4096 && v < (1ull << 47) && (v & 7) == 0;
}

static uint64_t async_rd64(const uint8_t *b, uint32_t off) {
  uint64_t v;
  memcpy(&v, b + off, 8);
  return v;
}

static bool async_ends_with(const char *s, const char *tail) {
  size_t a = strlen(s), b = strlen(tail);
  return a >= b && strcmp(s + a - b, tail) == 0;
}

static int async_read_task(const struct py_proc *p, uint64_t addr, uint8_t *t) {
  if (!async_plausible(addr)) return -EINVAL;
  return pp_remote_read((pid_t)p->pid, addr, t, TASK_READ);
}

/* A task's name: a str, or (3.12+, until someone asks for it) the int N
 * of "Task-N". */
static void async_task_name(const struct py_proc *p, const uint8_t *task, char *out, size_t cap) {
  uint64_t name = async_rd64(task, p->off.task_name);
  uint8_t hdr[32];
  snprintf(out, cap, "<task: ?>");
  if (!async_plausible(name) || pp_remote_read((pid_t)p->pid, name, hdr, sizeof(hdr)) < 0) return;
  uint64_t type = async_rd64(hdr, 8);
  char text[64];
  if (p->str_type && type == p->str_type) {
    if (python_read_string(p, name, text, sizeof(text)) >= 0)
      snprintf(out, cap, "<task: %s>", text);
  } else if (p->long_type && type == p->long_type) {
    /* 3.12+: lv_tag = digits << 3 | sign; one 30-bit digit covers any
     * counter a process reaches */
    uint64_t tag = async_rd64(hdr, 16);
    uint32_t digit;
    memcpy(&digit, hdr + 24, 4);
    if (tag >> 3 == 1 && (tag & 3) == 0) snprintf(out, cap, "<task: Task-%u>", digit & 0x3fffffff);
  }
}

/* The coroutine frame of a suspended task: code and line. */
static int async_task_frame(const struct py_proc *p, struct py_codecache *cc, const uint8_t *task,
                            struct py_frame_ref *out) {
  const struct py_offsets *o = &p->off;
  uint64_t coro = async_rd64(task, o->task_coro);
  if (!async_plausible(coro)) return -EINVAL;
  uint8_t fb[PY_FRAME_READ_MAX];
  if (o->fr_read > sizeof(fb)) return -EINVAL;
  int rc = pp_remote_read((pid_t)p->pid, coro + o->gen_iframe, fb, o->fr_read);
  if (rc < 0) return rc;
  if (fb[o->fr_owner] != 1) return -EINVAL; /* FRAME_OWNED_BY_GENERATOR */
  uint64_t code = async_rd64(fb, o->fr_code);
  if (o->code_tagged) code &= ~(uint64_t)3;
  int err = 0;
  struct py_code *e = python_code_get(cc, p, code, &err);
  if (!e) return err ? err : -EINVAL;
  uint64_t ip = async_rd64(fb, o->fr_lasti), start = code + o->co_code_adaptive;
  int64_t addrq = ip >= start ? (int64_t)((ip - start) / 2) : -1;
  if (addrq > (1 << 24)) addrq = -1;
  *out = (struct py_frame_ref){.code = e, .line = python_code_line(e, o->lt_format, addrq)};
  return 0;
}

uint32_t python_async_chain(struct py_async_scratch *s, const struct py_proc *p,
                            struct py_codecache *cc, struct py_frame_ref *frames,
                            const uint64_t *faddr, uint32_t n, uint32_t cap) {
  const struct py_offsets *o = &p->off;
  if (!o->task_coro || !o->gen_iframe || !o->fr_localsplus) return n;
  uint32_t k = 1;
  while (k < n && !(frames[k].code && strcmp(frames[k].code->name, "Handle._run") == 0 &&
                    async_ends_with(frames[k].code->file, "/asyncio/events.py")))
    k++;
  if (k >= n) return n;
  pid_t pid = (pid_t)p->pid;
  uint64_t handle = 0, cb = 0;
  uint8_t cbo[32];
  if (pp_remote_read(pid, faddr[k] + o->fr_localsplus, &handle, 8) < 0 ||
      !async_plausible(handle) || pp_remote_read(pid, handle + 24, &cb, 8) < 0 ||
      !async_plausible(cb) || pp_remote_read(pid, cb, cbo, sizeof(cbo)) < 0)
    return n;
  /* the running task: sw_task of a step wrapper, m_self of a wakeup */
  uint8_t task[TASK_READ], parent[TASK_READ];
  uint64_t cur = 0;
  for (uint32_t off = 16; off <= 24 && !cur; off += 8) {
    uint64_t cand = async_rd64(cbo, off);
    if (async_read_task(p, cand, task) == 0 &&
        async_rd64(task, o->task_coro) + o->gen_iframe == faddr[k - 1])
      cur = cand;
  }
  if (!cur) return n;

  uint32_t m = 0;
  memcpy(s->out, frames, k * sizeof(frames[0]));
  m = k;
  async_task_name(p, task, s->names[0], sizeof(s->names[0]));
  s->out[m++] = (struct py_frame_ref){.pseudo = s->names[0]};
  for (uint32_t level = 1; level <= PY_ASYNC_MAX && m + 2 + (n - k) <= cap; level++) {
    uint64_t wake = async_rd64(task, 24); /* fut_callback0: the awaiter's wakeup method */
    uint8_t wo[32];
    if (!async_plausible(wake) || pp_remote_read(pid, wake, wo, sizeof(wo)) < 0) break;
    uint64_t up = async_rd64(wo, 24); /* PyCFunctionObject.m_self */
    if (up == cur || async_read_task(p, up, parent) < 0 ||
        async_rd64(parent, o->task_fut_waiter) != cur)
      break;
    struct py_frame_ref f;
    if (async_task_frame(p, cc, parent, &f) < 0) break;
    s->out[m++] = f;
    async_task_name(p, parent, s->names[level], sizeof(s->names[level]));
    s->out[m++] = (struct py_frame_ref){.pseudo = s->names[level]};
    memcpy(task, parent, sizeof(task));
    cur = up;
  }
  if (m + (n - k) > cap) return n;
  memcpy(s->out + m, frames + k, (n - k) * sizeof(frames[0]));
  m += n - k;
  memcpy(frames, s->out, m * sizeof(frames[0]));
  return m;
}
