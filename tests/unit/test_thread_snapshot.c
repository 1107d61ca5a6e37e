/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kit's thread snapshot on a child process blocked in read(): its
 * registers and stack top are read (the stack copy starts at sp and holds
 * the child's marker), the child runs on afterwards, not stopped and not
 * traced; a thread id that does not exist is refused with -ESRCH.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "polyprof/kit/proc.h"
#include "polyprof/kit/thread_snapshot.h"
#include "testlib.h"

#define MARKER 0x5eed5eed5eed5eedull

/* The child: a marker in its frame, then blocked in read() for good. */
static void child(int rfd) {
  volatile unsigned long long marker = MARKER;
  char c;
  for (;;)
    if (read(rfd, &c, 1) == 1) break;
  (void)marker;
  _exit(0);
}

static void proc_status(pid_t pid, char *state, long *tracer) {
  char path[64], buf[2048];
  snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
  *state = 0;
  *tracer = -1;
  if (pp_read_file(path, buf, sizeof(buf), NULL) < 0) return;
  const char *s = pp_proc_status_field(buf, "State:");
  const char *t = pp_proc_status_field(buf, "TracerPid:");
  while (s && *s == '\t')
    s++;
  if (s) *state = *s;
  if (t) *tracer = strtol(t, NULL, 10);
}

int main(void) {
  int fds[2];
  if (pipe(fds) < 0) return 1;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[1]);
    child(fds[0]);
  }
  close(fds[0]);
  struct timespec nap = {0, 100 * 1000000};
  nanosleep(&nap, NULL); /* the child reaches read() */

  static uint8_t stack[16384];
  struct pp_thread_snapshot snap;
  char why[256];
  int rc = pp_thread_snapshot((uint32_t)pid, (uint32_t)pid, stack, sizeof(stack), 50, &snap, why,
                              sizeof(why));
  if (rc != 0) fprintf(stderr, "snapshot: %s\n", why);
  CHECK_EQ_INT(rc, 0);
  CHECK(snap.ip != 0 && snap.sp != 0);
  CHECK(snap.stack_len > 64 && snap.stack_len <= sizeof(stack));
  CHECK(snap.state_before == 'S');
  CHECK(snap.held_ns > 0 && snap.held_ns < 1000000000ull);
  bool marker = false;
  for (size_t off = 0; off + 8 <= snap.stack_len; off += 8) {
    unsigned long long v;
    memcpy(&v, stack + off, 8);
    if (v == MARKER) marker = true;
  }
  CHECK(marker);
  /* let go, it restarts its read() and sleeps in it again (a moment
   * running first) */
  char state;
  long tracer;
  for (int i = 0; i < 100; i++) {
    proc_status(pid, &state, &tracer);
    if (state != 'R') break;
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  CHECK(state == 'S');
  CHECK_EQ_INT(tracer, 0);

  /* gone: refused, nothing held */
  rc =
      pp_thread_snapshot(999999999u, 999999999u, stack, sizeof(stack), 50, &snap, why, sizeof(why));
  CHECK_EQ_INT(rc, -ESRCH);

  /* the child still reads its pipe: it wakes and exits normally */
  CHECK_EQ_INT((int)write(fds[1], "x", 1), 1);
  int status = 0;
  CHECK_EQ_INT(waitpid(pid, &status, 0), pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return pp_test_finish("test_thread_snapshot");
}
