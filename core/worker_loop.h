/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to the supervisor (registry.c, worker*.c): the loop that hosts a
 * plugin (in a worker process, or in a thread in inline mode) and the helpers
 * both sides of a fork need.
 */
#ifndef PP_WORKER_LOOP_H
#define PP_WORKER_LOOP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "host.h"
#include "ipc.h"
#include "polyprof/plugin.h"

/* Smallest descriptor this agent accepts: ABI 1.0 ends with fini. */
#define PP_PLUGIN_V1_0_SIZE (offsetof(struct pp_plugin, fini) + sizeof(void (*)(void *)))

/* Shortest tick interval the worker honours (a plugin asking for less would
 * spin the worker at 100% CPU). */
#define PP_MIN_TICK_NS 100000ull

/* Everything the worker loop needs before INIT; owned by the loop's process
 * or thread, so a hung inline worker that is abandoned still has valid
 * memory. Which plugin to load and its configuration arrive with INIT (see
 * pp_worker_init_encode), the same way in every mode. */
struct pp_worker_ctx {
  int fd; /* worker end of the socketpair (non-blocking) */
  bool inline_mode;
  /* Called with INIT's plugin path and name before the plugin is loaded
   * (the worker process enters its sandbox there); NULL: nothing. 0, or
   * -errno with err set: INIT fails with that reason. */
  int (*before_load)(int fd, const char *path, const char *name, char *err, size_t errlen);
};

struct pp_worker_ctx *pp_worker_ctx_new(int fd, bool inline_mode);
void pp_worker_ctx_free(struct pp_worker_ctx *ctx); /* closes fd */

/* The INIT request's payload: str path of the .so, str expected descriptor
 * name, then the plugin's configuration (pp_host_config_encode). */
void pp_worker_init_encode(struct pp_wbuf *b, const char *path, const char *name,
                           const struct pp_host_config *cfg);

/* A started worker: process (pid) or thread, and the core's end of the
 * socketpair (non-blocking). */
struct pp_spawned {
  pid_t pid;
  pid_t group; /* process group of the worker (== pid), 0 inline */
  bool has_thread;
  pthread_t thread;
  int fd;
};

/* Start a worker for plugin `name`: fork and exec the worker executable
 * `exe` (which runs pp_worker_loop()), or in inline mode (exe NULL) start a
 * thread running it. The plugin itself is loaded by INIT. 0, or -errno with
 * err set (the errno of execve() if the executable could not be run). A
 * worker process holds exactly privs' capabilities (privileges.h). */
struct pp_privs;
int pp_worker_spawn(const char *exe, const char *name, bool inline_mode,
                    const struct pp_privs *privs, struct pp_spawned *out, char *err, size_t errlen);

/* Serve requests until EXIT or until the core goes away. Returns 0 after
 * EXIT, -EPIPE if the core went away, or another -errno. */
int pp_worker_loop(struct pp_worker_ctx *ctx);

/* The name of a worker process ("pp-<plugin>", cut to what comm holds). */
void pp_worker_comm(const char *name, char out[16]);

/* In a freshly forked child: die with the parent (PR_SET_PDEATHSIG, and exit
 * at once if `parent` is already gone), own process group and default signal
 * handlers with SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGPIPE ignored (the agent
 * decides when its workers end), comm `comm`, stdin/stdout on /dev/null,
 * every inherited fd closed but stderr and keep_fd, which is moved to fd 3
 * (close-on-exec). Returns the new number of keep_fd (3). */
int pp_worker_child_setup(pid_t parent, int keep_fd, const char *comm);

/* "SIGSEGV" (or "signal 42"). Static storage. */
const char *pp_signal_name(int sig);

/* waitpid() a child until deadline_ns (monotonic) without blocking past it.
 * true and *status if reaped (or already gone: status 0). */
bool pp_reap(pid_t pid, uint64_t deadline_ns, int *status);

#endif
