/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Debug output (output.debug_plugin_totals, --debug-plugin-totals): each
 * plugin's unmerged per-pid sample totals of a session, written next to the
 * merged profile as <stem>.plugins.json (link last_plugins.json, rotated with
 * the others). The merged .col carries no pids and its runtime stacks are
 * scaled to perf's counts, so this file is the only way to see what perf
 * itself counted for a pid: the system test (tests/system/) checks the merge
 * against it, and a user can tell "the runtime saw nothing" from "perf saw
 * nothing" when a process looks wrong.
 *
 *   {"session": 3, "plugins": {"perf": {"status": "ok", "samples": 812,
 *     "pids": {"1234": {"comm": "python3", "samples": 40, "status": "ok"}}}},
 *    "merged": {"1234": 40}}
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>

#include "agent.h"
#include "log.h"
#include "output/files.h"
#include "session_debug.h"

static const char *status_name(uint32_t s) {
  switch (s) {
    case PP_PID_OK:
      return "ok";
    case PP_PID_ERROR:
      return "error";
    case PP_PID_SKIPPED:
      return "skipped";
    default:
      return "unknown";
  }
}

static json_t *str_or_null(const struct pp_profile *p, uint32_t id) {
  return id == PP_NO_STR ? json_null() : json_string(pp_profile_str(p, id));
}

static json_t *pid_totals(const struct pp_profile *p, bool details) {
  json_t *pids = json_object();
  char key[16];
  for (size_t i = 0; pids && i < pp_profile_pid_count(p); i++) {
    const struct pp_pid_rec *r = pp_profile_pid_at(p, i);
    snprintf(key, sizeof(key), "%u", r->pid);
    if (!details) {
      json_object_set_new(pids, key, json_integer((json_int_t)r->total));
      continue;
    }
    json_t *o = json_object();
    json_object_set_new(o, "comm", str_or_null(p, r->comm));
    json_object_set_new(o, "samples", json_integer((json_int_t)r->total));
    json_object_set_new(o, "status", json_string(status_name(r->status)));
    if (r->status != PP_PID_OK) json_object_set_new(o, "reason", str_or_null(p, r->reason));
    json_object_set_new(pids, key, o);
  }
  return pids;
}

static int write_json(FILE *f, void *ctx) {
  /* JSON_ENSURE_ASCII: comms and reasons come from other processes */
  return json_dumpf(ctx, f, JSON_INDENT(1) | JSON_ENSURE_ASCII) == 0 ? 0 : -EIO;
}

void pp_agent_write_plugin_totals(struct pp_agent *a, const char *stem) {
  json_t *root = json_object(), *plugins = json_object();
  if (!root || !plugins) goto done;
  json_object_set_new(root, "session", json_integer(a->session_no));
  for (size_t i = 0; i < a->nplugins; i++) {
    const struct agent_plugin *ap = &a->plugins[i];
    json_t *o = json_object();
    json_object_set_new(o, "status", json_string(ap->snap_rc == 0 ? "ok" : ap->snap_err));
    json_object_set_new(o, "samples", json_integer((json_int_t)pp_profile_total(ap->snap)));
    json_object_set_new(o, "pids", pid_totals(ap->snap, true));
    json_object_set_new(plugins, ap->info->desc.name, o);
  }
  json_object_set(root, "plugins", plugins);
  json_object_set_new(root, "merged", pid_totals(a->merged, false));
  char err[512];
  if (pp_output_publish(a->cfg->output_dir, stem, ".plugins.json", "last_plugins.json",
                        a->cfg->rotating_output, write_json, root, err, sizeof(err)) < 0)
    pp_log(PP_LOG_ERROR, "polyprof", "writing the plugin totals failed: %s", err);
done:
  json_decref(plugins);
  json_decref(root);
}
