/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What tells the image we located from whatever the pid runs now.
 *
 * A pid keeps its start time across execve(), and a Python that re-execs
 * itself keeps its executable too, so neither says that every address we
 * hold (_PyRuntime, interpreter head, PyCode_Type, cached code objects) now
 * points into a different image. What does change on exec is the memory
 * layout the kernel chose for the new image: start of the code and of the
 * stack (both randomised with ASLR; with ASLR off a re-exec of the same
 * file lands on the same addresses, so what we hold stays right). One read
 * of /proc/PID/stat gives start time, start_code and start_stack; the
 * executable's identity (device and inode) is added for exec()s into
 * another file.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "polyprof/kit/proc.h"
#include "python.h"

/* Fields 22 (starttime), 26 (startcode) and 28 (startstack) of a stat
 * line, counted as proc(5) does (pid is field 1, comm field 2). */
static int parse_stat(const char *buf, struct py_image_id *id) {
  const char *p = strrchr(buf, ')'); /* comm may hold ')' and spaces */
  if (!p || p[1] != ' ') return -EINVAL;
  p += 2;
  /* A zombie, or a process between exit_mm() and its last breath, has no
   * memory: the kernel shows 0 for start_code and start_stack. That is an
   * exit, not a new image (taken for an exec, it was looked for again and
   * its exit never logged). */
  if (p[0] == 'Z' || p[0] == 'X' || p[0] == 'x') return -ESRCH;
  for (int field = 3; field <= 28; field++) {
    char *end;
    if (field == 22 || field == 26 || field == 28) {
      unsigned long long v = strtoull(p, &end, 10);
      if (end == p) return -EINVAL;
      if (field == 22) id->start_time = v;
      if (field == 26) id->start_code = v;
      if (field == 28) id->start_stack = v;
    }
    p = strchr(p, ' ');
    if (!p) return field == 28 ? 0 : -EINVAL;
    p++;
  }
  return 0;
}

int python_image_id(uint32_t pid, struct py_image_id *id) {
  memset(id, 0, sizeof(*id));
  char path[64], buf[1024];
  snprintf(path, sizeof(path), "/proc/%u/stat", pid);
  int rc = pp_read_file(path, buf, sizeof(buf), NULL);
  if (rc < 0) return rc == -ENOENT ? -ESRCH : rc;
  rc = parse_stat(buf, id);
  if (rc < 0) return rc;
  if (!id->start_code && !id->start_stack) return -ESRCH; /* no memory left: exiting */
  id->exe_id = pp_proc_exe_id(pid);
  return 0;
}

bool python_image_same(const struct py_image_id *a, const struct py_image_id *b) {
  return a->start_time == b->start_time && a->start_code == b->start_code &&
         a->start_stack == b->start_stack && a->exe_id == b->exe_id;
}
