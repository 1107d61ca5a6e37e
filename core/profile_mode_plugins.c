/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which plugin gives which profile type, and `--mode wall` mapped onto the
 * runtime plugins' own wall knobs (which stay as aliases: setting the knob
 * alone still works, --mode wall only sets it for the user).
 *
 * A runtime plugin switched to wall samples every thread instead of running
 * ones; it cannot do both at once, so in a session that asks for cpu and
 * wall its samples make the wall profile and its processes show perf's
 * native stacks in the cpu profile.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "profile_mode.h"

struct wall_knob {
  const char *plugin, *key, *value;
};

/* The runtime plugins whose own option turns their sampling into wall. */
static const struct wall_knob wall_knobs[] = {
    {"python", "mode", "wall"},         {"dotnet", "wall", "true"}, {"ruby", "oncpu", "false"},
    {"nodejs", "include_idle", "true"}, {"java", "wall", "true"},   {"php", "wall", "true"},
};

/* Runtimes with allocation sampling. */
static const char *const alloc_plugins[] = {"java"};

static const struct wall_knob *wall_knob_of(const char *plugin) {
  for (size_t i = 0; i < sizeof(wall_knobs) / sizeof(wall_knobs[0]); i++)
    if (!strcmp(wall_knobs[i].plugin, plugin)) return &wall_knobs[i];
  return NULL;
}

static bool is_in_tree(const char *plugin) {
  static const char *const known[] = {"perf", "python", "java", "php", "ruby", "nodejs", "dotnet"};
  for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
    if (!strcmp(known[i], plugin)) return true;
  return false;
}

static bool gives_alloc(const char *plugin) {
  for (size_t i = 0; i < sizeof(alloc_plugins) / sizeof(alloc_plugins[0]); i++)
    if (!strcmp(alloc_plugins[i], plugin)) return true;
  return false;
}

/* Modes of a plugin with a wall knob that still cannot give wall: Node.js
 * in its perf and attach-maps modes only names JIT code for perf (the
 * inspector keeps V8's idle samples, the v8 mode follows threads off their
 * CPU too); Java's perfmap mode has no sampler of its own. */
static bool mode_without_wall(const struct pp_config *cfg, const char *plugin) {
  const struct pp_plugin_config *pc = pp_config_plugin(cfg, plugin);
  const char *m = pc && pc->mode ? pc->mode : "";
  if (!strcmp(plugin, "nodejs")) return strcmp(m, "inspector") != 0 && strcmp(m, "v8") != 0;
  if (!strcmp(plugin, "java")) return !strcmp(m, "perfmap");
  return false;
}

/* Runtime plugins that read every thread on a clock can tell a blocked
 * thread's stack at each tick and weigh it by the interval: their off-CPU
 * stacks replace perf's native ones for the processes they cover, as their
 * cpu stacks do. Python does in its cpu and wall modes (gil and exception
 * pick threads by something else than their state), PHP and Ruby always
 * (Ruby then samples every thread on ticks), Node.js
 * in its v8 mode (a context-switch event per thread), Java's agent (on
 * wall-clock timers, a thread found blocked in a system call). */
static bool gives_offcpu(const struct pp_config *cfg, const char *plugin) {
  if (!strcmp(plugin, "php") || !strcmp(plugin, "ruby")) return true;
  if (!strcmp(plugin, "nodejs")) {
    const struct pp_plugin_config *pc = pp_config_plugin(cfg, plugin);
    return pc && pc->mode && !strcmp(pc->mode, "v8");
  }
  if (!strcmp(plugin, "java")) {
    const struct pp_plugin_config *pc = pp_config_plugin(cfg, plugin);
    return !pc || !pc->mode || strcmp(pc->mode, "perfmap") != 0;
  }
  if (strcmp(plugin, "python") != 0) return false;
  const struct pp_plugin_config *pc = pp_config_plugin(cfg, plugin);
  const char *m = pc && pc->mode ? pc->mode : "cpu";
  return strcmp(m, "gil") != 0 && strcmp(m, "exception") != 0;
}

struct pp_plugin_types pp_profile_types_of(const struct pp_config *cfg, const char *plugin,
                                           bool system_wide) {
  uint32_t want = cfg->profile_types;
  struct pp_plugin_types r = {0};
  if (system_wide) {
    r.gives = want & (PP_TYPE_BIT(PP_PROFILE_CPU) | PP_TYPE_BIT(PP_PROFILE_OFFCPU));
    /* native allocations: uprobes trap on every call, so only the
     * processes asked for (--pids, run, attach), never the whole host */
    if (cfg->pid_count) r.gives |= want & PP_TYPE_BIT(PP_PROFILE_ALLOC);
    return r;
  }
  if (!is_in_tree(plugin)) { /* a third-party plugin tags what it can */
    r.gives = want;
    return r;
  }
  r.gives = want & PP_TYPE_BIT(PP_PROFILE_CPU);
  if ((want & PP_TYPE_BIT(PP_PROFILE_WALL)) && wall_knob_of(plugin) &&
      !mode_without_wall(cfg, plugin)) {
    r.gives = PP_TYPE_BIT(PP_PROFILE_WALL);
    r.untagged_is_wall = true;
  }
  if ((want & PP_TYPE_BIT(PP_PROFILE_OFFCPU)) && gives_offcpu(cfg, plugin))
    r.gives |= PP_TYPE_BIT(PP_PROFILE_OFFCPU);
  if ((want & PP_TYPE_BIT(PP_PROFILE_ALLOC)) && gives_alloc(plugin))
    r.gives |= PP_TYPE_BIT(PP_PROFILE_ALLOC);
  return r;
}

static void set_option(struct pp_plugin_config *pc, const char *key, const char *value) {
  if (!strcmp(key, "mode")) {
    free(pc->mode);
    pc->mode = strdup(value);
  }
  for (size_t k = 0; k < pc->option_count; k++) {
    struct pp_bound_option *bo = &pc->options[k];
    if (!bo->opt || strcmp(bo->opt->key, key) != 0) continue;
    free(bo->scalar);
    bo->scalar = strdup(value);
  }
}

static const char *cannot_why(const char *plugin, unsigned type) {
  if (type == PP_PROFILE_WALL && !strcmp(plugin, "nodejs"))
    return "only --nodejs-mode inspector and v8 sample threads off their CPU; the other modes "
           "only name JIT code for perf";
  if (type == PP_PROFILE_WALL && !strcmp(plugin, "java"))
    return "--java-mode perfmap only names JIT code for perf; the agent mode samples wall time";
  switch (type) {
    case PP_PROFILE_OFFCPU:
      return "off-CPU stacks come from the perf plugin only";
    case PP_PROFILE_ALLOC:
      return "allocation sampling exists for java only; with --pids, perf gives its native "
             "allocations";
    default:
      return "the plugin has no such mode";
  }
}

void pp_profile_types_apply(struct pp_config *cfg, const char *plugin, bool system_wide) {
  struct pp_plugin_config *pc = NULL;
  for (size_t i = 0; i < cfg->plugin_count; i++)
    if (!strcmp(cfg->plugins[i].name, plugin)) pc = &cfg->plugins[i];
  if (!pc || !pc->enabled) return;
  uint32_t want = cfg->profile_types;
  if (!want) { /* gProfiler's --mode none: profile nothing */
    pc->enabled = false;
    free(pc->disabled_by);
    pc->disabled_by = strdup("--mode none");
    return;
  }
  struct pp_plugin_types pt = pp_profile_types_of(cfg, plugin, system_wide);
  if ((pt.gives & PP_TYPE_BIT(PP_PROFILE_ALLOC)) && cfg->alloc_interval) {
    /* --alloc-interval (gProfiler's flag) is the allocating plugin's interval */
    char v[32];
    snprintf(v, sizeof(v), "%zu", cfg->alloc_interval);
    set_option(pc, "alloc_interval", v);
  }
  const struct wall_knob *wk = wall_knob_of(plugin);
  if (pt.untagged_is_wall && wk) {
    set_option(pc, wk->key, wk->value);
    if (want & PP_TYPE_BIT(PP_PROFILE_CPU))
      pp_log(PP_LOG_INFO, "polyprof",
             "--mode %s: %s samples in wall mode (%s.%s: %s), so its processes show native "
             "stacks only in the cpu profile",
             cfg->profiling_mode, plugin, plugin, wk->key, wk->value);
  }
  if (system_wide) {
    if (pt.gives & PP_TYPE_BIT(PP_PROFILE_ALLOC)) set_option(pc, "native_alloc", "true");
    if ((want & PP_TYPE_BIT(PP_PROFILE_ALLOC)) && !(pt.gives & PP_TYPE_BIT(PP_PROFILE_ALLOC)))
      pp_log(PP_LOG_WARNING, "polyprof",
             "--mode alloc: %s gives native allocations for --pids, run and attach only (a "
             "uprobe on malloc makes every call trap into the kernel, so never host-wide); the "
             "other types go on",
             plugin);
    return; /* it gives every other type it can for every process */
  }
  for (unsigned t = 1; t < PP_PROFILE_TYPE_COUNT; t++) {
    /* off-CPU stacks come from the system-wide plugin for every process */
    if (!(want & PP_TYPE_BIT(t)) || (pt.gives & PP_TYPE_BIT(t)) || t == PP_PROFILE_OFFCPU) continue;
    pp_log(PP_LOG_WARNING, "polyprof",
           "--mode %s: %s cannot give the %s profile (%s); the other types go on",
           pp_profile_type(t)->name, plugin, pp_profile_type(t)->name, cannot_why(plugin, t));
  }
}

/* CAP_SYS_ADMIN for uprobe events, raised only around opening them */
#define NATIVE_ALLOC_CAPS (PP_CAP_NEEDS_NSENTER | PP_CAP_STEP_NSENTER)

uint64_t pp_profile_types_step_caps(const struct pp_plugin_config *pc) {
  for (size_t k = 0; pc && k < pc->option_count; k++) {
    const struct pp_bound_option *bo = &pc->options[k];
    if (bo->opt && !strcmp(bo->opt->key, "native_alloc") && bo->scalar &&
        !strcmp(bo->scalar, "true"))
      return NATIVE_ALLOC_CAPS;
  }
  return 0;
}

uint64_t pp_profile_types_step_caps_possible(const struct pp_plugin *desc) {
  for (uint32_t k = 0; desc->options && k < desc->option_count; k++)
    if (desc->options[k].key && !strcmp(desc->options[k].key, "native_alloc"))
      return NATIVE_ALLOC_CAPS;
  return 0;
}

void pp_profile_types_check_sources(const struct pp_config *cfg, const char *const *names,
                                    const bool *system_wide, size_t n) {
  static const char *const hint[PP_PROFILE_TYPE_COUNT] = {
      [PP_PROFILE_CPU] = "the perf plugin or a runtime plugin",
      [PP_PROFILE_WALL] = "a runtime plugin: python, ruby, java, php, nodejs or dotnet",
      [PP_PROFILE_OFFCPU] = "the perf plugin",
      [PP_PROFILE_ALLOC] = "the java plugin, or perf for the native allocations of --pids",
  };
  uint32_t given = 0;
  for (size_t i = 0; i < n; i++)
    given |= pp_profile_types_of(cfg, names[i], system_wide[i]).gives;
  for (unsigned t = 0; t < PP_PROFILE_TYPE_COUNT; t++)
    if ((cfg->profile_types & PP_TYPE_BIT(t)) && !(given & PP_TYPE_BIT(t)))
      pp_log(PP_LOG_WARNING, "polyprof",
             "--mode %s: no enabled plugin gives the %s profile (it comes from %s); the "
             "other types go on",
             pp_profile_type(t)->name, pp_profile_type(t)->name, hint[t]);
}
