/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Objects the asyncio readers meet (3.11-3.13): what kind an object is,
 * an instance attribute of a Python class, a task's name, and the chain of
 * coroutines a coroutine awaits.
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

bool pa_layout_for(const struct py_proc *p, struct pa_layout *l) {
  if (p->major != 3 || p->minor < 11 || p->minor > 13 || !p->off.task_coro) return false;
  *l = (struct pa_layout){.fr_stacktop = 64,
                          .fut_loop = 16,
                          .fut_cb0 = 24,
                          .fut_state = p->minor == 13 ? 96 : 88,
                          .fut_weakreflist = p->minor == 13 ? 0 : 112,
                          .type_keys = p->minor == 11 ? 872 : 880,
                          .type_module = p->minor == 11 ? 0 : 888,
                          .mod_state = 32,
                          .st_task_type = 24,
                          .st_scheduled = 56,
                          .minor = (uint8_t)p->minor};
  l->gen_state = p->minor == 11 ? 75 : 67;
  if (p->minor == 13) {
    l->st_await = -1; /* FRAME_SUSPENDED_YIELD_FROM */
  } else {
    l->st_await = -1; /* FRAME_SUSPENDED, and the next instruction says await */
    l->resume_op = 151;
    l->resume_op2 = p->minor == 11 ? 150 : 240; /* RESUME_QUICK, INSTRUMENTED_RESUME */
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
    {"module", PA_MODULE},
};

enum pa_kind pa_kind_of_type(struct py_async_state *a, const struct py_proc *p, uint64_t type) {
  if (!pa_plausible(type)) return PA_OTHER;
  for (uint32_t i = 0; i < a->ntypes; i++)
    if (a->types[i].type == type && a->types[i].pid == p->pid) return a->types[i].kind;
  uint64_t tp_name = 0;
  char name[40];
  enum pa_kind kind = PA_OTHER;
  if (pp_remote_read((pid_t)p->pid, type + 24, &tp_name, 8) < 0 || tp_name < 4096 ||
      pp_remote_read_str((pid_t)p->pid, tp_name, name, sizeof(name)) < 0)
    return PA_OTHER; /* not remembered: unreadable now is not "other" forever */
  for (size_t i = 0; i < sizeof(kind_names) / sizeof(kind_names[0]); i++)
    if (strcmp(name, kind_names[i].name) == 0) kind = kind_names[i].kind;
  uint32_t slot = a->ntypes < PA_TYPES ? a->ntypes++ : (a->next_type++ % PA_TYPES);
  a->types[slot].pid = p->pid;
  a->types[slot].type = type;
  a->types[slot].kind = (uint8_t)kind;
  return kind;
}

enum pa_kind pa_kind_of(struct py_async_state *a, const struct py_proc *p, uint64_t obj,
                        uint64_t *type) {
  uint64_t t = 0;
  if (type) *type = 0;
  if (!pa_plausible(obj) || pp_remote_read((pid_t)p->pid, obj + 8, &t, 8) < 0) return PA_OTHER;
  if (type) *type = t;
  return pa_kind_of_type(a, p, t);
}

/* Index of attribute `name` in the shared keys of type, or -ENOENT. */
static int attr_index(struct py_async_state *a, const struct py_proc *p, const struct pa_layout *l,
                      uint64_t type, const char *name) {
  for (uint32_t i = 0; i < a->nattrs; i++)
    if (a->attrs[i].type == type && a->attrs[i].name == name && a->attrs[i].pid == p->pid)
      return (int)a->attrs[i].index;
  pid_t pid = (pid_t)p->pid;
  uint64_t keys = 0;
  uint8_t hdr[32];
  if (pp_remote_read(pid, type + l->type_keys, &keys, 8) < 0 || !pa_plausible(keys) ||
      pp_remote_read(pid, keys, hdr, sizeof(hdr)) < 0)
    return -EFAULT;
  uint8_t log2_index_bytes = hdr[9], dk_kind = hdr[10];
  int64_t nentries = (int64_t)pa_rd64(hdr, 24);
  if (dk_kind != 2 || log2_index_bytes > 16 || nentries <= 0) return -ENOENT; /* not split */
  if (nentries > 16) nentries = 16; /* the attributes looked for are set early */
  uint64_t entries[32];
  if (pp_remote_read(pid, keys + 32 + (1ull << log2_index_bytes), entries, (size_t)nentries * 16) <
      0)
    return -EFAULT;
  for (int64_t i = 0; i < nentries; i++) {
    char key[40];
    if (python_read_string(p, entries[2 * i], key, sizeof(key)) < 0 || strcmp(key, name) != 0)
      continue;
    uint32_t slot = a->nattrs < PA_ATTRS ? a->nattrs++ : (a->next_attr++ % PA_ATTRS);
    a->attrs[slot].pid = p->pid;
    a->attrs[slot].type = type;
    a->attrs[slot].name = name;
    a->attrs[slot].index = (uint32_t)i;
    return (int)i;
  }
  return -ENOENT;
}

int pa_attr(struct py_async_state *a, const struct py_proc *p, const struct pa_layout *l,
            uint64_t obj, uint64_t type, const char *name, uint64_t *val) {
  *val = 0;
  int idx = attr_index(a, p, l, type, name);
  if (idx < 0) return idx;
  pid_t pid = (pid_t)p->pid;
  uint64_t slot;
  if (l->minor == 11) {
    /* the values array sits four words before the object */
    uint64_t values = 0;
    if (pp_remote_read(pid, obj - 32, &values, 8) < 0) return -EFAULT;
    if (!pa_plausible(values)) return -ENOENT;
    slot = values + 8 * (uint64_t)idx;
  } else if (l->minor == 12) {
    /* three words before: the dict, or the values pointer minus one */
    uint64_t dorv = 0;
    if (pp_remote_read(pid, obj - 24, &dorv, 8) < 0) return -EFAULT;
    if (!(dorv & 1) || !pa_plausible(dorv + 1)) return -ENOENT;
    slot = dorv + 1 + 8 * (uint64_t)idx;
  } else {
    /* inline after the object's basic size, behind an 8-byte header */
    uint8_t t[176];
    if (pp_remote_read(pid, type, t, sizeof(t)) < 0) return -EFAULT;
    uint64_t basicsize = pa_rd64(t, 32), flags = pa_rd64(t, 168);
    if (!(flags & (1u << 2)) || basicsize < 16 || basicsize > 4096) return -ENOENT;
    uint8_t vh[8];
    if (pp_remote_read(pid, obj + basicsize, vh, sizeof(vh)) < 0) return -EFAULT;
    if (!vh[3] || (uint32_t)idx >= vh[0]) return -ENOENT; /* valid, capacity */
    slot = obj + basicsize + 8 + 8 * (uint64_t)idx;
  }
  if (pp_remote_read(pid, slot, val, 8) < 0) return -EFAULT;
  return *val ? 0 : -ENOENT;
}

void pa_task_name(struct py_async_state *a, const struct py_proc *p, const uint8_t *task, char *out,
                  size_t cap) {
  uint64_t name = pa_rd64(task, p->off.task_name);
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
  const struct py_offsets *o = &p->off;
  pid_t pid = (pid_t)p->pid;
  uint32_t n = 0;
  *awaited = 0;
  /* a coroutine is read with the first slots of its frame's value stack,
   * where the awaited object usually is (a frame with many locals costs
   * one read more) */
  uint8_t g[96 + 80 + STACK_PEEK];
  uint32_t glen = o->gen_iframe + o->fr_localsplus, gpeek = glen + STACK_PEEK;
  if (glen > 96 + 80 || o->fr_owner >= o->fr_localsplus || l->fr_stacktop + 4 > o->fr_localsplus)
    return 0;
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
    const uint8_t *fb = g + o->gen_iframe;
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
