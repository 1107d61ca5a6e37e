/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The informational subcommands: `polyprof plugins` (what was found in the
 * plugin directory and whether it will run) and `polyprof check` (which
 * privileges the agent has and what each missing one disables).
 */
#include "commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "polyprof/kit/proc.h"
#include "profile_mode.h"
#include "rootless.h"
#include "session.h"
#include "worker_exe.h"

static void print_caps(FILE *out, uint64_t caps) {
  static const struct {
    uint64_t bit;
    const char *name;
  } names[] = {
      {PP_CAP_SYSTEM_WIDE, "system-wide"},
      {PP_CAP_RUNTIME, "runtime"},
      {PP_CAP_PERFLESS, "perfless"},
      {PP_CAP_NEEDS_ROOT, "needs-root"},
      {PP_CAP_NEEDS_PERFMON, "needs-perfmon"},
      {PP_CAP_NEEDS_PTRACE, "needs-ptrace"},
      {PP_CAP_NEEDS_SYSLOG, "needs-syslog"},
      {PP_CAP_NEEDS_KILL, "needs-kill"},
      {PP_CAP_NEEDS_NOTHING, "needs-nothing"},
      {PP_CAP_NEEDS_NSENTER, "needs-nsenter"},
      {PP_CAP_NEEDS_SETID, "needs-setid"},
      {PP_CAP_NEEDS_FILE_OVERRIDE, "needs-file-override"},
      {PP_CAP_NEEDS_FILE_OWNER, "needs-file-owner"},
  };
  const char *sep = "";
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    if (!(caps & names[i].bit)) continue;
    fprintf(out, "%s%s", sep, names[i].name);
    sep = ",";
  }
}

/* The plugin table of the plugins found once by the caller: a second load
 * would bind the configuration again (refused as configured twice) while
 * the first binding's option pointers went with the registry it freed. */
static void print_plugins(const struct pp_config *cfg, const struct pp_plugin_info *infos, size_t n,
                          bool verbose, FILE *out) {
  fprintf(out, "plugin directory: %s\n", cfg->plugin_dir);
  if (n == 0) fprintf(out, "  (no plugins found)\n");
  fprintf(out, "%-10s %-10s %-6s %-9s %s\n", "NAME", "VERSION", "ABI", "STATE", "DETAILS");
  for (size_t i = 0; i < n; i++) {
    const struct pp_plugin_info *pi = &infos[i];
    const char *file = strrchr(pi->path, '/');
    file = file ? file + 1 : pi->path;
    if (pi->error) {
      fprintf(out, "%-10s %-10s %-6s %-9s %s\n", file, "-", "-", "refused", pi->error);
      continue;
    }
    const struct pp_plugin_config *pc = pp_config_plugin(cfg, pi->desc.name);
    char abi[16];
    snprintf(abi, sizeof(abi), "%u.%u", pi->desc.abi_major, pi->desc.abi_minor);
    bool enabled = pc && pc->enabled;
    char details[512];
    if (enabled)
      snprintf(details, sizeof(details), "%s%s%s", pc->mode ? "mode " : "",
               pc->mode ? pc->mode : "", pc->mode ? "; " : "");
    else
      snprintf(details, sizeof(details), "disabled by %s; ",
               pc && pc->disabled_by ? pc->disabled_by : "configuration");
    fprintf(out, "%-10s %-10s %-6s %-9s %s%s\n", pi->desc.name,
            pi->desc.version ? pi->desc.version : "?", abi, enabled ? "enabled" : "disabled",
            details, pi->desc.description ? pi->desc.description : "");
    if (verbose) {
      fprintf(out, "           file: %s\n           capabilities: ", pi->path);
      print_caps(out, pi->desc.capabilities);
      fprintf(out, "\n");
      for (uint32_t k = 0; k < pi->desc.option_count; k++) {
        const struct pp_option *o = &pi->desc.options[k];
        fprintf(out, "           %s.%s (default %s): %s\n", pi->desc.name, o->key,
                o->default_value ? o->default_value : "unset", o->help ? o->help : "");
      }
    }
  }
}

/* Loads the plugins once for a command; NULL infos when none could be. */
static int load_plugins(struct pp_config *cfg, struct pp_plugin_info **infos, size_t *n) {
  char err[PP_MAX_ERR] = "";
  int rc = pp_agent_load_plugins(cfg, infos, n, err);
  if (rc < 0 && !*infos) {
    fprintf(stderr, "polyprof: %s\n", err);
    return -1;
  }
  if (rc < 0) fprintf(stderr, "polyprof: configuration problem: %s\n", err);
  return rc;
}

int pp_cmd_plugins(struct pp_config *cfg, bool verbose, FILE *out) {
  struct pp_plugin_info *infos = NULL;
  size_t n = 0;
  int rc = load_plugins(cfg, &infos, &n);
  if (!infos && rc < 0) return 2;
  print_plugins(cfg, infos, n, verbose, out);
  pp_registry_free(infos, n);
  return rc < 0 ? 2 : 0;
}

/* Effective capability bits of this process from /proc/self/status. */
static uint64_t effective_caps(void) {
  char buf[4096];
  if (pp_read_file("/proc/self/status", buf, sizeof(buf), NULL) < 0) return 0;
  const char *p = strstr(buf, "CapEff:");
  return p ? strtoull(p + 7, NULL, 16) : 0;
}

static long read_sysctl(const char *path) {
  char buf[64];
  if (pp_read_file(path, buf, sizeof(buf), NULL) < 0) return -1000;
  return strtol(buf, NULL, 10);
}

static void print_rootless_line(void *arg, bool ok, const char *text) {
  fprintf(arg, "  %-4s %s\n", ok ? "yes" : "no", text);
}

/* `check --rootless`: the mode's verdict on this command line, then what
 * works without root and what does not, with the reasons. */
static void print_rootless(const struct pp_config *cfg, FILE *out) {
  char err[PP_MAX_ERR];
  fprintf(out, "rootless mode (--rootless):\n");
  if (pp_rootless_validate(cfg, err) < 0)
    fprintf(out, "  REFUSED %s\n", err);
  else
    fprintf(out, "  accepted: %zu pid(s), all yours\n", cfg->pid_count);
  pp_rootless_report(cfg, print_rootless_line, out);
}

int pp_cmd_check(struct pp_config *cfg, FILE *out) {
  uint64_t caps = effective_caps();
  struct {
    int bit;
    const char *name;
    const char *disables;
  } needs[] = {
      {38, "CAP_PERFMON", "perf sampling of other users' processes and kernel stacks"},
      {19, "CAP_SYS_PTRACE", "reading other processes' memory (python, php, ruby plugins)"},
      {34, "CAP_SYSLOG",
       "kernel symbol addresses (/proc/kallsyms); kernel frames show as [unknown]"},
      {2, "CAP_DAC_READ_SEARCH", "reading binaries and perf maps of other users"},
      {5, "CAP_KILL", "attach protocols that signal the target (java, nodejs)"},
      {6, "CAP_SETGID", "acting as the target's group during attach (java)"},
      {7, "CAP_SETUID", "acting as the target's user during attach (java)"},
  };
  int missing = 0;
  fprintf(out, "user: uid %d, euid %d%s\n", (int)getuid(), (int)geteuid(),
          geteuid() == 0 ? " (root)" : "");
  for (size_t i = 0; i < sizeof(needs) / sizeof(needs[0]); i++) {
    bool have = (caps >> needs[i].bit) & 1;
    if (!have) missing++;
    fprintf(out, "  %-20s %-8s %s%s\n", needs[i].name, have ? "yes" : "MISSING",
            have ? "" : "disables: ", have ? "" : needs[i].disables);
  }
  long paranoid = read_sysctl("/proc/sys/kernel/perf_event_paranoid");
  long kptr = read_sysctl("/proc/sys/kernel/kptr_restrict");
  long yama = read_sysctl("/proc/sys/kernel/yama/ptrace_scope");
  fprintf(out, "kernel.perf_event_paranoid = %ld%s\n", paranoid,
          paranoid > 1 && !((caps >> 38) & 1) && !((caps >> 21) & 1)
              ? " (without CAP_PERFMON only your own processes can be sampled)"
              : "");
  fprintf(out, "kernel.kptr_restrict = %ld\n", kptr);
  if (yama != -1000)
    fprintf(out, "kernel.yama.ptrace_scope = %ld%s\n", yama,
            yama >= 2 && !((caps >> 19) & 1) ? " (ptrace needs CAP_SYS_PTRACE)" : "");
  if (cfg->rootless) print_rootless(cfg, out);
  char exe[PP_WORKER_EXE_MAX], why[768];
  if (pp_worker_exe_find(cfg->worker_path, exe, sizeof(exe), why, sizeof(why)) == 0)
    fprintf(out, "plugin worker: %s\n", exe);
  else
    fprintf(out, "plugin worker: MISSING: %s (only isolation: inline plugins can run)\n", why);
  struct pp_plugin_info *infos = NULL;
  size_t n = 0;
  int rc = load_plugins(cfg, &infos, &n);
  if (infos) {
    /* --mode as a run would apply it: what is enabled, and the step
     * capabilities an asked profile type adds (perf's native allocations) */
    for (size_t i = 0; i < n; i++)
      if (!infos[i].error)
        pp_profile_types_apply(cfg, infos[i].desc.name,
                               (infos[i].desc.capabilities & PP_CAP_SYSTEM_WIDE) != 0);
    print_plugins(cfg, infos, n, false, out);
    pp_cmd_print_worker_privileges(cfg, infos, n, out);
  }
  pp_registry_free(infos, n);
  fprintf(out, "%s\n",
          missing ? "some capabilities are missing: see above what they disable"
                  : "all capabilities present");
  return rc < 0 ? 2 : 0;
}
