/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `polyprof check`, the workers' part: what each plugin's worker process
 * holds once started (docs/security.md): its capabilities (what the plugin
 * declares, cut to what the agent has), no_new_privs, its seccomp
 * allow-list, the capabilities it raises for single steps only and the
 * file system it sees.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "privileges.h"
#include "profile_mode.h"
#include "session.h"
#include "supervisor.h"
#include "worker_fs_view.h"
#include "worker_sandbox.h"

static unsigned set_count(const struct pp_syscall_set *s) {
  unsigned n = 0;
  for (size_t i = 0; i < sizeof(s->bits); i++)
    n += (unsigned)__builtin_popcount(s->bits[i]);
  return n;
}

/* "allow-list <file> (N calls with the base set)", or why not. */
static void describe_list(const char *plugin_path, char *buf, size_t len) {
  struct pp_syscall_set set;
  memset(&set, 0, sizeof(set));
  char why[512] = "";
  pp_allowlist_parse(pp_seccomp_base_list, &set, NULL, why, sizeof(why));
  char list[4200];
  char *real = realpath(plugin_path, NULL);
  int rc = pp_allowlist_path(real ? real : plugin_path, list, sizeof(list));
  free(real);
  if (rc == 0) rc = pp_allowlist_load(list, &set, why, sizeof(why));
  if (rc < 0) {
    snprintf(buf, len, "UNUSABLE: %s (the worker will not start)", why);
  } else if (rc == 0) {
    pp_allowlist_parse(pp_seccomp_default_list, &set, NULL, why, sizeof(why));
    snprintf(buf, len, "filter, NO allow-list of its own: the default set (%u calls)",
             set_count(&set));
  } else {
    snprintf(buf, len, "filter, %s (%u calls with the base set)", list, set_count(&set));
  }
}

void pp_cmd_print_worker_privileges(const struct pp_config *cfg, const struct pp_plugin_info *infos,
                                    size_t n, FILE *out) {
  uint64_t agent = pp_priv_agent_caps();
  fprintf(out, "plugin workers (what each one holds once started):\n");
  for (size_t i = 0; i < n; i++) {
    const struct pp_plugin_info *pi = &infos[i];
    if (pi->error) continue;
    const struct pp_plugin_config *pc = pp_config_plugin(cfg, pi->desc.name);
    const char *iso = pc && pc->isolation ? pc->isolation : cfg->isolation;
    fprintf(out, "  %s%s\n", pi->desc.name, pc && pc->enabled ? "" : " (disabled)");
    if (iso && strcmp(iso, "inline") == 0) {
      fprintf(out,
              "    isolation: inline: runs inside the agent with all of the agent's "
              "privileges, no seccomp filter\n");
      continue;
    }
    /* what the worker gets for this command line (as worker.c asks it) */
    uint64_t declared = pi->desc.capabilities | pp_profile_types_step_caps(pc);
    uint64_t needed = pp_priv_needed(declared);
    struct pp_privs p = pp_priv_for_plugin(declared);
    char caps[1024], missing[1024], list[4800];
    pp_priv_format(p.caps, caps, sizeof(caps));
    fprintf(out, "    capabilities: %s%s\n", caps,
            pi->desc.capabilities & PP_CAP_NEEDS_ROOT
                ? " (declares PP_CAP_NEEDS_ROOT: every capability of the agent)"
                : "");
    char always[1024], step[1024];
    pp_priv_format(p.caps & ~p.step, always, sizeof(always));
    pp_priv_format(p.step, step, sizeof(step));
    fprintf(out, "    always effective: %s\n", always);
    fprintf(out, "    for single steps only (permitted, raised around the step): %s\n", step);
    uint64_t asked = pp_profile_types_step_caps_possible(&pi->desc);
    if (asked && !pp_profile_types_step_caps(pc)) {
      struct pp_privs more = pp_priv_for_plugin(pi->desc.capabilities | asked);
      pp_priv_format(more.step & ~p.step, step, sizeof(step));
      fprintf(out,
              "    for single steps with native allocations (--mode alloc with --pids, run or "
              "attach; raised around each uprobe open): %s\n",
              step);
    }
    if (needed & ~agent & ~(declared & PP_CAP_NEEDS_ROOT ? ~0ull : 0ull)) {
      pp_priv_format(needed & ~agent, missing, sizeof(missing));
      fprintf(out, "    declared but MISSING in the agent: %s\n", missing);
    }
    fprintf(out, "    no_new_privs: yes\n");
    describe_list(pi->path, list, sizeof(list));
    fprintf(out, "    seccomp: %s\n", list);
    char view[600];
    pp_fs_view_describe(pi->desc.name, view, sizeof(view));
    fprintf(out, "    mount view: %s\n", view);
  }
}
