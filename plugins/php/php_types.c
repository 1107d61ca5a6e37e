/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a PHP stack counts as, by profile type (php.h, struct php_types).
 *
 * The walk reads executor_globals.current_execute_data whatever the process
 * is doing: a request blocked in usleep(), a database call or a lock has
 * its full PHP stack there, exactly as a running one. So the thread's state
 * (/proc/PID/stat, PHP being one thread per process) decides:
 *   cpu     only a process on a CPU (runnable) is walked: a request that
 *           waits is not CPU time
 *   wall    every process at every tick, running or waiting
 *   offcpu  a waiting one also counts the sampling interval, in
 *           microseconds, as an off-CPU sample of its stack
 * Between requests (an FPM worker waiting in accept(), a CLI before its
 * script) current_execute_data is NULL: no PHP frame at all. In the wall
 * and offcpu profiles such a process is one "(idle)" frame, the time the
 * worker spent waiting for work.
 */
#include <string.h>

#include "php.h"

void php_types_start(struct php_types *ty, bool wall, const struct pp_session *s) {
  ty->wall = wall;
  ty->offcpu = (s->flags & PP_SESSION_OFFCPU) != 0;
  /* in wall mode the plain samples are the wall profile's */
  ty->cpu = !wall && !(s->flags & PP_SESSION_NO_CPU);
  uint64_t iv = s->tick_interval_ns ? s->tick_interval_ns
                : s->frequency_hz   ? 1000000000ull / s->frequency_hz
                                    : 1000000000ull / 11;
  ty->interval_us = iv / 1000 ? iv / 1000 : 1;
}

bool php_types_walk(struct php_types *ty, uint32_t pid, char *state) {
  *state = 0;
  if (ty->wall && !ty->offcpu) return true;
  if (pp_proc_state(pid, 0, state) < 0) *state = 0; /* gone: the walk says so */
  if (*state == 'R' || *state == 0 || ty->offcpu) return true;
  ty->off_cpu++;
  return false;
}

void php_types_record(struct php_types *ty, struct pp_stack_table *stacks, uint32_t pid,
                      const char *comm, const struct pp_frame *frames, uint32_t nf, char state) {
  static const struct pp_frame idle = {.name = "(idle)", .kind = PP_FRAME_PSEUDO};
  if (!nf) {
    if (!ty->wall && !ty->offcpu) return; /* no CPU time of PHP code */
    frames = &idle;
    nf = 1;
  }
  bool running = state == 'R' || state == 0;
  if (ty->wall || (ty->cpu && running)) pp_stack_table_add(stacks, pid, pid, comm, frames, nf, 1);
  if (ty->offcpu && !running)
    pp_stack_table_add_typed(stacks, PP_PROFILE_OFFCPU, pid, pid, comm, frames, nf,
                             ty->interval_us);
}
