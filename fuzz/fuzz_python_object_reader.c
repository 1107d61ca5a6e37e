/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the python plugin's object reader and thread names
 * (plugins/python/object_reader.c, thread_names.c) over a memory image
 * (fuzz_memimage.h) standing for the target: a str-keyed dict lookup and
 * a dict's entries (2.7 open addressing, 3.6-3.10 and 3.11-3.13 key
 * tables, combined and split), an instance attribute (a __dict__ at
 * tp_dictoffset, or 3.11-3.13 shared keys with values before or inline
 * after the object), an int (3.x digits before and after 3.12's lv_tag,
 * 2.7 int and long), and threading.Thread.name resolved from
 * sys.modules['threading']._active as the sampler asks for it. Every
 * pointer, count and size comes from the image. Seeds are images of each
 * layout family written by seed_python_objects.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "fuzz_memimage.h"
#include "fuzz_python_object_reader.h"
#include "native.h"
#include "object_reader.h"
#include "python.h"

static uint64_t sink;

/* The sampler's pid-namespace map is not under test: no thread has a
 * host tid, so a name comes from threading or not at all. */
uint32_t python_host_tid(struct py_state *st, struct pp_target_entry *t, uint32_t ns_tid) {
  (void)st, (void)t, (void)ns_tid;
  return 0;
}

static void check_name(const char *name) {
  if (!name) return;
  size_t len = strnlen(name, PY_THREAD_NAME_MAX);
  if (len == 0 || len == PY_THREAD_NAME_MAX) abort();
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)name[i];
    if (c < 32 || c == 127 || c == ';') abort(); /* cleaned for the collapsed format */
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct py_objimg_hdr h;
  if (!pp_fuzz_image_load(data, size, sizeof(h))) return 0;
  memcpy(&h, data, sizeof(h));
  struct py_target *pt = calloc(1, sizeof(*pt));
  struct py_objreader *r = python_objreader_new();
  if (!pt || !r) abort();
  struct py_proc *p = &pt->proc;
  p->pid = p->ns_pid = 0; /* the image answers for any pid; /proc/0 has no names */
  p->pthread_tid_off = h.pthread_tid_off >= 0 && h.pthread_tid_off < 4096 ? h.pthread_tid_off : -1;
  if (python_offsets_for(h.major, h.minor, 0, &p->off) < 0) goto out;
  p->major = h.major, p->minor = h.minor;
  p->interp_head = h.interp_head;
  if (h.types & 1) p->str_type = h.str_type;
  if (h.types & 2) p->long_type = h.long_type;

  uint64_t v = 0;
  if (python_dict_get(r, p, h.dict, "_active", &v) == 0 && !python_obj_plausible(v)) abort();
  struct py_dict_entry ents[100];
  int n = python_dict_entries(r, p, h.dict, ents, 100);
  if (n > 100) abort();
  for (int i = 0; i < n; i++)
    if (!python_obj_plausible(ents[i].key) || !python_obj_plausible(ents[i].value)) abort();
  if (python_obj_attr(r, p, h.obj, 0, h.major == 2 ? "_Thread__name" : "_name", &v) == 0 &&
      !python_obj_plausible(v))
    abort();
  int64_t iv = 0;
  if (python_read_int(r, p, h.ival, &iv) == 0) sink += (uint64_t)iv;

  /* thread names as the sampler asks: the first read fills the table,
   * the second is answered from it */
  struct pp_target_entry t;
  memset(&t, 0, sizeof(t));
  t.data = pt;
  struct py_state st;
  memset(&st, 0, sizeof(st));
  st.cur = &t;
  st.objs = r;
  st.now_ns = 1000000000ull;
  check_name(python_thread_name(&st, h.ns_tid));
  check_name(python_thread_name(&st, h.ns_tid));
  if (pt->ntnames > PY_THREAD_NAMES) abort();
  for (uint32_t i = 0; i < pt->ntnames; i++)
    check_name(pt->tnames[i].name);
out:
  free(pt->tnames);
  free(pt);
  python_objreader_free(r);
  pp_fuzz_image_unload();
  return 0;
}
