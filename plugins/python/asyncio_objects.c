/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Objects the asyncio readers meet (3.6-3.13): what kind an object is,
 * an instance attribute of a Python class (object_reader.c), a task's
 * name, and the chain of coroutines a coroutine awaits.
 *
 * Kinds come from the type's tp_name, read once per type and process (a
 * bounded table): nothing is taken to be a Task, a coroutine or a
 * FutureIter because it sits where one should be.
 *
 * A coroutine suspended in `await x` keeps x on top of its frame's value
 * stack (CPython's _PyGen_yf reads it the same way): 3.13 says so in the
 * generator's state (FRAME_SUSPENDED_YIELD_FROM), 3.11 and 3.12 by the
 * instruction after the one it stopped at (RESUME with an oparg of 2 or
 * more). x is followed while it is a coroutine; a FutureIter names the
 * future the chain waits for.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asyncio_internal.h"
#include "polyprof/kit/remote.h"

#define STACK_PEEK 128 /* bytes of value stack read with a coroutine */

bool pa_plausible(uint64_t v) {
  return v >= 4096 && v < (1ull << 47) && (v & 7) == 0;
}

uint64_t pa_rd64(const uint8_t *b, uint32_t off) {
  uint64_t v;
  memcpy(&v, b + off, 8);
  return v;
}

uint64_t pa_first_callback(const struct py_proc *p, const struct pa_layout *l, const uint8_t *fut) {
  uint64_t cb = pa_rd64(fut, l->fut_cb0);
  if (!l->cb_list) return cb;
  /* PyListObject: ob_size 16, ob_item 24 */
  uint64_t list[4], first = 0;
  if (!pa_plausible(cb) || pp_remote_read((pid_t)p->pid, cb, list, sizeof(list)) < 0 ||
      (int64_t)list[2] < 1 || !pa_plausible(list[3]) ||
      pp_remote_read((pid_t)p->pid, list[3], &first, 8) < 0)
    return 0;
  return first;
}

/* sizeof(TaskObj) (tp_basicsize of _asyncio.Task), 3.6 to 3.13 */
static const uint16_t task_sizes[] = {112, 136, 144, 184, 192, 176, 176, 144};

bool pa_layout_for(const struct py_proc *p, struct pa_layout *l) {
  if (p->major != 3 || p->minor < 6 || p->minor > 13) return false;
  uint32_t minor = p->minor;
  *l = (struct pa_layout){
      .fut_loop = 16, .fut_cb0 = 24, .task_size = task_sizes[minor - 6], .minor = (uint8_t)minor};
  if (minor <= 10) {
    /* TaskObj: fut_state, then (3.9+) the cancelled exception's state
     * before fut_waiter, coro, name (3.8+); 3.6 has a list of callbacks
     * where callback0 came later */
    static const uint16_t state[] = {56, 72, 72, 80, 88}, weakrefs[] = {80, 96, 96, 104, 112},
                          waiter[] = {88, 104, 104, 144, 152};
    l->frameobj = true;
    l->cb_list = minor == 6;
    l->fut_state = state[minor - 6];
    l->fut_weakreflist = weakrefs[minor - 6];
    l->task_waiter = waiter[minor - 6];
    l->task_coro = l->task_waiter + 8;
    l->task_name = minor <= 7 ? 0 : l->task_waiter + 16;
    l->coro_qualname = 56;             /* 3.6/3.7: a task is named by its coroutine */
    l->co_code = minor <= 7 ? 40 : 48; /* PyCodeObject.co_code */
    l->gen_frame = 16;
    l->fr_locals = minor == 6 ? 376 : minor == 10 ? 352 : 360; /* PyFrameObject.f_localsplus */
    l->f_valuestack = 64;
    if (minor == 10) {
      l->f_stackdepth = 80;
      l->f_state = 108;
    } else {
      l->f_stacktop = 72;
    }
    l->func_closure = minor == 10 ? 72 : 48;
    l->func_defaults = minor == 10 ? 56 : 32;
    return true;
  }
  const struct py_offsets *o = &p->off;
  if (!o->task_coro || !o->gen_iframe || !o->fr_localsplus) return false;
  l->task_waiter = o->task_fut_waiter;
  l->task_coro = o->task_coro;
  l->task_name = o->task_name;
  l->gen_iframe = o->gen_iframe;
  l->fr_locals = o->fr_localsplus;
  l->fr_stacktop = 64;
  l->fut_state = minor == 13 ? 96 : 88;
  l->fut_weakreflist = minor == 13 ? 0 : 112;
  l->func_closure = 72;
  l->func_defaults = 56;
  l->type_module = minor == 11 ? 0 : 888;
  l->mod_state = 32;
  l->st_task_type = 24;
  l->st_scheduled = 56;
  l->gen_state = minor == 11 ? 75 : 67;
  if (minor == 13) {
    l->st_await = -1; /* FRAME_SUSPENDED_YIELD_FROM */
  } else {
    l->st_await = -1; /* FRAME_SUSPENDED, and the next instruction says await */
    l->resume_op = 151;
    l->resume_op2 = minor == 11 ? 150 : 240; /* RESUME_QUICK, INSTRUMENTED_RESUME */
  }
  return true;
}

static const struct {
  const char *name;
  enum pa_kind kind;
} kind_names[] = {
    {"_asyncio.Task", PA_TASK},
    {"_asyncio.Future", PA_FUTURE},
    {"_GatheringFuture", PA_GATHER},
    {"_asyncio.FutureIter", PA_FUTUREITER},
    {"coroutine", PA_CORO},
    {"builtin_function_or_method", PA_CFUNC},
    {"function", PA_FUNC},
    {"method", PA_METHOD},
    {"TaskGroup", PA_TASKGROUP},
    {"WeakSet", PA_WEAKSET},
    {"set", PA_SET},
    {"weakref.ReferenceType", PA_WEAKREF},
    {"weakref", PA_WEAKREF}, /* its name before 3.10 */
    {"module", PA_MODULE},
    {"TaskWakeupMethWrapper", PA_WAKEUP},
    {"dict", PA_DICT},
    {"generator", PA_GENERATOR},
    {"functools.partial", PA_PARTIAL},
};

/* A type's bytes read to classify it: tp_name (24), tp_basicsize (32),
 * tp_base (256) */
#define TYPE_READ 264
#define BASES_WALKED 8 /* classes between a task's class and _asyncio.Task */

static enum pa_kind kind_by_name(const struct py_proc *p, const uint8_t *t) {
  char name[40];
  uint64_t tp_name = pa_rd64(t, 24);
  if (tp_name < 4096 || pp_remote_read_str((pid_t)p->pid, tp_name, name, sizeof(name)) < 0)
    return PA_UNKNOWN;
  for (size_t i = 0; i < sizeof(kind_names) / sizeof(kind_names[0]); i++)
    if (strcmp(name, kind_names[i].name) == 0) return kind_names[i].kind;
  return PA_OTHER;
}

/* Is the type whose bytes are t the _asyncio.Task of this version? */
static bool is_task_type(const struct py_proc *p, const uint8_t *t) {
  struct pa_layout l;
  return pa_layout_for(p, &l) && pa_rd64(t, 32) == l.task_size;
}

/* Classifies type (bytes t); *base gets the _asyncio.Task of a task type.
 * PA_UNKNOWN when unreadable. */
static enum pa_kind classify(const struct py_proc *p, uint64_t type, const uint8_t *t,
                             uint64_t *base) {
  enum pa_kind kind = kind_by_name(p, t);
  *base = 0;
  if (kind == PA_TASK) {
    if (!is_task_type(p, t)) return PA_OTHER;
    *base = type;
    return kind;
  }
  if (kind != PA_OTHER) return kind;
  /* a Python class derived from the Task: its instances are TaskObjs */
  uint8_t b[TYPE_READ];
  uint64_t up = pa_rd64(t, 256);
  for (int i = 0; i < BASES_WALKED && pa_plausible(up) && up != type; i++) {
    if (pp_remote_read((pid_t)p->pid, up, b, sizeof(b)) < 0) return PA_UNKNOWN;
    enum pa_kind k = kind_by_name(p, b);
    if (k == PA_UNKNOWN) return PA_UNKNOWN;
    if (k == PA_TASK) {
      if (!is_task_type(p, b)) return PA_OTHER;
      *base = up;
      return PA_TASK;
    }
    up = pa_rd64(b, 256);
  }
  return PA_OTHER;
}

static int type_slot(struct py_async_state *a, const struct py_proc *p, uint64_t type) {
  if (!pa_plausible(type)) return -EINVAL;
  for (uint32_t i = 0; i < a->ntypes; i++)
    if (a->types[i].type == type && a->types[i].pid == p->pid) return (int)i;
  uint8_t t[TYPE_READ];
  uint64_t base = 0;
  enum pa_kind kind = PA_UNKNOWN;
  if (pp_remote_read((pid_t)p->pid, type, t, sizeof(t)) == 0) kind = classify(p, type, t, &base);
  if (kind == PA_UNKNOWN)
    return -EFAULT; /* not remembered: unreadable now is not "other" forever */
  uint32_t slot = a->ntypes < PA_TYPES ? a->ntypes++ : (a->next_type++ % PA_TYPES);
  a->types[slot].pid = p->pid;
  a->types[slot].type = type;
  a->types[slot].kind = (uint8_t)kind;
  a->types[slot].base = base;
  return (int)slot;
}

enum pa_kind pa_kind_of_type(struct py_async_state *a, const struct py_proc *p, uint64_t type) {
  int i = type_slot(a, p, type);
  return i < 0 ? PA_OTHER : (enum pa_kind)a->types[i].kind;
}

uint64_t pa_task_base(struct py_async_state *a, const struct py_proc *p, uint64_t type) {
  int i = type_slot(a, p, type);
  return i < 0 || a->types[i].kind != PA_TASK ? 0 : a->types[i].base;
}

enum pa_kind pa_kind_of(struct py_async_state *a, const struct py_proc *p, uint64_t obj,
                        uint64_t *type) {
  uint64_t t = 0;
  if (type) *type = 0;
  if (!pa_plausible(obj) || pp_remote_read((pid_t)p->pid, obj + 8, &t, 8) < 0) return PA_OTHER;
  if (type) *type = t;
  return pa_kind_of_type(a, p, t);
}

int pa_attr(struct py_async_state *a, const struct py_proc *p, const struct pa_layout *l,
            uint64_t obj, uint64_t type, const char *name, uint64_t *val) {
  (void)l;
  return python_obj_attr(&a->reader, p, obj, type, name, val);
}

void pa_task_name(struct py_async_state *a, const struct py_proc *p, const struct pa_layout *l,
                  const uint8_t *task, char *out, size_t cap) {
  uint64_t name = 0;
  if (l->task_name) {
    name = pa_rd64(task, l->task_name);
  } else if (pp_remote_read((pid_t)p->pid, pa_rd64(task, l->task_coro) + l->coro_qualname, &name,
                            8) < 0) {
    name = 0; /* 3.7: the coroutine's __qualname__, as the task's repr shows */
  }
  uint8_t hdr[32];
  /* a str already checked in this sample is the same text */
  for (uint32_t i = 0; i < a->nnames && pa_plausible(name); i++) {
    if (a->names[i].addr == name && a->names[i].pid == p->pid && a->names[i].epoch == a->epoch) {
      snprintf(out, cap, "<task: %s>", a->names[i].text);
      return;
    }
  }
  snprintf(out, cap, "<task: ?>");
  if (!pa_plausible(name) || pp_remote_read((pid_t)p->pid, name, hdr, sizeof(hdr)) < 0) return;
  uint64_t type = pa_rd64(hdr, 8);
  char text[64];
  if (p->str_type && type == p->str_type) {
    uint64_t length = pa_rd64(hdr, 16), hash = pa_rd64(hdr, 24);
    for (uint32_t i = 0; i < a->nnames; i++) {
      if (a->names[i].addr == name && a->names[i].pid == p->pid && a->names[i].length == length &&
          a->names[i].hash == hash) {
        a->names[i].epoch = a->epoch;
        snprintf(out, cap, "<task: %s>", a->names[i].text);
        return;
      }
    }
    if (python_read_string(p, name, text, sizeof(text)) < 0) return;
    snprintf(out, cap, "<task: %s>", text);
    uint32_t slot = a->nnames < PA_NAMES ? a->nnames++ : (a->next_name++ % PA_NAMES);
    a->names[slot].pid = p->pid;
    a->names[slot].addr = name;
    a->names[slot].length = length;
    a->names[slot].hash = hash;
    a->names[slot].epoch = a->epoch;
    memcpy(a->names[slot].text, text, sizeof(text));
  } else if (p->long_type && type == p->long_type) {
    /* 3.12+ keeps "Task-N" as the int N until someone asks: lv_tag =
     * digits << 3 | sign, and one 30-bit digit covers any counter */
    uint64_t tag = pa_rd64(hdr, 16);
    uint32_t digit;
    memcpy(&digit, hdr + 24, 4);
    if (tag >> 3 == 1 && (tag & 3) == 0) snprintf(out, cap, "<task: Task-%u>", digit & 0x3fffffff);
  }
}

uint32_t pa_coro_chain(struct py_async_state *a, const struct py_proc *p, struct py_codecache *cc,
                       const struct pa_layout *l, uint64_t coro, struct py_frame_ref *out,
                       uint32_t cap, uint64_t *awaited) {
  if (l->frameobj) return pa_coro_chain_fo(a, p, cc, l, coro, out, cap, awaited);
  const struct py_offsets *o = &p->off;
  pid_t pid = (pid_t)p->pid;
  uint32_t n = 0;
  *awaited = 0;
  /* a coroutine is read with the first slots of its frame's value stack,
   * where the awaited object usually is (a frame with many locals costs
   * one read more) */
  uint8_t g[96 + 80 + STACK_PEEK];
  uint32_t glen = l->gen_iframe + l->fr_locals, gpeek = glen + STACK_PEEK;
  if (glen > 96 + 80 || o->fr_owner >= l->fr_locals || l->fr_stacktop + 4 > l->fr_locals) return 0;
  /* each object is read once: its header says what it is (the task's own
   * coroutine is taken as it is, its frame's owner is checked) */
  uint32_t have = glen;
  if (!pa_plausible(coro)) return 0;
  if (pp_remote_read(pid, coro, g, gpeek) == 0)
    have = gpeek;
  else if (pp_remote_read(pid, coro, g, glen) < 0)
    return 0;
  bool is_coro = pa_kind_of_type(a, p, pa_rd64(g, 8)) == PA_CORO;
  while (n < cap) {
    const uint8_t *fb = g + l->gen_iframe;
    if (fb[o->fr_owner] != 1) break; /* FRAME_OWNED_BY_GENERATOR */
    uint64_t code = pa_rd64(fb, o->fr_code);
    int err = 0;
    struct py_code *e = python_code_get(cc, p, code, &err);
    if (!e) break;
    uint64_t ip = pa_rd64(fb, o->fr_lasti), start = code + o->co_code_adaptive;
    int64_t addrq = ip >= start ? (int64_t)((ip - start) / 2) : -1;
    if (addrq > (1 << 24)) addrq = -1;
    out[n++] = (struct py_frame_ref){.code = e, .line = python_code_line(e, o->lt_format, addrq)};
    if ((int8_t)g[l->gen_state] != l->st_await) break;
    int32_t top;
    memcpy(&top, fb + l->fr_stacktop, 4);
    if (top < 1 || top > (1 << 16)) break;
    uint64_t yf = 0, at = glen + 8 * (uint64_t)(top - 1);
    uint8_t next[2] = {0, 0};
    /* a coroutine (async def) is only ever suspended in an await; another
     * generator may stop at a plain yield: 3.11/3.12 tell by the RESUME
     * after it (3.13 by the state) */
    bool check = l->resume_op && !is_coro;
    if (at + 8 <= have && !check) {
      yf = pa_rd64(g, (uint32_t)at);
    } else {
      struct pp_remote_iov iov[2] = {{coro + at, &yf, 8}, {ip + 2, next, 2}};
      if (pp_remote_readv(pid, iov, check ? 2 : 1) < 0) break;
      if (check && ((next[0] != l->resume_op && next[0] != l->resume_op2) || next[1] < 2))
        break; /* suspended at a plain yield: nothing awaited */
    }
    /* a FutureIter is 24 bytes: a read of a coroutine's length may
     * cross into an unmapped page, then the header alone is read */
    if (!pa_plausible(yf) || yf == coro) break;
    have = gpeek;
    if (pp_remote_read(pid, yf, g, gpeek) < 0) {
      have = glen;
      if (pp_remote_read(pid, yf, g, glen) < 0) {
        have = 0;
        if (pp_remote_read(pid, yf, g, 24) < 0) break;
      }
    }
    enum pa_kind k = pa_kind_of_type(a, p, pa_rd64(g, 8));
    if (k == PA_FUTUREITER) {
      uint64_t fut = pa_rd64(g, 16);
      if (pa_plausible(fut)) *awaited = fut;
      break;
    }
    if (k != PA_CORO || !have) break;
    is_coro = true;
    coro = yf;
  }
  /* read outermost first: the leaf is the last one read */
  for (uint32_t i = 0; i < n / 2; i++) {
    struct py_frame_ref t = out[i];
    out[i] = out[n - 1 - i];
    out[n - 1 - i] = t;
  }
  return n;
}

/* 3.6-3.10 ---------------------------------------------------------------
 *
 * Coroutines on 3.6-3.10, where a coroutine's frame is a PyFrameObject
 * of its own (cr_frame).
 *
 * A coroutine suspended in `await x` keeps x on top of its frame's value
 * stack, as CPython's _PyGen_yf reads it: f_valuestack[depth - 1], where
 * depth is f_stacktop - f_valuestack on 3.6-3.9 (f_stacktop is NULL
 * while the frame runs) and f_stackdepth on 3.10 (f_state says
 * FRAME_SUSPENDED). A coroutine (async def) can only suspend in an await;
 * a generator (a generator-based coroutine: asyncio.sleep on 3.6) may stop
 * at a plain yield, so it is followed only if the instruction after the
 * one it stopped at is YIELD_FROM, as _PyGen_yf checks.
 */
#define FRAME_READ 128     /* every PyFrameObject field used is below */
#define FRAME_SUSPENDED -1 /* 3.10 PyFrameState */
#define YIELD_FROM 72      /* its opcode, 3.6 to 3.10 */

/* Is the generator whose frame (bytes f) runs code stopped in a yield
 * from? */
static bool in_yield_from(const struct py_proc *p, const struct pa_layout *l, uint64_t code,
                          int32_t lasti) {
  uint64_t bytes = 0;
  uint8_t op = 0;
  /* the next instruction: f_lasti counts bytes, on 3.10 instructions */
  uint64_t at = p->off.lasti_is_index ? ((uint64_t)lasti + 1) * 2 : (uint64_t)lasti + 2;
  if (lasti < 0 || lasti > (1 << 24) || !pa_plausible(code) ||
      pp_remote_read((pid_t)p->pid, code + l->co_code, &bytes, 8) < 0 || !pa_plausible(bytes) ||
      pp_remote_read((pid_t)p->pid, bytes + 32 + at, &op, 1) < 0) /* PyBytesObject.ob_sval */
    return false;
  return op == YIELD_FROM;
}

uint64_t pa_coro_frame_fo(const struct py_proc *p, const struct pa_layout *l, uint64_t coro) {
  uint64_t f = 0;
  if (!pa_plausible(coro) || pp_remote_read((pid_t)p->pid, coro + l->gen_frame, &f, 8) < 0 ||
      !pa_plausible(f))
    return 0;
  return f;
}

uint32_t pa_coro_chain_fo(struct py_async_state *a, const struct py_proc *p,
                          struct py_codecache *cc, const struct pa_layout *l, uint64_t coro,
                          struct py_frame_ref *out, uint32_t cap, uint64_t *awaited) {
  const struct py_offsets *o = &p->off;
  pid_t pid = (pid_t)p->pid;
  uint32_t n = 0;
  *awaited = 0;
  if (o->fr_code + 8 > FRAME_READ || o->fr_lasti + 4 > FRAME_READ ||
      l->f_valuestack + 8 > FRAME_READ || l->f_stacktop + 8 > FRAME_READ ||
      l->f_stackdepth + 4 > FRAME_READ || l->f_state >= FRAME_READ)
    return 0;
  uint8_t g[24], f[FRAME_READ];
  if (!pa_plausible(coro) || pp_remote_read(pid, coro, g, sizeof(g)) < 0) return 0;
  enum pa_kind kind = pa_kind_of_type(a, p, pa_rd64(g, 8));
  while (n < cap) {
    uint64_t frame = pa_rd64(g, l->gen_frame);
    if (!pa_plausible(frame) || pp_remote_read(pid, frame, f, sizeof(f)) < 0) break;
    uint64_t code = pa_rd64(f, o->fr_code);
    int err = 0;
    struct py_code *e = python_code_get(cc, p, code, &err);
    if (!e) break;
    int32_t lasti;
    memcpy(&lasti, f + o->fr_lasti, 4);
    int64_t addrq = o->lasti_is_index && lasti >= 0 ? (int64_t)lasti * 2 : lasti;
    out[n++] = (struct py_frame_ref){.code = e, .line = python_code_line(e, o->lt_format, addrq)};
    if ((kind != PA_CORO && kind != PA_GENERATOR) || lasti < 0)
      break; /* not started: awaits nothing yet */
    uint64_t vs = pa_rd64(f, l->f_valuestack);
    int64_t depth;
    if (l->f_stackdepth) {
      int32_t d;
      memcpy(&d, f + l->f_stackdepth, 4);
      if ((int8_t)f[l->f_state] != FRAME_SUSPENDED) break;
      depth = d;
    } else {
      uint64_t top = pa_rd64(f, l->f_stacktop);
      if (!top || top < vs || (top - vs) % 8) break; /* running, or torn */
      depth = (int64_t)((top - vs) / 8);
    }
    if (depth < 1 || depth > (1 << 16) || !pa_plausible(vs)) break;
    if (kind == PA_GENERATOR && !in_yield_from(p, l, code, lasti)) break;
    uint64_t yf = 0;
    if (pp_remote_read(pid, vs + 8 * (uint64_t)(depth - 1), &yf, 8) < 0 || !pa_plausible(yf) ||
        yf == coro || pp_remote_read(pid, yf, g, sizeof(g)) < 0)
      break;
    enum pa_kind k = pa_kind_of_type(a, p, pa_rd64(g, 8));
    if (k == PA_FUTUREITER) {
      uint64_t fut = pa_rd64(g, 16);
      if (pa_plausible(fut)) *awaited = fut;
      break;
    }
    if (k != PA_CORO && k != PA_GENERATOR) break;
    kind = k;
    coro = yf;
  }
  /* read outermost first: the leaf is the last one read */
  for (uint32_t i = 0; i < n / 2; i++) {
    struct py_frame_ref t = out[i];
    out[i] = out[n - 1 - i];
    out[n - 1 - i] = t;
  }
  return n;
}
