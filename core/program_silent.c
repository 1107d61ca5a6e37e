/* SPDX-License-Identifier: Apache-2.0 */
#include "program_silent.h"

#include <stdio.h>

#include "agent.h"
#include "profile.h"

/* The first status a plugin set on a process this session, if any: it
 * names why that process was not sampled (reader refused, attach failed,
 * no perf event). */
static const char *first_status(const struct pp_profile *p) {
  for (size_t k = 0; k < pp_profile_pid_count(p); k++) {
    const struct pp_pid_rec *r = pp_profile_pid_at(p, k);
    if (r->status != PP_PID_OK && r->reason != PP_NO_STR) return pp_profile_str(p, r->reason);
  }
  return NULL;
}

bool pp_program_why_silent(const struct pp_agent *a, size_t i, bool any_samples, char *buf,
                           size_t len) {
  const struct agent_plugin *ap = &a->plugins[i];
  const char *status = first_status(ap->snap);
  if (status) {
    snprintf(buf, len, "%s", status);
    return true;
  }
  if (ap->system_wide) {
    snprintf(buf, len,
             "no sample of the program: it did not run on a CPU, or the kernel "
             "delivered none (see the log)");
    return true;
  }
  const struct pp_target *t;
  size_t n = pp_targets_of(a->targets, i, &t);
  if (n == 0) {
    snprintf(buf, len, "matched no process of the program");
    return !any_samples;
  }
  snprintf(buf, len, "matched %zu process%s, none ran its runtime's code on a CPU", n,
           n == 1 ? "" : "es");
  return true;
}
