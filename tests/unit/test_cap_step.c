/* SPDX-License-Identifier: Apache-2.0 */
/* Step capabilities: which capabilities a declaration keeps out of the
 * effective set, the worker lowering them at start, and the kit raising
 * one for a step (a real privileged call that fails before the step and
 * works inside it). */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "polyprof/kit/cap_step.h"
#include "polyprof/plugin.h"
#include "privileges.h"
#include "testlib.h"

#define BIT(n) (1ull << (n))
enum { SETGID = 6, SETUID = 7, SYS_CHROOT = 18, SYS_ADMIN = 21 };

static void test_step_needed(void) {
  CHECK(pp_priv_step_needed(PP_CAP_NEEDS_NSENTER | PP_CAP_NEEDS_PTRACE) == 0);
  CHECK(pp_priv_step_needed(PP_CAP_NEEDS_NSENTER | PP_CAP_STEP_NSENTER | PP_CAP_NEEDS_PTRACE) ==
        (BIT(SYS_ADMIN) | BIT(SYS_CHROOT)));
  CHECK(pp_priv_step_needed(PP_CAP_NEEDS_SETID | PP_CAP_STEP_SETID | PP_CAP_NEEDS_KILL) ==
        (BIT(SETUID) | BIT(SETGID)));
  /* a STEP bit without its NEEDS bit grants nothing */
  CHECK(pp_priv_step_needed(PP_CAP_STEP_NSENTER | PP_CAP_NEEDS_PTRACE) == 0);
  /* everything, all the time: no step */
  CHECK(pp_priv_step_needed(PP_CAP_NEEDS_ROOT | PP_CAP_NEEDS_NSENTER | PP_CAP_STEP_NSENTER) == 0);
  /* before 5.8 perf events are CAP_SYS_ADMIN's: needed all the time then */
  uint64_t with_perf =
      pp_priv_step_needed(PP_CAP_NEEDS_NSENTER | PP_CAP_STEP_NSENTER | PP_CAP_NEEDS_PERFMON);
  CHECK(with_perf & BIT(SYS_CHROOT));
  CHECK(!!(with_perf & BIT(SYS_ADMIN)) == (pp_priv_last_cap() >= 38));
  struct pp_privs p = pp_priv_for_plugin(PP_CAP_NEEDS_NSENTER | PP_CAP_STEP_NSENTER);
  CHECK((p.step & ~p.caps) == 0); /* a step capability is one the worker holds */
}

struct caps {
  uint32_t eff, prm, inh;
};

static uint64_t effective(void) {
  struct {
    uint32_t version;
    int pid;
  } h = {0x20080522, 0};
  struct caps d[2];
  if (syscall(SYS_capget, &h, d) != 0) return 0;
  return (uint64_t)d[0].eff | ((uint64_t)d[1].eff << 32);
}

/* In a child with CAP_SYS_ADMIN: a UTS namespace of its own (so the host
 * name of the machine is not touched), then sethostname() as the
 * privileged call. Exit status: 0 all as expected, else the failed step. */
static int child(void) {
  if (unshare(CLONE_NEWUTS) != 0) return 10;
  if (pp_priv_worker_lower_steps(BIT(SYS_ADMIN)) != 0) return 11;
  if (effective() & BIT(SYS_ADMIN)) return 12;
  if (sethostname("pp-step", 7) == 0 || errno != EPERM) return 13; /* not effective */
  struct pp_cap_step s;
  if (pp_cap_step_begin(&s, PP_CAP_NEEDS_NSENTER) != 0) return 14;
  if (!(effective() & BIT(SYS_ADMIN))) return 15;
  if (sethostname("pp-step", 7) != 0) return 16; /* raised for the step */
  pp_cap_step_end(&s);
  if (effective() & BIT(SYS_ADMIN)) return 17; /* lowered again */
  if (sethostname("pp-step", 7) == 0) return 18;
  /* a capability the thread does not hold is not raised, and not an error */
  if (pp_cap_step_begin(&s, PP_CAP_NEEDS_SETID) != 0) return 19;
  pp_cap_step_end(&s);
  return 0;
}

static void test_step_raise(void) {
  if (geteuid() != 0 || !(effective() & BIT(SYS_ADMIN))) {
    printf("test_cap_step: raising a step capability SKIPPED: needs root with CAP_SYS_ADMIN\n");
    return;
  }
  pid_t pid = fork();
  if (pid == 0) _exit(child());
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECK_EQ_INT(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0);
}

int main(void) {
  test_step_needed();
  test_step_raise();
  return pp_test_finish("test_cap_step");
}
