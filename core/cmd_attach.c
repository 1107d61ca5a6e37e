/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `polyprof attach PID [--subprocesses]`: profile a running program for -d
 * seconds, or until Ctrl-C or its exit, and print the profile.
 */
#include <stdlib.h>
#include <string.h>

#include "program.h"

/* The single PID operand, checked; -1 with the reason printed. */
long pp_program_pid_operand(const struct pp_cli *cli, const char *command) {
  if (cli->operand_count != 1) {
    fprintf(stderr, "polyprof: %s needs one PID (polyprof %s PID)\n", command, command);
    return -1;
  }
  char *end;
  long pid = strtol(cli->operands[0], &end, 10);
  char err[512];
  if (*end || end == cli->operands[0]) {
    fprintf(stderr, "polyprof: %s: '%s' is not a pid\n", command, cli->operands[0]);
    return -1;
  }
  if (pp_program_check_pid(pid, err, sizeof(err)) < 0) {
    fprintf(stderr, "polyprof: %s: %s\n", command, err);
    return -1;
  }
  return pid;
}

int pp_cmd_attach(struct pp_config *cfg, const struct pp_cli *cli) {
  struct pp_program pr;
  memset(&pr, 0, sizeof(pr));
  long pid = pp_program_pid_operand(cli, "attach");
  if (pid < 0 || pp_program_setup(&pr, cli, cfg, "attach") != 0) {
    pp_program_discard(&pr);
    pp_config_free(cfg);
    free(cfg);
    return 2;
  }
  pr.root = (pid_t)pid;
  pr.follow_children = pp_cli_flag_value(cli, "--subprocesses") != NULL;
  return pp_program_profile(&pr, cfg);
}
