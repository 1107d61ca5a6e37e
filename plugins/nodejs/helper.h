/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The helper the inspector and attach-maps modes run inside a Node.js
 * process, and the one expression that installs it.
 *
 * The TCP inspector that SIGUSR1 opens is used for exactly one request:
 * Runtime.evaluate of the install expression, which checks the process is
 * the one we mean, creates a private directory (mode 0700, the process's
 * own user) at a path the agent chose, starts a worker thread (the helper)
 * and, when we opened the inspector, closes it before returning. From then
 * on the agent talks to the helper over a unix socket in that directory,
 * which only root and the process's own user can reach, and nothing of
 * ours listens on TCP.
 *
 * The helper (a worker thread, unref'd: it never keeps the process alive):
 *  - listens on <dir>/s for one connection, then closes the listener and
 *    removes the socket and the directory;
 *  - cpu mode: drives V8's sampling profiler of the main thread through an
 *    inspector session connected to it from the worker
 *    (Session.connectToMainThread). Its requests reach the main thread as
 *    V8 interrupts, so a main thread that never returns to its event loop
 *    is profiled too;
 *  - maps mode: nothing to drive (the perf-map addon writes from the main
 *    thread); it only undoes the addon when the agent goes;
 *  - undoes everything it started (profiler, session, addon, process exit
 *    hook, its global) when the agent says stop, when the agent's socket
 *    closes (the agent was killed), or when no agent connected in time;
 *  - at process exit, hands the profile so far to the agent (the main
 *    thread waits for it a bounded time in a process 'exit' listener).
 *
 * Messages are one JSON object per line, both ways:
 *   helper -> agent  {"t":"hello","pid":N,"node":"v20.1.0"}
 *                    {"t":"profile","profile":{...}}   reply to snap
 *                    {"t":"exit","profile":{...}}      the process exits
 *                    {"t":"error","error":"..."}       reply to snap
 *                    {"t":"bye","why":"..."}           the helper ended
 *   agent -> helper  {"t":"snap"}   stop the profile, start the next, send it
 *                    {"t":"stop"}   undo everything and end
 */
#ifndef POLYPROF_NODEJS_HELPER_H
#define POLYPROF_NODEJS_HELPER_H

#include <stddef.h>
#include <stdint.h>

/* The socket the helper listens on, in its directory. */
#define NODEJS_HELPER_SOCKET "s"
/* How long the main thread waits at exit for the helper's last profile. */
#define NODEJS_HELPER_EXIT_WAIT_MS 1500

struct nodejs_helper_params {
  const char *dir;      /* absolute path in the target, [A-Za-z0-9/._-] only */
  const char *addon;    /* maps mode: the addon's path in the target; NULL: cpu mode */
  uint32_t ns_pid;      /* the process's pid in its own namespace */
  const char *pid_ns;   /* readlink of its /proc/<pid>/ns/pid, e.g. "pid:[4026531836]" */
  uint32_t interval_us; /* cpu mode: V8's sampling interval */
  uint32_t wait_ms;     /* how long the helper waits for the agent to connect */
  int close_inspector;  /* close the TCP inspector before returning (we opened it) */
};

/* Writes the install expression into out. Its value is "ok", or a short
 * reason it did nothing ("not the process", "busy: ...", an error); with
 * close_inspector, success closes the inspector and our session with it,
 * so no reply comes. Returns its length, or -ENOSPC / -EINVAL (a path
 * with a character outside the set above). */
int nodejs_helper_install_expr(char *out, size_t cap, const struct nodejs_helper_params *p);

#endif
