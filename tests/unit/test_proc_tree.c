/* SPDX-License-Identifier: Apache-2.0 */
/* The kit's process-tree walk on a real tree: this process's child and the
 * grandchild the child starts, found breadth first; a leaf has none. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "polyprof/kit/proc_tree.h"
#include "testlib.h"

static bool holds(const uint32_t *v, size_t n, uint32_t pid) {
  for (size_t i = 0; i < n; i++)
    if (v[i] == pid) return true;
  return false;
}

static volatile uint32_t other_tid;
static volatile int other_stop;

static void *other_thread(void *arg) {
  (void)arg;
  other_tid = (uint32_t)syscall(SYS_gettid);
  while (!other_stop)
    usleep(1000);
  return NULL;
}

/* The threads of this process: the main one and one started here; a cap
 * holds; a pid that is no process says so. */
static void threads_of_self(void) {
  pthread_t th;
  CHECK_EQ_INT(pthread_create(&th, NULL, other_thread, NULL), 0);
  while (!other_tid)
    usleep(1000);
  uint32_t tids[64];
  size_t n = 0;
  CHECK_EQ_INT(pp_proc_threads((uint32_t)getpid(), tids, 64, &n), 0);
  CHECK(holds(tids, n, (uint32_t)getpid()));
  CHECK(holds(tids, n, other_tid));
  CHECK_EQ_INT(pp_proc_threads((uint32_t)getpid(), tids, 1, &n), 0);
  CHECK_EQ_INT((int)n, 1);
  CHECK_EQ_INT(pp_proc_threads(0x7ffffff0u, tids, 64, &n), -ENOENT);
  CHECK_EQ_INT((int)n, 0);
  other_stop = 1;
  pthread_join(th, NULL);
}

int main(void) {
  threads_of_self();
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
