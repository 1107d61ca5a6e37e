/* SPDX-License-Identifier: Apache-2.0 */
/* The ruby plugin's CPU-time alarms (perf task-clock events): an alarm on
 * a thread of this test, every 5 ms of its CPU time, wakes an epoll with
 * its key; burning ~60 ms of CPU yields one overflow per 5 ms of the
 * thread's CPU (the samples' weight), sleeping yields none; a thread that
 * ended hangs its alarm up.
 * Needs perf events (root or CAP_PERFMON): skipped with the reason
 * otherwise. */
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../../plugins/ruby/ruby_cpuclock.c"
#include "testlib.h"

#define PERIOD_NS 5000000ull

static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static volatile uint64_t sink;

static void burn_cpu_ns(uint64_t ns) {
  uint64_t end = thread_cpu_ns() + ns;
  while (thread_cpu_ns() < end)
    for (int i = 0; i < 10000; i++)
      sink += (uint64_t)i;
}

static void *short_thread(void *arg) {
  *(uint32_t *)arg = (uint32_t)syscall(SYS_gettid);
  usleep(200000); /* long enough for the alarm to be set on it */
  return NULL;
}

int main(void) {
  int probe = ruby_cpuclock_probe(PERIOD_NS);
  if (probe < 0) {
    printf("SKIPPED: perf task-clock events unavailable here (%s): needs root or CAP_PERFMON\n",
           strerror(-probe));
    return 0;
  }
  int ep = epoll_create1(EPOLL_CLOEXEC);
  CHECK(ep >= 0);
  struct ruby_thread th = {.pfd = -1};
  uint32_t me = (uint32_t)syscall(SYS_gettid);
  CHECK_EQ_INT(ruby_cpuclock_open(&th, me, PERIOD_NS, ep, 42), 0);
  uint64_t cpu_at_open = thread_cpu_ns();

  /* sleeping: no CPU, no overflow, no wake-up */
  struct epoll_event ev;
  usleep(50000);
  CHECK_EQ_INT(epoll_wait(ep, &ev, 1, 0), 0);
  CHECK_EQ_INT(ruby_cpuclock_drain(&th), 0);

  /* 60 ms of CPU at a 5 ms period: ~12 overflows, the epoll says so */
  burn_cpu_ns(60000000ull);
  CHECK_EQ_INT(epoll_wait(ep, &ev, 1, 1000), 1);
  CHECK(ev.data.u64 == 42);
  uint64_t n = ruby_cpuclock_drain(&th);
  /* the thread keeps using a little CPU (this code), so one more period
   * may end a moment later: asleep, collect it, then compare the total
   * with the CPU the thread used since the alarm was set */
  usleep(50000);
  n += ruby_cpuclock_drain(&th);
  /* a period that ended just before the sleep can be written only once the
   * thread runs again (seen on this VM under load: the last drain then
   * found one more), so count what the next moment brings too */
  n += ruby_cpuclock_drain(&th);
  uint64_t used = thread_cpu_ns() - cpu_at_open;
  fprintf(stderr, "overflows: %llu for %.1f ms of CPU at 5 ms\n", (unsigned long long)n,
          (double)used / 1e6);
  CHECK(n >= 10);
  CHECK(n + 1 >= used / PERIOD_NS && n <= used / PERIOD_NS + 1);
  /* drained: a drain right after a drain finds the ring empty */
  (void)ruby_cpuclock_drain(&th);
  CHECK_EQ_INT(ruby_cpuclock_drain(&th), 0);
  ruby_cpuclock_close(&th);
  CHECK_EQ_INT(th.pfd, -1);
  CHECK(th.ring == NULL);
  CHECK_EQ_INT(ruby_cpuclock_drain(&th), 0); /* closed: no ring, no crash */

  /* a thread that ends hangs its alarm up (the sampler drops it) */
  pthread_t pt;
  uint32_t tid = 0;
  CHECK_EQ_INT(pthread_create(&pt, NULL, short_thread, &tid), 0);
  while (!__atomic_load_n(&tid, __ATOMIC_SEQ_CST))
    usleep(1000);
  struct ruby_thread other = {.pfd = -1};
  CHECK_EQ_INT(ruby_cpuclock_open(&other, tid, PERIOD_NS, ep, 7), 0);
  pthread_join(pt, NULL);
  CHECK_EQ_INT(epoll_wait(ep, &ev, 1, 1000), 1);
  CHECK(ev.data.u64 == 7 && (ev.events & EPOLLHUP));
  ruby_cpuclock_close(&other);
  /* closed without EPOLL_CTL_DEL, it left the set: the hang-up, level
   * triggered, would be reported again otherwise */
  CHECK_EQ_INT(epoll_wait(ep, &ev, 1, 0), 0);

  /* a thread id that does not exist: a clear error, nothing left open */
  struct ruby_thread none = {.pfd = -1};
  CHECK(ruby_cpuclock_open(&none, 0x3fffff, PERIOD_NS, ep, 9) < 0);
  CHECK_EQ_INT(none.pfd, -1);
  close(ep);
  return pp_test_finish("test_ruby_cpuclock");
}
