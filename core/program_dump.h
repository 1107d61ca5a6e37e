/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `polyprof dump`'s one-shot read (program_dump_now.c) and what cmd_dump.c
 * prints from it: per plugin, the stacks its dump() gave, each under a
 * "[tid N]" root frame.
 */
#ifndef PP_PROGRAM_DUMP_H
#define PP_PROGRAM_DUMP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "profile.h"
#include "program.h"

struct pp_dump {
  pid_t pid;
  uint64_t next_ms;          /* the next attempt (monotonic ms; 0: not started) */
  struct pp_profile **profs; /* per enabled plugin, in the agent's order */
  size_t n;
  bool *done;        /* per plugin: gave stacks of pid, not asked again */
  bool *system_wide; /* per plugin: the native one (its stacks yield to a runtime's) */
  bool read;         /* the stacks to print are in */
  bool native;       /* the system-wide plugin gave native stacks of pid */
  bool session;      /* a runtime plugin without dump() has pid: its session frames are printed */
};

struct pp_dump *pp_dump_new(pid_t pid);
void pp_dump_free(struct pp_dump *d);

/* The tid of a dumped stack (its "[tid N]" root frame), 0 if it has none. */
uint32_t pp_dump_stack_tid(const struct pp_profile *p, const struct pp_stack_rec *s);

#endif
