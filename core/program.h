/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one-program commands (docs/one-program.md): `run -- CMD`, `attach PID`
 * and `dump PID` drive the agent's own session loop (session.h) with a pid
 * filter that follows the program's children, and print the profile
 * instead of writing session files.
 *
 * Each command returns the process exit code: 2 for bad input (one line on
 * stderr, nothing written), run's own program's status otherwise.
 */
#ifndef PP_PROGRAM_H
#define PP_PROGRAM_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "cli.h"
#include "config.h"
#include "output/table.h"

enum pp_program_format {
  PP_PROGRAM_TABLE,
  PP_PROGRAM_COLLAPSED,
  PP_PROGRAM_DUMP, /* dump's threads and stacks (cmd_dump.c) */
  PP_PROGRAM_DUMP_JSON,
  PP_PROGRAM_FILE, /* a format of the output table (gecko, heatmap, html...): file_format */
};

struct pp_program {
  pid_t root;           /* the program */
  bool is_child;        /* ours to reap (run): its status is kept */
  bool follow_children; /* its descendants are profiled too */
  bool ended;           /* it exited (or was reaped) */
  int status;           /* waitpid status when is_child and ended */
  int pidfd;            /* is_child: the program as a pidfd, -1 if the kernel has none */
  enum pp_program_format format;
  const struct pp_output_format *file_format; /* PP_PROGRAM_FILE */
  struct pp_table_opts table;
  const char *output; /* --output FILE, NULL: stdout */
  char *source_root;  /* heatmap: relative source paths are read from here */
  char *output_tmp;   /* where it is written before the rename */
  FILE *out;
  int frequency_hz;
  const char *runtime;  /* what the program runs in ("python"... "native"): its defaults */
  struct pp_dump *dump; /* dump: the one-shot read (cmd_dump.c) */
  bool wrote;           /* a session was printed */
  int print_rc;         /* 0, or why the output failed */
};

/* Reads the one-program flags (--format, --output, --sort, --limit, -i)
 * and sets what these commands change in cfg (rate, single session as long
 * as the program lives or -d, wall mode where a runtime has it, no files of
 * the daemon's). Opens the output. 0, or 2 with a message on stderr. */
int pp_program_setup(struct pp_program *pr, const struct pp_cli *cli, struct pp_config *cfg,
                     const char *command);

/* Profiles pr->root with cfg (owned from here on) until it ends, -d or
 * Ctrl-C, then prints. Returns 0, or the agent's exit code on failure. */
int pp_program_profile(struct pp_program *pr, struct pp_config *cfg);

/* Drops the output of a command that ends before profiling (bad input). */
void pp_program_discard(struct pp_program *pr);

/* 0: pid is alive and ours to profile (root: any). Otherwise a message
 * naming the pid ("no process 123", "pid 1 belongs to root, not to you"). */
int pp_program_check_pid(long pid, char *err, size_t cap);

/* The single PID operand of attach and dump, checked as above; -1 with the
 * reason on stderr. */
long pp_program_pid_operand(const struct pp_cli *cli, const char *command);

/* dump's one-shot read: from shortly after the session started, every
 * plugin's dump() (each thread's stack now, with its tid) is asked for
 * until one gives a stack of the process; true ends the session then. */
struct pp_agent;
struct pp_dump;
bool pp_dump_poll(struct pp_dump *d, struct pp_agent *a);

/* dump's text or JSON for pid: the one-shot read's threads when there was
 * one, else the session's profile (plugins without dump(), or none read in
 * time): per thread name, the stack seen most often. */
void pp_dump_session(struct pp_dump *d, FILE *f, const struct pp_profile *session, pid_t pid,
                     bool json);

/* The runtime a program runs in, from run's command line (a wrapper such
 * as timeout or env looked through) or a process's executable: "python",
 * "ruby", "php", "nodejs", "java", "dotnet", or "native" (anything else). */
const char *pp_program_runtime_of_argv(const char *const *argv, size_t argc);
const char *pp_program_runtime_of_pid(pid_t pid);

/* The default rate for one program of that runtime: 10 kHz where its
 * plugin sustains it, the highest rate it sustains otherwise. */
int pp_program_default_hz(const char *runtime);

int pp_cmd_run_program(struct pp_config *cfg, const struct pp_cli *cli);
int pp_cmd_attach(struct pp_config *cfg, const struct pp_cli *cli);
int pp_cmd_dump(struct pp_config *cfg, const struct pp_cli *cli);

#endif
