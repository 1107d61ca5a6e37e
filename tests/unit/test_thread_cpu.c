/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kit's per-thread on-CPU detection on real threads of this process: a
 * spinning thread runs, a sleeping one does not, a finished one is gone and
 * its descriptors are closed at once; unused descriptors go at the sweep.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "polyprof/kit/thread_cpu.h"
#include "testlib.h"

static atomic_int stop;
static atomic_uint spin_tid, sleep_tid, block_tid;
static int block_pipe[2];

static void *spin(void *arg) {
  (void)arg;
  spin_tid = (unsigned)syscall(SYS_gettid);
  while (!stop) {
  }
  return NULL;
}

static void *nap(void *arg) {
  (void)arg;
  sleep_tid = (unsigned)syscall(SYS_gettid);
  while (!stop)
    usleep(1000);
  return NULL;
}

/* blocked in read() until the end: never runs */
static void *block(void *arg) {
  (void)arg;
  block_tid = (unsigned)syscall(SYS_gettid);
  char c;
  while (read(block_pipe[0], &c, 1) < 0) {
  }
  return NULL;
}

int main(void) {
  pthread_t a, b, k;
  if (pipe(block_pipe) < 0) return 1;
  pthread_create(&k, NULL, block, NULL);
  pthread_create(&a, NULL, spin, NULL);
  pthread_create(&b, NULL, nap, NULL);
  while (!spin_tid || !sleep_tid || !block_tid)
    usleep(1000);
  uint32_t pid = (uint32_t)getpid();
  struct pp_thread_cpu *c = pp_thread_cpu_new(pid, 0);
  int spun = 0, slept = 0;
  for (int i = 0; i < 20; i++) {
    spun += pp_thread_cpu_ran(c, spin_tid) == 1;
    slept += pp_thread_cpu_ran(c, sleep_tid) == 1;
    usleep(10000);
  }
  CHECK(spun >= 10); /* 2 cores: it runs most of the time */
  CHECK(slept <= 5); /* it wakes briefly every ms at most */
  /* idle: a set of the blocked thread alone is idle from its second look
   * on; with the spinning thread in it, (nearly) never */
  usleep(20000); /* the blocked thread has reached its read() */
  struct pp_thread_cpu *quiet = pp_thread_cpu_new(pid, 0);
  CHECK_EQ_INT(pp_thread_cpu_ran_ns(quiet), -1); /* empty: cannot tell */
  CHECK_EQ_INT(pp_thread_cpu_any_running(quiet), -1);
  pp_thread_cpu_state(quiet, block_tid);
  CHECK_EQ_INT(pp_thread_cpu_ran_ns(quiet), -1); /* first look */
  for (int i = 0; i < 5; i++) {
    usleep(2000);
    CHECK_EQ_INT(pp_thread_cpu_ran_ns(quiet), 0);
  }
  CHECK_EQ_INT(pp_thread_cpu_any_running(quiet), 0);
  pp_thread_cpu_state(quiet, spin_tid);
  pp_thread_cpu_ran_ns(quiet); /* the spinning thread's first look */
  int busy = 0, running = 0;
  for (int i = 0; i < 10; i++) {
    usleep(20000);
    busy += pp_thread_cpu_ran_ns(quiet) >= 5000000; /* most of its 20 ms */
    running += pp_thread_cpu_any_running(quiet) == 1;
  }
  CHECK(busy >= 8);
  CHECK(running >= 5);
  pp_thread_cpu_free(quiet);
  char s = pp_thread_cpu_state(c, sleep_tid);
  CHECK(s == 'S' || s == 'R');
  CHECK(pp_thread_cpu_fds(c) >= 3);

  /* a finished thread: gone, and its descriptors closed by that look */
  stop = 1;
  if (write(block_pipe[1], "x", 1) != 1) return 1;
  pthread_join(k, NULL);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  usleep(20000);
  CHECK_EQ_INT(pp_thread_cpu_ran(c, spin_tid), -ESRCH);
  CHECK_EQ_INT(pp_thread_cpu_state(c, sleep_tid), 0);
  CHECK_EQ_INT(pp_thread_cpu_fds(c), 0);

  /* the main thread, asked once, then not: closed by the second sweep */
  CHECK_EQ_INT(pp_thread_cpu_state(c, pid), 'R');
  pp_thread_cpu_sweep(c);
  CHECK_EQ_INT(pp_thread_cpu_fds(c), 1);
  pp_thread_cpu_sweep(c);
  CHECK_EQ_INT(pp_thread_cpu_fds(c), 0);
  /* bounded: a small set evicts */
  struct pp_thread_cpu *one = pp_thread_cpu_new(pid, 1);
  CHECK_EQ_INT(pp_thread_cpu_state(one, pid), 'R');
  CHECK_EQ_INT(pp_thread_cpu_state(one, 1), 0); /* not a thread of ours */
  CHECK_EQ_INT(pp_thread_cpu_fds(one), 1);
  pp_thread_cpu_free(one);
  pp_thread_cpu_free(c);
  return pp_test_finish("test_thread_cpu");
}
