/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `polyprof run [OPTIONS] -- CMD [ARGS]`: start the program, profile it and
 * (unless --no-subprocesses) the processes it starts until it exits, -d
 * runs out or Ctrl-C, print the profile, and exit with the program's own
 * status (128 + signal when a signal ended it). SIGTERM, SIGHUP, SIGQUIT
 * and a SIGINT that the terminal did not send to the program as well go to
 * the program, as from any wrapper.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "program.h"

static int exit_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

/* Fork and exec; the parent learns of a failed exec through a pipe that a
 * successful exec closes. The child pid, or -1 with the reason printed. */
static pid_t start_program(const struct pp_cli *cli, const sigset_t *child_mask) {
  char **argv = calloc(cli->operand_count + 1, sizeof(*argv));
  int pfd[2];
  if (!argv || pipe2(pfd, O_CLOEXEC) < 0) {
    free(argv);
    fprintf(stderr, "polyprof: run: %s\n", strerror(errno));
    return -1;
  }
  for (size_t i = 0; i < cli->operand_count; i++)
    argv[i] = (char *)cli->operands[i];
  pid_t pid = fork();
  if (pid == 0) {
    close(pfd[0]);
    sigprocmask(SIG_SETMASK, child_mask, NULL);
    execvp(argv[0], argv);
    int e = errno;
    ssize_t w = write(pfd[1], &e, sizeof(e));
    (void)w;
    _exit(127);
  }
  int e = errno;
  close(pfd[1]);
  free(argv);
  if (pid < 0) {
    close(pfd[0]);
    fprintf(stderr, "polyprof: run: cannot start a process: %s\n", strerror(e));
    return -1;
  }
  ssize_t r;
  do
    r = read(pfd[0], &e, sizeof(e));
  while (r < 0 && errno == EINTR);
  close(pfd[0]);
  if (r == (ssize_t)sizeof(e)) {
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    fprintf(stderr, "polyprof: run: cannot run '%s': %s\n", cli->operands[0], strerror(e));
    return -1;
  }
  return pid;
}

int pp_cmd_run_program(struct pp_config *cfg, const struct pp_cli *cli) {
  struct pp_program pr;
  memset(&pr, 0, sizeof(pr));
  int rc = pp_program_setup(&pr, cli, cfg, "run");
  /* a SIGTERM between the fork and the session's handlers would end
   * polyprof and leave the program running: held until they are in place */
  sigset_t forwarded, old_mask;
  sigemptyset(&forwarded);
  sigaddset(&forwarded, SIGTERM);
  sigaddset(&forwarded, SIGINT);
  sigaddset(&forwarded, SIGHUP);
  sigaddset(&forwarded, SIGQUIT);
  sigprocmask(SIG_BLOCK, &forwarded, &old_mask);
  pid_t pid = rc ? -1 : start_program(cli, &old_mask);
  if (pid < 0) {
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    pp_program_discard(&pr);
    pp_config_free(cfg);
    free(cfg);
    return 2;
  }
  pr.root = pid;
  pr.is_child = true;
  /* unreaped, the pid is still our child's: the pidfd keeps naming it
   * after it is reaped, so forwarded signals never hit a recycled pid */
  pr.pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  pr.follow_children = !pp_cli_flag_value(cli, "--no-subprocesses");
  rc = pp_program_profile(&pr, cfg);
  sigprocmask(SIG_UNBLOCK, &forwarded, NULL); /* the session failed before its handlers */
  /* -d ran out or Ctrl-C: the program goes on, and its status is still ours */
  while (!pr.ended) {
    if (waitpid(pid, &pr.status, 0) == pid)
      pr.ended = true;
    else if (errno != EINTR)
      break;
  }
  if (rc) return rc;
  return pr.ended ? exit_status(pr.status) : 1;
}
