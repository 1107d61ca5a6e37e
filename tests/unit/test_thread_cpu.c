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
static atomic_uint spin_tid, sleep_tid;

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

int main(void) {
  pthread_t a, b;
  pthread_create(&a, NULL, spin, NULL);
  pthread_create(&b, NULL, nap, NULL);
  while (!spin_tid || !sleep_tid)
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
  char s = pp_thread_cpu_state(c, sleep_tid);
  CHECK(s == 'S' || s == 'R');
  CHECK(pp_thread_cpu_fds(c) >= 3);

  /* a finished thread: gone, and its descriptors closed by that look */
  stop = 1;
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
