/* SPDX-License-Identifier: Apache-2.0 */
/* The .NET plugin's run share (dotnet_runshare.c), on this process's own
 * threads: a spinning thread's samples keep weight, a sleeping thread's
 * none, a thread that does not exist none; schedstat is read at most every
 * 50 ms per thread; the pid-namespace path (tids mapped through
 * /proc/PID/task) finds the same threads. Judged by content, not by
 * amounts: the host may be loaded. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../../plugins/dotnet/dotnet_runshare.c"
#include "testlib.h"

static atomic_int stop;
static atomic_uint busy_tid, sleepy_tid;

static void *busy(void *arg) {
  (void)arg;
  atomic_store(&busy_tid, (unsigned)syscall(SYS_gettid));
  volatile uint64_t x = 1;
  while (!atomic_load(&stop))
    x = x * 6364136223846793005ull + 1;
  return NULL;
}

static void *sleepy(void *arg) {
  (void)arg;
  atomic_store(&sleepy_tid, (unsigned)syscall(SYS_gettid));
  while (!atomic_load(&stop)) {
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

static void run(bool host_tids) {
  struct dotnet_runshare *r = dotnet_runshare_new((uint32_t)getpid(), host_tids);
  CHECK(r != NULL);
  uint64_t looks = 0, kept_busy = 0, kept_sleepy = 0, kept_none = 0;
  uint64_t t0 = pp_clock_ns();
  for (int i = 0; i < 150; i++) { /* 1.5 s of samples every 10 ms */
    kept_busy += dotnet_runshare_weight(r, atomic_load(&busy_tid), 1, &looks);
    kept_sleepy += dotnet_runshare_weight(r, atomic_load(&sleepy_tid), 1, &looks);
    kept_none += dotnet_runshare_weight(r, 0x7fffff00u, 1, &looks);
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  printf("host_tids=%d: kept busy %llu, sleepy %llu, none %llu of 150; %llu looks\n", host_tids,
         (unsigned long long)kept_busy, (unsigned long long)kept_sleepy,
         (unsigned long long)kept_none, (unsigned long long)looks);
  CHECK(kept_busy > 0);
  CHECK(kept_busy <= 150);
  CHECK_EQ_INT(kept_sleepy, 0);
  CHECK_EQ_INT(kept_none, 0);
  /* at most one look per 50 ms per thread, the missing one included */
  uint64_t windows = (pp_clock_ns() - t0) / 50000000u + 2;
  CHECK(looks <= 3 * windows);
  dotnet_runshare_reset(r);
  CHECK_EQ_INT(dotnet_runshare_weight(r, atomic_load(&busy_tid), 1, &looks), 0); /* new window */
  dotnet_runshare_free(r);
}

int main(void) {
  pthread_t a, b;
  pthread_create(&a, NULL, busy, NULL);
  pthread_create(&b, NULL, sleepy, NULL);
  while (!atomic_load(&busy_tid) || !atomic_load(&sleepy_tid))
    usleep(1000);
  run(true);
  run(false);
  atomic_store(&stop, 1);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  dotnet_runshare_free(NULL);
  return pp_test_finish("dotnet_runshare");
}
