/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a worker's seccomp filter costs a system call: the same calls timed
 * in this process without a filter (the peer), then in a child under the
 * python plugin's filter as the worker builds it (base set + the plugin's
 * list). One line per figure: ns per call without, with, and the ratio.
 *
 *   build/seccomp_cost [plugins/python/seccomp.txt] [calls]
 *
 * The filter only matches numbers, so kernels from 5.11 cache its verdict
 * per call and the ratio should be about 1; an older kernel runs the
 * filter on every call.
 */
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "worker_sandbox.h"

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ns per call of getppid() and of an 8-byte pread() of /proc/self/stat. */
static void measure(long calls, double out[2]) {
  double t0 = now_ns();
  for (long i = 0; i < calls; i++)
    syscall(SYS_getppid);
  out[0] = (now_ns() - t0) / (double)calls;
  int fd = open("/proc/self/stat", O_RDONLY);
  char buf[8];
  t0 = now_ns();
  for (long i = 0; i < calls / 10; i++)
    if (pread(fd, buf, sizeof(buf), 0) < 0) break;
  out[1] = (now_ns() - t0) / (double)(calls / 10);
  close(fd);
}

int main(int argc, char **argv) {
  const char *list = argc > 1 ? argv[1] : "plugins/python/seccomp.txt";
  long calls = argc > 2 ? atol(argv[2]) : 300000; /* per round */
  if (calls < 1000) calls = 1000;
  struct pp_syscall_set set;
  memset(&set, 0, sizeof(set));
  char err[600];
  if (pp_allowlist_parse(pp_seccomp_base_list, &set, NULL, err, sizeof(err)) < 0 ||
      pp_allowlist_load(list, &set, err, sizeof(err)) < 0) {
    fprintf(stderr, "seccomp_cost: %s\n", err);
    return 1;
  }
  static struct sock_filter prog[4 + 2 * PP_SYSCALL_MAX + 4];
  int n = pp_sandbox_build(&set, prog, sizeof(prog) / sizeof(prog[0]));
  int p[2];
  if (n < 0 || pipe(p) < 0) return 1;
  /* Rounds alternate between this process and a fresh filtered child, and
   * each figure is the best round: on a loaded machine the noise is only
   * ever upwards. */
  double base[2] = {1e18, 1e18}, filtered[2] = {1e18, 1e18};
  for (int round = 0; round < 9; round++) {
    double r[2];
    measure(calls, r);
    for (int k = 0; k < 2; k++)
      if (r[k] < base[k]) base[k] = r[k];
    pid_t pid = fork();
    if (pid == 0) {
      struct sock_fprog fp = {.len = (unsigned short)n, .filter = prog};
      if (prctl(PR_SET_NO_NEW_PRIVS, 1ul, 0ul, 0ul, 0ul) != 0 ||
          syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp) != 0)
        _exit(1);
      measure(calls, r);
      _exit(write(p[1], r, sizeof(r)) == (ssize_t)sizeof(r) ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || read(p[0], r, sizeof(r)) != (ssize_t)sizeof(r)) {
      fprintf(stderr, "seccomp_cost: the filtered child failed\n");
      return 1;
    }
    for (int k = 0; k < 2; k++)
      if (r[k] < filtered[k]) filtered[k] = r[k];
  }
  printf("filter of %s: %d instructions\n", list, n);
  printf("getppid: %.1f ns without filter, %.1f ns with, ratio %.3f\n", base[0], filtered[0],
         filtered[0] / base[0]);
  printf("pread 8 B of /proc/self/stat: %.1f ns without filter, %.1f ns with, ratio %.3f\n",
         base[1], filtered[1], filtered[1] / base[1]);
  return 0;
}
