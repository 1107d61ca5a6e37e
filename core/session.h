/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's run loop: load plugins, start their workers, hand them targets
 * from the /proc scan, cut the timeline into sessions of `duration` seconds
 * (snapshot without stopping, so consecutive sessions have no gap), merge,
 * enrich and write each session's profile.
 *
 * Signals: SIGTERM/SIGINT end the current session early, still write it,
 * and return 0. SIGHUP reloads the configuration and plugin directory at the
 * next session boundary; a bad new configuration is rejected and the running
 * one kept.
 */
#ifndef PP_SESSION_H
#define PP_SESSION_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "supervisor.h"

/* Builds a fresh configuration (file + command line) for SIGHUP reloads.
 * 0, or -1 with err set. */
typedef int (*pp_config_loader)(void *ctx, struct pp_config *out, char err[PP_MAX_ERR]);

/* Loads the plugins in cfg->plugin_dir and binds their configuration.
 * On a configuration error returns -1 with err set (exit code 2 material);
 * refused plugins are only logged. The infos array is owned by the caller
 * (pp_registry_free). */
int pp_agent_load_plugins(struct pp_config *cfg, struct pp_plugin_info **infos, size_t *count,
                          char err[PP_MAX_ERR]);

/* Runs sessions until done (single shot) or a stop signal (continuous).
 * Takes ownership of cfg. Returns the process exit code. */
int pp_agent_run(struct pp_config *cfg, pp_config_loader reload, void *reload_ctx);

/* The one-program commands (run -- CMD, attach, dump) drive the same loop
 * through these. No output directory is needed: the profile goes to
 * `session` (files are written too when -o is given). */
struct pp_agent;
struct session_times;
struct pp_agent_hooks {
  void *ctx;
  /* After every wake-up (SIGCHLD is one): may re-point the pid filter
   * (children followed); true ends profiling (the program is gone). */
  bool (*poll)(void *ctx, struct pp_agent *a);
  /* Each session's merged, enriched profile, once written. */
  void (*session)(void *ctx, struct pp_agent *a, const struct session_times *t);
  /* run's program as a pidfd (forward_signals): SIGTERM, SIGHUP and SIGQUIT
   * go to it instead of ending the session; its exit ends it (poll). SIGINT
   * ends the session and goes to it too, unless the terminal sent it (then
   * the program had its own Ctrl-C). The
   * handler stays after the run returns, so that a signal that comes while
   * the caller waits for the program still reaches it. */
  bool forward_signals;
  int forward_pidfd;
};
int pp_agent_run_hooked(struct pp_config *cfg, const struct pp_agent_hooks *hooks);
/* The profile type (PP_PROFILE_*) the session hook finds in the merged
 * profile: the last one written, cpu whenever it is asked for. */
unsigned pp_agent_merged_type(const struct pp_agent *a);

#endif
