/* SPDX-License-Identifier: Apache-2.0 */
/*
 * <thread: NAME> frames: the names users give threads
 * (threading.Thread(name=...)), as py-spy shows them, read from the
 * target: sys.modules['threading']._active maps each thread's ident
 * (its pthread_t, the thread state's thread_id) to its Thread, whose
 * instance attribute _name (2.7: _Thread__name) is the name.
 *
 * The kernel's name (/proc/PID/task/TID/comm) stays the answer when it was
 * set natively (prctl, pthread_setname_np: it differs from the process's
 * own) and threading's is one it made up (Thread-N), for threads
 * threading does not know, and when threading's names cannot be read: on
 * 3.14+ (its debug offsets locate sys.modules and a dict's keys, but not
 * the key table's layout nor where a class keeps its instances' values;
 * threading.Thread sets the kernel's name itself there) and when a read
 * fails, which is counted and reported once per session.
 *
 * Names are remembered per target (PY_THREAD_NAMES of them, a table
 * allocated when the first is asked for) and read again at most every
 * PY_THREAD_NAMES_REFRESH_NS, a thread not in the table waiting at least
 * PY_THREAD_NAMES_GAP_NS (none once the table is full): never once per
 * sample.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "native.h"
#include "object_reader.h"
#include "polyprof/kit/proc.h"
#include "polyprof/kit/remote.h"
#include "python.h"

#define ACTIVE_MAX 256  /* threading._active entries read */
#define TSTATES_MAX 256 /* thread states mapped (ident -> tid), 3.11+ */
#define MD_DICT 16      /* PyModuleObject.md_dict */

/* Copies len bytes of in as a frame name: control bytes and ';' (the
 * collapsed format's separator) become '?'. */
static void clean_name(char *out, size_t cap, const char *in, size_t len) {
  size_t k = 0;
  for (size_t i = 0; i < len && in[i] && in[i] != '\n' && k + 1 < cap; i++) {
    unsigned char c = (unsigned char)in[i];
    out[k++] = (c < 32 || c == 127 || c == ';') ? '?' : (char)c;
  }
  out[k] = '\0';
}

/* The kernel's name of host thread tid of pid (tid 0: of the process). */
static int read_comm(uint32_t pid, uint32_t tid, char *out, size_t cap) {
  char path[64], buf[64];
  if (tid)
    snprintf(path, sizeof(path), "/proc/%u/task/%u/comm", pid, tid);
  else
    snprintf(path, sizeof(path), "/proc/%u/comm", pid);
  size_t len = 0;
  if (pp_read_file(path, buf, sizeof(buf), &len) < 0 || len == 0) return -ENOENT;
  clean_name(out, cap, buf, len);
  return out[0] ? 0 : -ENOENT;
}

/* The dict of p's threading module (remembered: finding it scans
 * sys.modules). -ENOENT when threading was never imported. */
static int threading_dict(struct py_state *st, struct py_target *pt, uint64_t *dict) {
  struct py_proc *p = &pt->proc;
  pid_t pid = (pid_t)p->pid;
  uint64_t mod = pt->threading_mod;
  if (!mod || !python_obj_is(st->objs, p, mod, "module")) {
    uint64_t interp = 0, modules = 0;
    pt->threading_mod = 0;
    if (pp_remote_read(pid, p->interp_head, &interp, 8) < 0 || !python_obj_plausible(interp) ||
        pp_remote_read(pid, interp + p->off.is_modules, &modules, 8) < 0)
      return -EFAULT;
    int rc = python_dict_get(st->objs, p, modules, "threading", &mod);
    if (rc < 0) return rc;
    if (!python_obj_is(st->objs, p, mod, "module")) return -EINVAL;
    pt->threading_mod = mod;
  }
  if (pp_remote_read(pid, mod + MD_DICT, dict, 8) < 0) return -EFAULT;
  return 0;
}

/* 3.11+: (thread_id, native thread id) of the first interpreter's
 * threads. Count or -errno. */
static int thread_ids(struct py_proc *p, uint64_t (*ids)[2], uint32_t cap) {
  const struct py_offsets *o = &p->off;
  pid_t pid = (pid_t)p->pid;
  uint64_t interp = 0, t = 0;
  uint8_t ts[PY_TSTATE_READ_MAX];
  if (o->ts_read > sizeof(ts) || pp_remote_read(pid, p->interp_head, &interp, 8) < 0 ||
      !python_obj_plausible(interp) || pp_remote_read(pid, interp + o->is_tstate_head, &t, 8) < 0)
    return -EFAULT;
  uint32_t n = 0;
  /* bounded by cap; a cycle only repeats pairs already found */
  while (t && n < cap) {
    if (!python_obj_plausible(t) || pp_remote_read(pid, t, ts, o->ts_read) < 0) return -EFAULT;
    uint64_t next = 0, native = 0;
    memcpy(&ids[n][0], ts + o->ts_thread_id, 8);
    memcpy(&native, ts + o->ts_native_tid, 8);
    memcpy(&next, ts + o->ts_next, 8);
    ids[n][1] = (uint32_t)native;
    n++;
    t = next;
  }
  return (int)n;
}

/* threading's (tid, name) pairs of the current target into out. Count
 * or -errno. */
static int read_python_names(struct py_state *st, struct py_target *pt, struct py_thread_name *out,
                             uint32_t cap) {
  struct py_proc *p = &pt->proc;
  uint64_t dict = 0, active = 0;
  int rc = threading_dict(st, pt, &dict);
  if (rc == 0) rc = python_dict_get(st->objs, p, dict, "_active", &active);
  if (rc < 0) return rc;
  struct py_dict_entry ents[ACTIVE_MAX];
  int n = python_dict_entries(st->objs, p, active, ents, ACTIVE_MAX);
  if (n < 0) return n;
  uint64_t ids[TSTATES_MAX][2];
  int nids = 0;
  if (p->off.ts_native_tid) {
    nids = thread_ids(p, ids, TSTATES_MAX);
    if (nids < 0) return nids;
  }
  /* Thread.__init__ sets self.__name: mangled on 2.7 */
  const char *attr = p->major == 2 ? "_Thread__name" : "_name";
  uint32_t m = 0;
  for (int i = 0; i < n && m < cap; i++) {
    int64_t ident = 0;
    if (python_read_int(st->objs, p, ents[i].key, &ident) < 0 || ident <= 0) continue;
    uint32_t tid = 0;
    if (!p->off.ts_native_tid) {
      tid = python_thread_tid(p, (uint64_t)ident);
    } else {
      for (int k = 0; k < nids && !tid; k++)
        if (ids[k][0] == (uint64_t)ident) tid = (uint32_t)ids[k][1];
    }
    uint64_t name = 0;
    char text[PY_THREAD_NAME_MAX];
    if (!tid || python_obj_attr(st->objs, p, ents[i].value, 0, attr, &name) < 0) continue;
    int len = python_read_string(p, name, text, sizeof(text));
    if (len <= 0) continue;
    out[m].tid = tid;
    clean_name(out[m].name, sizeof(out[m].name), text, (size_t)len);
    if (out[m].name[0]) m++;
  }
  return (int)m;
}

/* Is name one threading makes up (MainThread, Thread-N, 3.10+
 * "Thread-N (target)", Dummy-N for threads it did not start)? */
static bool made_up(const char *name) {
  if (strcmp(name, "MainThread") == 0) return true;
  const char *d = strncmp(name, "Thread-", 7) == 0  ? name + 7
                  : strncmp(name, "Dummy-", 6) == 0 ? name + 6
                                                    : NULL;
  if (!d || *d < '0' || *d > '9') return false;
  while (*d >= '0' && *d <= '9')
    d++;
  return *d == '\0' || *d == ' ';
}

/* The table afresh: threading's names; a kernel name set natively wins
 * over a name threading made up. */
static void refresh(struct py_state *st, struct pp_target_entry *t) {
  struct py_target *pt = t->data;
  pt->tnames_read_ns = st->now_ns ? st->now_ns : 1;
  pt->ntnames = 0;
  if (!pt->proc.off.is_modules) return; /* 3.14+: the kernel's names */
  int n = read_python_names(st, pt, pt->tnames, PY_THREAD_NAMES);
  if (n < 0) {
    if (n != -ENOENT) pt->tnames_fallback++; /* -ENOENT: threading not imported */
    pt->threading_mod = 0;
    return;
  }
  pt->ntnames = (uint32_t)n;
  char proc_comm[16] = "", comm[16];
  if (read_comm(t->pid, 0, proc_comm, sizeof(proc_comm)) < 0) return;
  for (int i = 0; i < n; i++) {
    struct py_thread_name *e = &pt->tnames[i];
    if (!made_up(e->name)) continue;
    uint32_t host = python_host_tid(st, t, e->tid);
    if (host && read_comm(t->pid, host, comm, sizeof(comm)) == 0 && strcmp(comm, proc_comm) != 0)
      snprintf(e->name, sizeof(e->name), "%s", comm);
  }
}

static const char *lookup(const struct py_target *pt, uint32_t ns_tid) {
  for (uint32_t i = 0; i < pt->ntnames; i++)
    if (pt->tnames[i].tid == ns_tid) return pt->tnames[i].name;
  return NULL;
}

const char *python_thread_name(struct py_state *st, uint32_t ns_tid) {
  struct pp_target_entry *t = st->cur;
  struct py_target *pt = t->data;
  if (!ns_tid) return NULL;
  if (!pt->tnames && !(pt->tnames = calloc(PY_THREAD_NAMES, sizeof(*pt->tnames)))) return NULL;
  uint64_t age = st->now_ns - pt->tnames_read_ns;
  bool stale =
      !pt->tnames_read_ns || st->now_ns < pt->tnames_read_ns || age >= PY_THREAD_NAMES_REFRESH_NS;
  const char *name = stale ? NULL : lookup(pt, ns_tid);
  if (name) return name;
  if (stale || (age >= PY_THREAD_NAMES_GAP_NS && pt->ntnames < PY_THREAD_NAMES)) {
    refresh(st, t);
    if ((name = lookup(pt, ns_tid))) return name;
  }
  /* not threading's: the kernel's name, remembered until the next read
   * (a thread past the table's size is named at each sample, rare) */
  uint32_t host = python_host_tid(st, t, ns_tid);
  uint32_t slot = pt->ntnames < PY_THREAD_NAMES ? pt->ntnames : PY_THREAD_NAMES - 1;
  if (!host || read_comm(t->pid, host, pt->tnames[slot].name, PY_THREAD_NAME_MAX) < 0) return NULL;
  pt->tnames[slot].tid = ns_tid;
  if (pt->ntnames < PY_THREAD_NAMES) pt->ntnames++;
  return pt->tnames[slot].name;
}
