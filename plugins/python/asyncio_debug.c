/* SPDX-License-Identifier: Apache-2.0 */
/*
 * asyncio task chains on CPython 3.14+, from the offsets the _asyncio
 * module publishes for out-of-process readers: _Py_AsyncioModuleDebugOffsets,
 * exported as `_AsyncioDebug` by the _asyncio extension (or by the binary
 * that has it built in). Thirteen uint64 members:
 *   TaskObj          size, task_name, task_awaited_by, task_is_task,
 *                    task_awaited_by_is_set, task_coro, task_node
 *   interpreter      size, asyncio_tasks_head
 *   thread state     size (of _PyThreadStateImpl), asyncio_running_loop,
 *                    asyncio_running_task, asyncio_tasks_head
 *
 * The running task is the thread state's asyncio_running_task; its
 * coroutine's frame (inside the coroutine object, at gi_iframe of
 * _Py_DebugOffsets) is on the thread's stack, and the task's <task: NAME>
 * goes right after it. The tasks awaiting it come from task_awaited_by:
 * one task, or a set of them (task_awaited_by_is_set) when several await
 * the same task. Each awaiting task shows the frame of its own coroutine
 * (the line of its current await) and its name. Its name is a str, or an
 * int N (an unnamed task, shown as Task-N as asyncio names it).
 *
 * Nothing read is trusted: every offset must lie inside the size its own
 * struct declares and past the object header, fields may not overlap, a
 * task must say it is one (task_is_task), and an awaited-by chain that
 * comes back to a task already on it is refused whole.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "asyncio_internal.h"
#include "polyprof/kit/elf_lookup.h"
#include "polyprof/kit/remote.h"

static uint64_t dbg_u64(const uint8_t *b, size_t i) {
  uint64_t v;
  memcpy(&v, b + 8 * i, 8);
  return v;
}

static int dbg_refuse(char *why, size_t whylen, const char *field, uint64_t v) {
  if (why && whylen) snprintf(why, whylen, "_AsyncioDebug: %s %" PRIu64 " out of bounds", field, v);
  return -EINVAL;
}

/* off with width bytes lies inside [lo, size) and is aligned to width. */
static bool dbg_fits(uint64_t off, uint64_t width, uint64_t lo, uint64_t size) {
  return off >= lo && off <= size && width <= size - off && off % (width > 8 ? 8 : width) == 0;
}

static bool dbg_overlap(uint64_t a, uint64_t aw, uint64_t b, uint64_t bw) {
  return a < b + bw && b < a + aw;
}

int pa_dbg_parse(const uint8_t *b, size_t len, uint32_t ob_hdr, struct pa_dbg *d, char *why,
                 size_t whylen) {
  if (len < PA_DBG_BYTES) return dbg_refuse(why, whylen, "length", len);
  uint64_t v[PA_DBG_BYTES / 8];
  for (size_t i = 0; i < PA_DBG_BYTES / 8; i++)
    v[i] = dbg_u64(b, i);
  static const char *const names[] = {"task size",
                                      "task_name",
                                      "task_awaited_by",
                                      "task_is_task",
                                      "task_awaited_by_is_set",
                                      "task_coro",
                                      "task_node",
                                      "interpreter size",
                                      "interpreter asyncio_tasks_head",
                                      "thread size",
                                      "asyncio_running_loop",
                                      "asyncio_running_task",
                                      "thread asyncio_tasks_head"};
  if (v[0] < ob_hdr + 8u || v[0] > PA_DBG_TASK_MAX) return dbg_refuse(why, whylen, names[0], v[0]);
  /* task fields: pointers (8), flags (1), the list node (16) */
  static const uint8_t task_width[] = {0, 8, 8, 1, 1, 8, 16};
  for (size_t i = 1; i < 7; i++)
    if (!dbg_fits(v[i], task_width[i], ob_hdr, v[0]))
      return dbg_refuse(why, whylen, names[i], v[i]);
  for (size_t i = 1; i < 7; i++)
    for (size_t j = i + 1; j < 7; j++)
      if (dbg_overlap(v[i], task_width[i], v[j], task_width[j]))
        return dbg_refuse(why, whylen, names[j], v[j]);
  if (v[7] < 64 || v[7] > PA_DBG_STATE_MAX) return dbg_refuse(why, whylen, names[7], v[7]);
  if (!dbg_fits(v[8], 16, 64, v[7])) return dbg_refuse(why, whylen, names[8], v[8]);
  if (v[9] < 64 || v[9] > PA_DBG_STATE_MAX) return dbg_refuse(why, whylen, names[9], v[9]);
  static const uint8_t ts_width[] = {0, 8, 8, 16};
  for (size_t i = 10; i < 13; i++)
    if (!dbg_fits(v[i], ts_width[i - 9], 64, v[9])) return dbg_refuse(why, whylen, names[i], v[i]);
  for (size_t i = 10; i < 13; i++)
    for (size_t j = i + 1; j < 13; j++)
      if (dbg_overlap(v[i], ts_width[i - 9], v[j], ts_width[j - 9]))
        return dbg_refuse(why, whylen, names[j], v[j]);
  *d = (struct pa_dbg){
      .task_size = (uint32_t)v[0],
      .task_name = (uint32_t)v[1],
      .task_awaited_by = (uint32_t)v[2],
      .task_is_task = (uint32_t)v[3],
      .task_awaited_by_is_set = (uint32_t)v[4],
      .task_coro = (uint32_t)v[5],
      .task_node = (uint32_t)v[6],
      .is_size = (uint32_t)v[7],
      .is_tasks_head = (uint32_t)v[8],
      .ts_size = (uint32_t)v[9],
      .ts_running_loop = (uint32_t)v[10],
      .ts_running_task = (uint32_t)v[11],
      .ts_tasks_head = (uint32_t)v[12],
  };
  return 0;
}

/* The bytes of a task (d->task_size of them); false unless it says it is
 * one. */
static bool dbg_task(const struct py_proc *p, const struct pa_dbg *d, uint64_t addr, uint8_t *t) {
  return pa_plausible(addr) && pp_remote_read((pid_t)p->pid, addr, t, d->task_size) == 0 &&
         t[d->task_is_task] == 1;
}

/* tp_name of the type of the object at obj, into out. */
static bool dbg_type_name(const struct py_proc *p, uint64_t obj, char *out, size_t cap) {
  pid_t pid = (pid_t)p->pid;
  uint64_t type = 0, tp_name = 0;
  /* PyTypeObject: a PyVarObject header (object header + ob_size), then tp_name */
  uint32_t hdr = p->off.free_threaded ? 32 : 16;
  uint32_t ob_type = p->off.ob_type ? p->off.ob_type : 8;
  if (pp_remote_read(pid, obj + ob_type, &type, 8) < 0 || !pa_plausible(type) ||
      pp_remote_read(pid, type + hdr + 8, &tp_name, 8) < 0 || tp_name < 4096 ||
      tp_name >= (1ull << 47) || /* a char *: any alignment */
      pp_remote_read(pid, tp_name, out, cap - 1) < 0)
    return false;
  out[cap - 1] = 0;
  return true;
}

/* "<task: NAME>": a str, or the int N of an unnamed task (Task-N). */
static void dbg_task_name(const struct py_proc *p, const struct pa_dbg *d, const uint8_t *t,
                          char *out, size_t cap) {
  uint64_t name = pa_rd64(t, d->task_name);
  char text[64] = "", tp[8];
  if (pa_plausible(name) && dbg_type_name(p, name, tp, sizeof(tp))) {
    if (strcmp(tp, "str") == 0) {
      if (python_read_string(p, name, text, sizeof(text)) < 0) text[0] = 0;
    } else if (strcmp(tp, "int") == 0) {
      /* a compact int: lv_tag (digit count << 3 | sign), then 30-bit digits */
      uint32_t hdr = p->off.free_threaded ? 32 : 16;
      uint64_t lv[2];
      if (pp_remote_read((pid_t)p->pid, name + hdr, lv, sizeof(lv)) == 0 && (lv[0] >> 3) == 1 &&
          (lv[0] & 3) == 0)
        snprintf(text, sizeof(text), "Task-%" PRIu32, (uint32_t)lv[1] & 0x3fffffffu);
    }
  }
  snprintf(out, cap, "<task: %s>", text[0] ? text : "?");
}

/* The frame of a suspended coroutine (its current line), or false. */
static bool dbg_coro_frame(const struct py_proc *p, struct py_codecache *cc, uint64_t coro,
                           struct py_frame_ref *out) {
  const struct py_offsets *o = &p->off;
  uint8_t fb[PY_FRAME_READ_MAX];
  if (!pa_plausible(coro) || !o->gen_iframe || o->fr_read > sizeof(fb) ||
      pp_remote_read((pid_t)p->pid, coro + o->gen_iframe, fb, o->fr_read) < 0)
    return false;
  uint64_t code = pa_rd64(fb, o->fr_code);
  if (o->code_tagged) code &= ~(uint64_t)3;
  int err = 0;
  struct py_code *e = python_code_get(cc, p, code, &err);
  if (!e) return false;
  uint64_t ip = pa_rd64(fb, o->fr_lasti), start = code + o->co_code_adaptive;
  if (o->fr_tlbc_index) start = python_tlbc_start(p, code, fb, start);
  int64_t addrq = ip >= start ? (int64_t)((ip - start) / 2) : -1;
  if (addrq > (1 << 24)) addrq = -1;
  *out = (struct py_frame_ref){.code = e, .line = python_code_line(e, o->lt_format, addrq)};
  return true;
}

/* The first task in the set at set (3.14 PySetObject: fill, used, mask,
 * table after the object header; entries {key, hash}); 0 if none. */
static uint64_t dbg_first_in_set(const struct py_proc *p, const struct pa_dbg *d, uint64_t set,
                                 uint8_t *t) {
  uint32_t hdr = p->off.free_threaded ? 32 : 16;
  uint64_t h[4];
  if (!pa_plausible(set) || pp_remote_read((pid_t)p->pid, set + hdr, h, sizeof(h)) < 0) return 0;
  uint64_t mask = h[2], table = h[3];
  if (mask > 255 || ((mask + 1) & mask) || !pa_plausible(table)) return 0;
  uint64_t ent[2 * 256];
  if (pp_remote_read((pid_t)p->pid, table, ent, 16 * (mask + 1)) < 0) return 0;
  for (uint64_t i = 0; i <= mask; i++)
    if (ent[2 * i] && dbg_task(p, d, ent[2 * i], t)) return ent[2 * i];
  return 0;
}

/* The tasks awaiting task cur (its bytes in t, overwritten): per task
 * its coroutine's frame and <task: NAME> (names from names[1]), appended
 * to out[m..room). The new m, or UINT32_MAX when the chain comes back to a
 * task already on it. */
static uint32_t dbg_ancestors(struct py_async_scratch *s, const struct py_proc *p,
                              struct py_codecache *cc, const struct pa_dbg *d, uint64_t cur,
                              uint8_t *t, struct py_frame_ref *out, uint32_t m, uint32_t room) {
  uint64_t seen[PY_ASYNC_MAX + 1] = {cur};
  for (uint32_t depth = 1; depth <= PY_ASYNC_MAX; depth++) {
    uint64_t by = pa_rd64(t, d->task_awaited_by);
    if (!by) break;
    uint64_t parent = by;
    if (t[d->task_awaited_by_is_set]) {
      parent = dbg_first_in_set(p, d, by, t);
      if (!parent) break;
    } else if (!dbg_task(p, d, parent, t)) {
      break; /* awaited by something other than a task */
    }
    for (uint32_t i = 0; i < depth; i++)
      if (seen[i] == parent) return UINT32_MAX;
    seen[depth] = parent;
    if (m + 2 > room) break;
    if (dbg_coro_frame(p, cc, pa_rd64(t, d->task_coro), &out[m])) m++;
    dbg_task_name(p, d, t, s->names[depth], sizeof(s->names[depth]));
    out[m++] = (struct py_frame_ref){.pseudo = s->names[depth]};
  }
  return m;
}

uint32_t pa_dbg_chain(struct py_async_scratch *s, const struct py_proc *p, struct py_codecache *cc,
                      const struct pa_dbg *d, uint64_t tstate, struct py_frame_ref *frames,
                      const uint64_t *faddr, uint32_t n, uint32_t cap) {
  uint64_t cur = 0;
  uint8_t t[PA_DBG_TASK_MAX];
  if (!pa_plausible(tstate) || !p->off.gen_iframe ||
      pp_remote_read((pid_t)p->pid, tstate + d->ts_running_task, &cur, 8) < 0 || !cur ||
      !dbg_task(p, d, cur, t))
    return n;
  uint64_t frame = pa_rd64(t, d->task_coro) + p->off.gen_iframe;
  uint32_t k = 0;
  while (k < n && faddr[k] != frame)
    k++;
  if (k >= n) return n; /* the task's coroutine is not on this stack */
  k++;                  /* frames [0, k): the task's own */
  memcpy(s->out, frames, k * sizeof(frames[0]));
  uint32_t m = k, room = cap > n - k ? cap - (n - k) : 0;
  if (m >= room) return n;
  dbg_task_name(p, d, t, s->names[0], sizeof(s->names[0]));
  s->out[m++] = (struct py_frame_ref){.pseudo = s->names[0]};
  m = dbg_ancestors(s, p, cc, d, cur, t, s->out, m, room);
  if (m == UINT32_MAX) return n; /* a cycle: hostile or torn, refused whole */
  memcpy(s->out + m, frames + k, (n - k) * sizeof(frames[0]));
  m += n - k;
  memcpy(frames, s->out, m * sizeof(frames[0]));
  return m;
}

/* Where the offsets are in one file: CPython puts them in their own
 * section, .AsyncioDebug, which stripping keeps (the symbol is hidden by
 * -fvisibility=hidden, so only a .symtab that distributions strip has it);
 * the symbol, under either of its names, is the fallback. */
static uint64_t dbg_vaddr(int fd) {
  uint64_t v = 0, size = 0;
  if (pp_elf_find_section(fd, ".AsyncioDebug", &v, &size) == 0 && v && size >= PA_DBG_BYTES)
    return v;
  static const char *const names[] = {"_AsyncioDebug", "_Py_AsyncioDebug"};
  uint64_t vals[2] = {0, 0};
  if (pp_elf_lookup_symbols(fd, names, 2, 0, vals, NULL) < 1) return 0;
  return vals[0] ? vals[0] : vals[1];
}

/* _AsyncioDebug of p: in the _asyncio extension (3.14), else in the module
 * that holds the interpreter (built in). */
static int dbg_locate(const struct py_proc *p, struct pa_dbg *d) {
  static const char *const where[] = {"_asyncio.cpython-3*.so", NULL};
  uint64_t v = 0, bias = 0;
  for (int i = 0; i < 2 && !v; i++) {
    struct pp_module m;
    if (pp_find_module(p->pid, where[i] ? where[i] : p->module, &m, NULL, 0) < 0) continue;
    v = dbg_vaddr(m.fd);
    bias = m.bias;
    pp_module_close(&m);
  }
  if (!v) return -ENOENT;
  uint8_t b[PA_DBG_BYTES];
  if (pp_remote_read((pid_t)p->pid, v + bias, b, sizeof(b)) < 0) return -EFAULT;
  return pa_dbg_parse(b, sizeof(b), p->off.free_threaded ? 32 : 16, d, NULL, 0);
}

const struct pa_dbg *pa_dbg_for(struct py_async_state *a, const struct py_proc *p) {
  a->dbg_clock++;
  struct pa_dbg_slot *slot = NULL;
  for (uint32_t i = 0; i < PA_REGISTRIES; i++)
    if (a->dbgs[i].pid == p->pid) slot = &a->dbgs[i];
  if (!slot) {
    slot = &a->dbgs[a->next_dbg];
    a->next_dbg = (a->next_dbg + 1) % PA_REGISTRIES;
    *slot = (struct pa_dbg_slot){.pid = p->pid};
  }
  if (!slot->ok && slot->retry_at <= a->dbg_clock) {
    slot->ok = dbg_locate(p, &slot->d) == 0;
    /* _asyncio is imported late, or never: looked for again later */
    if (!slot->ok) slot->retry_at = a->dbg_clock + PA_RETRY_SAMPLES;
  }
  return slot->ok ? &slot->d : NULL;
}

void pa_dbg_note_loop(struct py_async_scratch *s, const struct py_proc *p, uint32_t tid,
                      const struct py_frame_ref *frames, uint32_t n) {
  struct py_async_state *a = s->a;
  if (a->nloops >= PA_LOOPS || !pa_plausible(s->tstate)) return;
  for (uint32_t k = 0; k < n; k++) {
    const struct py_code *c = frames[k].code;
    size_t fl = c ? strlen(c->file) : 0, tl = strlen("/asyncio/base_events.py");
    if (!c || fl < tl || strcmp(c->file + fl - tl, "/asyncio/base_events.py") != 0 ||
        strcmp(c->name, "BaseEventLoop._run_once") != 0 || n - k > a->max_depth)
      continue;
    a->loops[a->nloops].tid = tid;
    a->loops[a->nloops].loop = s->tstate; /* 3.14+: the thread state, whose tasks it runs */
    a->loops[a->nloops].n = n - k;
    memcpy(a->loops[a->nloops].prefix, frames + k, (n - k) * sizeof(frames[0]));
    a->nloops++;
    return;
  }
}

void pa_dbg_waiting(struct py_async_scratch *s, const struct py_proc *p, struct py_codecache *cc,
                    struct py_frame_ref *frames, uint32_t cap, py_stack_fn fn, void *ctx) {
  struct py_async_state *a = s->a;
  const struct pa_dbg *d = a->nloops ? pa_dbg_for(a, p) : NULL;
  if (!d) return;
  pid_t pid = (pid_t)p->pid;
  uint8_t t[PA_DBG_TASK_MAX];
  a->passes++;
  for (uint32_t li = 0; li < a->nloops; li++) {
    uint64_t ts = a->loops[li].loop, head = ts + d->ts_tasks_head, cur = 0, node = 0;
    if (pp_remote_read(pid, ts + d->ts_running_task, &cur, 8) < 0 ||
        pp_remote_read(pid, head, &node, 8) < 0)
      continue;
    /* the thread's tasks, linked through task_node (next first) from the
     * head in its thread state; each task's awaiter, so that a task
     * awaiting another is shown above it rather than on its own */
    uint32_t nt = 0;
    while (node && node != head && nt < PA_TASKS_MAX) {
      uint64_t task = node - d->task_node;
      if (!dbg_task(p, d, task, t)) break;
      for (uint32_t i = 0; i < nt; i++)
        if (a->objs[i] == task) node = 0; /* a loop in the list */
      if (!node) break;
      a->objs[nt] = task;
      uint64_t by = pa_rd64(t, d->task_awaited_by);
      a->keys[nt++] = t[d->task_awaited_by_is_set] ? dbg_first_in_set(p, d, by, t) : by;
      if (pp_remote_read(pid, task + d->task_node, &node, 8) < 0) break;
    }
    if (nt == PA_TASKS_MAX && node && node != head) a->tasks_over++;
    uint32_t rest = a->loops[li].n;
    if (cap < rest + 2 * (PY_ASYNC_MAX + 1)) continue;
    for (uint32_t i = 0; i < nt; i++) {
      bool awaits = a->objs[i] == cur;
      for (uint32_t j = 0; j < nt && !awaits; j++)
        awaits = a->keys[j] == a->objs[i];
      if (awaits || !dbg_task(p, d, a->objs[i], t)) continue;
      uint32_t m = 0;
      if (dbg_coro_frame(p, cc, pa_rd64(t, d->task_coro), &frames[m])) m++;
      dbg_task_name(p, d, t, s->names[0], sizeof(s->names[0]));
      frames[m++] = (struct py_frame_ref){.pseudo = s->names[0]};
      m = dbg_ancestors(s, p, cc, d, a->objs[i], t, frames, m, cap - rest);
      if (m == UINT32_MAX) continue;
      memcpy(frames + m, a->loops[li].prefix, rest * sizeof(frames[0]));
      fn(ctx, a->loops[li].tid, frames, m + rest, false);
    }
  }
}
