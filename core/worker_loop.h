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
#include "polyprof/plugin.h"

/* Smallest descriptor this agent accepts: ABI 1.0 ends with fini. */
#define PP_PLUGIN_V1_0_SIZE (offsetof(struct pp_plugin, fini) + sizeof(void (*)(void *)))

/* Shortest tick interval the worker honours (a plugin asking for less would
 * spin the worker at 100% CPU). */
#define PP_MIN_TICK_NS 100000ull

/* Everything the worker loop needs; owned by the loop's process or thread,
 * so a hung inline worker that is abandoned still has valid memory. */
struct pp_worker_ctx {
  char *path; /* the .so */
  char *name; /* expected descriptor name */
  int fd;     /* worker end of the socketpair (non-blocking) */
  bool inline_mode;
  struct pp_host_config cfg;
};

struct pp_worker_ctx *pp_worker_ctx_new(const char *path, const char *name,
                                        const struct pp_host_config *cfg);
void pp_worker_ctx_free(struct pp_worker_ctx *ctx); /* closes fd */

/* A started worker: process (pid) or thread, and the core's end of the
 * socketpair (non-blocking). */
struct pp_spawned {
  pid_t pid;
  pid_t group; /* process group of the worker (== pid), 0 inline */
  bool has_thread;
  pthread_t thread;
  int fd;
};

/* Fork a worker process (or start a thread in inline mode) running
 * pp_worker_loop() for the plugin at `path`. 0, or -errno with err set. */
int pp_worker_spawn(const char *path, const char *name, const struct pp_host_config *cfg,
                    bool inline_mode, struct pp_spawned *out, char *err, size_t errlen);

/* Serve requests until EXIT or until the core goes away. Returns 0 after
 * EXIT, -EPIPE if the core went away, or another -errno. */
int pp_worker_loop(struct pp_worker_ctx *ctx);

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
