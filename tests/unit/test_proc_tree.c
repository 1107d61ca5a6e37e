/* SPDX-License-Identifier: Apache-2.0 */
/* The kit's process-tree walk on a real tree: this process's child and the
 * grandchild the child starts, found breadth first; a leaf has none. */
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "polyprof/kit/proc_tree.h"
#include "testlib.h"

static bool holds(const uint32_t *v, size_t n, uint32_t pid) {
  for (size_t i = 0; i < n; i++)
    if (v[i] == pid) return true;
  return false;
}

int main(void) {
  int fds[2];
  if (pipe(fds) < 0) return 1;
  pid_t child = fork();
  if (child == 0) {
    /* the child starts a grandchild, says its pid, and both wait to be killed */
    close(fds[0]);
    pid_t grandchild = fork();
    if (grandchild == 0) {
      pause();
      _exit(0);
    }
    uint32_t g = (uint32_t)grandchild;
    if (write(fds[1], &g, sizeof(g)) != sizeof(g)) _exit(1);
    pause();
    _exit(0);
  }
  close(fds[1]);
  uint32_t grandchild = 0;
  CHECK(child > 0 && read(fds[0], &grandchild, sizeof(grandchild)) == sizeof(grandchild));

  uint32_t found[16];
  size_t n = pp_proc_descendants((uint32_t)getpid(), found, 16);
  CHECK(holds(found, n, (uint32_t)child));
  CHECK(holds(found, n, grandchild));
  CHECK(n >= 2 && found[0] == (uint32_t)child); /* breadth first: the child first */
  CHECK_EQ_INT(pp_proc_descendants(grandchild, found, 16), 0);
  n = pp_proc_descendants((uint32_t)child, found, 16);
  CHECK(n == 1 && found[0] == grandchild);
  CHECK_EQ_INT(pp_proc_descendants((uint32_t)getpid(), found, 1), 1); /* cap holds */

  kill((pid_t)grandchild, SIGKILL);
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  return pp_test_finish("test_proc_tree");
}
