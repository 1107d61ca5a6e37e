/*
 * System-test workload, native C: burns CPU in sys_c_hot() for BUSY_MS out
 * of every PERIOD_MS (a modest duty cycle, so a dozen workloads leave the
 * agent room on a 2-core machine), for at most LIFETIME_S seconds.
 *
 * Usage: sys_work BUSY_MS PERIOD_MS LIFETIME_S
 * With argv[4] = an interpreter path (the exec target): runs
 * sys_exec_native_hot() until SIGUSR1, then execv()s argv[4..] in place,
 * so the same pid turns into another runtime mid-session.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t exec_now;

static void on_usr1(int sig) {
  (void)sig;
  exec_now = 1;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* noinline + volatile: the frame under test must exist and do the work */
__attribute__((noinline)) static unsigned long spin_until(double end) {
  volatile unsigned long x = 1;
  while (now_s() < end)
    for (int i = 0; i < 20000; i++)
      x = x * 6364136223846793005UL + 1442695040888963407UL;
  return x;
}

__attribute__((noinline)) unsigned long sys_c_hot(double ms) {
  return spin_until(now_s() + ms / 1000.0);
}

__attribute__((noinline)) unsigned long sys_exec_native_hot(double ms) {
  return spin_until(now_s() + ms / 1000.0);
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s BUSY_MS PERIOD_MS LIFETIME_S [PROGRAM ARGS...]\n", argv[0]);
    return 2;
  }
  double busy = atof(argv[1]), period = atof(argv[2]), life = atof(argv[3]);
  int exec_target = argc > 4;
  signal(SIGUSR1, on_usr1);
  printf("ready %d\n", (int)getpid());
  fflush(stdout);
  double end = now_s() + life;
  while (now_s() < end) {
    double t0 = now_s();
    if (exec_target)
      sys_exec_native_hot(busy);
    else
      sys_c_hot(busy);
    if (exec_target && exec_now) {
      execv(argv[4], argv + 4);
      perror("execv");
      return 1;
    }
    double left = period / 1000.0 - (now_s() - t0);
    if (left > 0) usleep((useconds_t)(left * 1e6));
  }
  return 0;
}
