/* SPDX-License-Identifier: Apache-2.0 */
/* Worker privileges: the declaration -> capability mapping, the allow-list
 * parser and loader, and the filter program (installed in a child, which
 * must then be stopped by SIGSYS for a call outside the list). */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ipc.h"
#include "polyprof/plugin.h"
#include "privileges.h"
#include "testlib.h"
#include "worker_sandbox.h"

static void test_mapping(void) {
  CHECK(!pp_priv_declared(PP_CAP_RUNTIME | PP_CAP_PERFLESS));
  CHECK(pp_priv_declared(PP_CAP_RUNTIME | PP_CAP_NEEDS_NOTHING));
  CHECK(pp_priv_needed(PP_CAP_NEEDS_NOTHING) == 0);
  uint64_t ptrace = pp_priv_needed(PP_CAP_NEEDS_PTRACE);
  CHECK(ptrace & (1ull << 19)); /* CAP_SYS_PTRACE */
  CHECK(ptrace & (1ull << 2));  /* CAP_DAC_READ_SEARCH */
  CHECK(!(ptrace & (1ull << 21)));
  uint64_t perf = pp_priv_needed(PP_CAP_NEEDS_PERFMON);
  CHECK(perf & (1ull << (pp_priv_last_cap() >= 38 ? 38 : 21)));
  CHECK(perf & (1ull << 14)); /* CAP_IPC_LOCK */
  CHECK(pp_priv_needed(PP_CAP_NEEDS_SETID) == ((1ull << 6) | (1ull << 7)));
  CHECK(pp_priv_needed(PP_CAP_NEEDS_KILL) == (1ull << 5));
  CHECK(pp_priv_needed(PP_CAP_NEEDS_FILE_OVERRIDE) == (1ull << 1));
  CHECK(pp_priv_needed(PP_CAP_NEEDS_FILE_OWNER) == (1ull << 3)); /* CAP_FOWNER */
  /* a step capability only when declared as one */
  CHECK(pp_priv_step_needed(PP_CAP_NEEDS_FILE_OWNER) == 0);
  CHECK(pp_priv_step_needed(PP_CAP_NEEDS_FILE_OWNER | PP_CAP_STEP_FILE_OWNER) == (1ull << 3));
  CHECK(pp_priv_needed(PP_CAP_NEEDS_NSENTER) == ((1ull << 21) | (1ull << 18)));
  char buf[256];
  pp_priv_format((1ull << 5) | (1ull << 19), buf, sizeof(buf));
  CHECK_EQ_STR(buf, "CAP_KILL,CAP_SYS_PTRACE");
  pp_priv_format(0, buf, sizeof(buf));
  CHECK_EQ_STR(buf, "none");
}

static bool has(const struct pp_syscall_set *s, const char *name) {
  int nr = pp_syscall_number(name);
  return nr >= 0 && (s->bits[nr / 8] >> (nr % 8)) & 1;
}

static void test_parse(void) {
  CHECK(pp_syscall_number("read") == SYS_read);
  CHECK_EQ_STR(pp_syscall_name(SYS_process_vm_readv), "process_vm_readv");
  CHECK(pp_syscall_number("no_such_call") == -1);
  struct pp_syscall_set s;
  memset(&s, 0, sizeof(s));
  unsigned unknown = 0;
  char err[200] = "";
  CHECK_EQ_INT(pp_allowlist_parse("# comment\n\n  process_vm_readv   # why\nptrace\r\nnot_a_call\n",
                                  &s, &unknown, err, sizeof(err)),
               0);
  CHECK(has(&s, "process_vm_readv") && has(&s, "ptrace") && !has(&s, "read"));
  CHECK_EQ_INT(unknown, 1);
  CHECK_EQ_INT(pp_allowlist_parse("read\nopen at\n", &s, NULL, err, sizeof(err)), -EINVAL);
  CHECK_CONTAINS(err, "line 2");
  /* the built-in sets parse, and the default set has no credential calls */
  memset(&s, 0, sizeof(s));
  CHECK_EQ_INT(pp_allowlist_parse(pp_seccomp_base_list, &s, NULL, err, sizeof(err)), 0);
  CHECK(has(&s, "exit_group") && has(&s, "sendmsg") && !has(&s, "setns"));
  CHECK_EQ_INT(pp_allowlist_parse(pp_seccomp_default_list, &s, NULL, err, sizeof(err)), 0);
  CHECK(!has(&s, "setns") && !has(&s, "setresuid") && !has(&s, "mount"));
  char path[64];
  CHECK_EQ_INT(pp_allowlist_path("/x/plugins/perf.so", path, sizeof(path)), 0);
  CHECK_EQ_STR(path, "/x/plugins/perf.seccomp");
}

static void test_load(void) {
  char dir[] = "/tmp/pp_sandbox_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char path[128], err[600];
  struct pp_syscall_set s;
  memset(&s, 0, sizeof(s));
  snprintf(path, sizeof(path), "%s/p.seccomp", dir);
  CHECK_EQ_INT(pp_allowlist_load(path, &s, err, sizeof(err)), 0); /* none: default */
  FILE *f = fopen(path, "w");
  fputs("process_vm_readv\n", f);
  fclose(f);
  chmod(path, 0644);
  CHECK_EQ_INT(pp_allowlist_load(path, &s, err, sizeof(err)), 1);
  CHECK(has(&s, "process_vm_readv"));
  chmod(path, 0666); /* anyone could widen it */
  CHECK_EQ_INT(pp_allowlist_load(path, &s, err, sizeof(err)), -EPERM);
  CHECK_CONTAINS(err, "writable by its owner only");
  unlink(path);
  rmdir(dir);
}

/* A child under a filter of the base set: an allowed call works, a call
 * outside it ends the child with SIGSYS (no handler here). */
static void test_filter(void) {
  struct pp_syscall_set s;
  memset(&s, 0, sizeof(s));
  char err[200];
  CHECK_EQ_INT(pp_allowlist_parse(pp_seccomp_base_list, &s, NULL, err, sizeof(err)), 0);
  static struct sock_filter prog[4 + 2 * PP_SYSCALL_MAX + 4];
  int n = pp_sandbox_build(&s, prog, sizeof(prog) / sizeof(prog[0]));
  CHECK(n > 10);
  CHECK_EQ_INT(pp_sandbox_build(&s, prog, 5), -E2BIG);
  pid_t pid = fork();
  if (pid == 0) {
    struct sock_fprog fp = {.len = (unsigned short)n, .filter = prog};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1ul, 0ul, 0ul, 0ul) != 0 ||
        syscall(SYS_seccomp, 1 /* SECCOMP_SET_MODE_FILTER */, 0, &fp) != 0)
      _exit(2);
    if (getppid() <= 0) _exit(3);
    syscall(SYS_personality, 0xffffffffUL);
    _exit(4); /* not reached */
  }
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS);
}

int main(void) {
  test_mapping();
  test_parse();
  test_load();
  test_filter();
  return pp_test_finish("test_worker_sandbox");
}
