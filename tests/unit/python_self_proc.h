/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A py_proc for this test process with the given version's offsets: the
 * python readers' unit tests lay out fake objects in their own memory and
 * read them back through the same remote reads a target gets. Include it
 * after the plugin's sources (it needs struct py_proc and the offsets).
 */
#ifndef POLYPROF_TEST_PYTHON_SELF_PROC_H
#define POLYPROF_TEST_PYTHON_SELF_PROC_H

#include <string.h>
#include <unistd.h>

static inline struct py_proc self_proc(int major, int minor) {
  struct py_proc p;
  memset(&p, 0, sizeof(p));
  p.pid = (uint32_t)getpid();
  p.ns_pid = p.pid;
  p.pthread_tid_off = -1;
  p.major = major, p.minor = minor;
  python_offsets_for(major, minor, 0, &p.off);
  return p;
}

#endif
