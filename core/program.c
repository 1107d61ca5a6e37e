/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What run -- CMD, attach and dump share (see program.h): their flags, the
 * configuration they profile with, the hooks into the session loop and the
 * printed result.
 */
#include "program.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "log.h"
#include "output/formats.h"
#include "output/html.h"
#include "polyprof/kit/proc.h"
#include "polyprof/kit/proc_tree.h"
#include "profile_marker.h"
#include "profile_mode.h"
#include "program_silent.h"
#include "rootless.h"

#define PROGRAM_SCAN_MS 100   /* children and execs are seen this fast */
#define PROGRAM_MAX_PIDS 4096 /* processes of one program followed at once */

static bool parse_long_in(const char *s, long lo, long hi, long *out) {
  if (!s || !*s) return false;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

/* The output goes to a temporary file next to FILE, renamed at the end:
 * a run that fails or is killed leaves FILE as it was. */
static int open_output(struct pp_program *pr, const char *command) {
  if (!pr->output) {
    pr->out = stdout;
    return 0;
  }
  if (asprintf(&pr->output_tmp, "%s.tmp-%d", pr->output, (int)getpid()) < 0) return 2;
  int fd = open(pr->output_tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0 || !(pr->out = fdopen(fd, "w"))) {
    fprintf(stderr, "polyprof: %s: cannot write --output %s: %s\n", command, pr->output,
            strerror(errno));
    if (fd >= 0) {
      close(fd);
      unlink(pr->output_tmp);
    }
    free(pr->output_tmp);
    pr->output_tmp = NULL;
    return 2;
  }
  return 0;
}

static void replace_config_str(char **field, const char *value) {
  free(*field);
  *field = value ? strdup(value) : NULL;
}

int pp_program_setup(struct pp_program *pr, const struct pp_cli *cli, struct pp_config *cfg,
                     const char *command) {
  const char *format = pp_cli_flag_value(cli, "--format");
  if (!format || !strcmp(format, "table"))
    pr->format = PP_PROGRAM_TABLE;
  else if (!strcmp(format, "collapsed"))
    pr->format = PP_PROGRAM_COLLAPSED;
  else if ((pr->file_format = pp_output_format_find(format)) != NULL)
    pr->format = PP_PROGRAM_FILE;
  else {
    fprintf(stderr,
            "polyprof: --format %s: not a format of %s (table, collapsed, gecko, heatmap, html, "
            "pprof, speedscope, col)\n",
            format, command);
    return 2;
  }
  pr->table.limit = 30;
  const char *sort = pp_cli_flag_value(cli, "--sort");
  if (sort && pp_table_sort_parse(sort, &pr->table.sort) < 0) {
    fprintf(stderr, "polyprof: --sort %s: sort by self, total or name\n", sort);
    return 2;
  }
  const char *limit = pp_cli_flag_value(cli, "--limit");
  long v;
  if (limit) {
    if (!parse_long_in(limit, 0, 1000000000, &v)) {
      fprintf(stderr, "polyprof: --limit %s: a number of rows (0: all)\n", limit);
      return 2;
    }
    pr->table.limit = (size_t)v;
  }
  /* run's operands are the program; attach's and dump's, its pid (checked) */
  pr->runtime = !strcmp(command, "run")
                    ? pp_program_runtime_of_argv(cli->operands, cli->operand_count)
                : cli->operand_count == 1 ? pp_program_runtime_of_pid((pid_t)atol(cli->operands[0]))
                                          : "native";
  const char *interval = pp_cli_flag_value(cli, "--interval");
  if (interval) {
    if (!parse_long_in(interval, 100, 1000000, &v)) {
      fprintf(stderr, "polyprof: -i/--interval %s: microseconds between samples (100-1000000)\n",
              interval);
      return 2;
    }
    cfg->frequency = (int)(1000000 / v);
  } else if (!pp_cli_flag_value(cli, "--profiling-frequency")) {
    cfg->frequency = pp_program_default_hz(pr->runtime);
  }
  pr->frequency_hz = cfg->frequency;
  if (!pp_cli_flag_value(cli, "--profiling-duration"))
    cfg->duration = 86400; /* as long as the program lives */
  cfg->continuous = false;
  cfg->proc_scan_interval_ms = PROGRAM_SCAN_MS;
  /* one user's one program: none of the daemon's files, host checks or
   * host-wide enrichment */
  cfg->pidns_check = false;
  replace_config_str(&cfg->pid_file, NULL);
  replace_config_str(&cfg->log_file, NULL);
  cfg->app_identifiers = cfg->container_names = cfg->application_metadata = false;
  cfg->metadata_collection = cfg->metrics_collection = false;
  cfg->rootless = geteuid() != 0;
  pp_rootless_apply_defaults(cfg);
  /* every thread, running or waiting, where the runtime can tell (--mode
   * cpu, or a plugin's own knob, says otherwise) */
  bool wall = !pp_cli_flag_value(cli, "--mode");
  if (wall && !pp_cli_flag_value(cli, "--python-mode"))
    pp_config_add_flag(cfg, "--python-mode", "wall", false);
  if (wall && !pp_cli_flag_value(cli, "--ruby-oncpu") && !pp_cli_flag_value(cli, "--no-ruby-oncpu"))
    pp_config_add_flag(cfg, "--ruby-oncpu", "false", true);
  if (wall && !pp_cli_flag_value(cli, "--dotnet-wall") &&
      !pp_cli_flag_value(cli, "--no-dotnet-wall"))
    pp_config_add_flag(cfg, "--dotnet-wall", NULL, false);
  if (wall && !pp_cli_flag_value(cli, "--java-wall") && !pp_cli_flag_value(cli, "--no-java-wall"))
    pp_config_add_flag(cfg, "--java-wall", NULL, false);
  if (wall && !pp_cli_flag_value(cli, "--php-wall") && !pp_cli_flag_value(cli, "--no-php-wall"))
    pp_config_add_flag(cfg, "--php-wall", NULL, false);
  if (wall && !pp_cli_flag_value(cli, "--nodejs-include-idle") &&
      !pp_cli_flag_value(cli, "--no-nodejs-include-idle"))
    pp_config_add_flag(cfg, "--nodejs-include-idle", NULL, false);
  /* asyncio: the task chains (and, in wall mode, the waiting tasks) of a
   * program that runs an event loop; the python plugin finds the loop in
   * the stacks it reads, and without one that costs a look at frame names */
  if (!pp_cli_flag_value(cli, "--python-async-aware"))
    pp_config_add_flag(cfg, "--python-async-aware", NULL, false);
  /* Ruby's own rate is capped at 100 Hz unless asked (gProfiler's choice
   * for the daemon); one program gets the rate asked for, up to the
   * plugin's 1 kHz */
  if (!pp_cli_flag_value(cli, "--ruby-frequency")) {
    char hz[16];
    snprintf(hz, sizeof(hz), "%d", cfg->frequency < 1000 ? cfg->frequency : 1000);
    pp_config_add_flag(cfg, "--ruby-frequency", hz, false);
  }
  /* the daemon leaves PHP off by default (gProfiler's choice); asking for
   * one program is asking for its runtime */
  if (!pp_cli_flag_value(cli, "--php-mode") && !pp_cli_flag_value(cli, "--no-php"))
    pp_config_add_flag(cfg, "--php-mode", "phpspy", false);
  if (!pp_cli_flag_value(cli, "--dotnet-mode") && !pp_cli_flag_value(cli, "--no-dotnet"))
    pp_config_add_flag(cfg, "--dotnet-mode", "auto", false);
  /* without perf, the daemon leaves .NET unsampled (EventPipe suspends the
   * target); one program asked for is sampled in bursts */
  if (!pp_cli_flag_value(cli, "--dotnet-perfless"))
    pp_config_add_flag(cfg, "--dotnet-perfless", "bursts", false);
  pr->output = pp_cli_flag_value(cli, "--output");
  /* the program was started from here (run) or, most likely, by the user
   * from here (attach); --source-root says otherwise */
  const char *root = pp_cli_flag_value(cli, "--source-root");
  pr->source_root = root ? realpath(root, NULL) : getcwd(NULL, 0);
  if (root && !pr->source_root) {
    fprintf(stderr, "polyprof: --source-root %s: %s\n", root, strerror(errno));
    return 2;
  }
  pp_log_set_stderr_level(cfg->verbose ? PP_LOG_DEBUG : PP_LOG_ERROR);
  return open_output(pr, command);
}

int pp_program_check_pid(long pid, char *err, size_t cap) {
  char path[64], comm[64] = "?";
  struct stat st;
  if (pid <= 0 || pid > 0x3fffffff) {
    snprintf(err, cap, "'%ld' is not a pid", pid);
    return -1;
  }
  if (pid == (long)getpid()) {
    snprintf(err, cap, "pid %ld is polyprof itself", pid);
    return -1;
  }
  snprintf(path, sizeof(path), "/proc/%ld", pid);
  if (stat(path, &st) < 0) {
    snprintf(err, cap, "no process %ld (gone?)", pid);
    return -1;
  }
  pp_proc_comm((uint32_t)pid, comm, sizeof(comm));
  char buf[512];
  snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
  const char *p = pp_read_file(path, buf, sizeof(buf), NULL) >= 0 ? strrchr(buf, ')') : NULL;
  if (p && (p[2] == 'Z' || p[2] == 'X')) {
    snprintf(err, cap, "process %ld (%s) has exited", pid, comm);
    return -1;
  }
  if (geteuid() != 0 && st.st_uid != getuid()) {
    struct passwd *pw = getpwuid(st.st_uid);
    snprintf(err, cap,
             "pid %ld (%s) belongs to %s, not to you: without root polyprof profiles only "
             "your own processes",
             pid, comm, pw ? pw->pw_name : "another user");
    return -1;
  }
  return 0;
}

/* --- the session hooks -------------------------------------------------- */

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct hook_state {
  struct pp_program *pr;
  uint64_t next_tree_ms;
  uint32_t pids[PROGRAM_MAX_PIDS];
};

static bool program_gone(struct pp_program *pr) {
  if (pr->ended) return true;
  if (pr->is_child) {
    int st;
    if (waitpid(pr->root, &st, WNOHANG) == pr->root) {
      pr->status = st;
      pr->ended = true;
    }
    return pr->ended;
  }
  char err[256];
  pr->ended = pp_program_check_pid(pr->root, err, sizeof(err)) < 0;
  return pr->ended;
}

static bool hook_poll(void *ctx, struct pp_agent *a) {
  struct hook_state *hs = ctx;
  struct pp_program *pr = hs->pr;
  if (program_gone(pr)) return true;
  if (pr->dump && pp_dump_poll(pr->dump, a)) return true; /* read: done */
  uint64_t now = now_ms();
  if (!pr->follow_children || now < hs->next_tree_ms) return false;
  hs->pids[0] = (uint32_t)pr->root;
  size_t n = 1 + pp_proc_descendants((uint32_t)pr->root, hs->pids + 1, PROGRAM_MAX_PIDS - 1);
  /* the walk reads every process's stat: on a host with many processes it
   * is done less often, so that it costs at most ~5% of one CPU */
  uint64_t spent = now_ms() - now, gap = spent * 20;
  hs->next_tree_ms = now + (gap > PROGRAM_SCAN_MS ? gap : PROGRAM_SCAN_MS);
  pp_targets_set_filter(a->targets, hs->pids, n);
  return false;
}

static uint64_t counter(const struct pp_profile *p, const char *name) {
  uint64_t v = 0;
  for (size_t k = 0; k < pp_profile_counter_count(p); k++) {
    const struct pp_counter_rec *c = pp_profile_counter_at(p, k);
    if (!strcmp(pp_profile_str(p, c->name), name)) v += c->value;
  }
  return v;
}

/* A snapshot's counts by profile type: only the types counted in samples
 * make a rate (an allocation profile counts bytes). */
static void totals_by_type(const struct pp_profile *p, uint64_t by_type[PP_PROFILE_TYPE_COUNT]) {
  memset(by_type, 0, PP_PROFILE_TYPE_COUNT * sizeof(*by_type));
  for (size_t k = 0; k < pp_profile_stack_count(p); k++) {
    const struct pp_stack_rec *s = pp_profile_stack(p, k);
    by_type[pp_type_of_stack(p, s)] += s->count;
  }
}

/* The closing lines on stderr: what was asked, what each plugin achieved,
 * what was missed. */
static void print_rates(struct pp_agent *a, const struct session_times *t, int hz) {
  double dur = t->duration_s > 0 ? t->duration_s : 1e-3;
  uint64_t missed = 0;
  bool any_samples = false;
  char why[320];
  for (size_t i = 0; i < a->nplugins; i++)
    any_samples |= a->plugins[i].snap_rc == 0 && pp_profile_stack_count(a->plugins[i].snap) > 0;
  fprintf(stderr, "polyprof: %.2f s at %d Hz requested; achieved:", t->duration_s, hz);
  for (size_t i = 0; i < a->nplugins; i++) {
    struct agent_plugin *ap = &a->plugins[i];
    if (ap->snap_rc != 0) {
      fprintf(stderr, " %s failed (%s);", ap->info->desc.name, ap->snap_err);
      continue;
    }
    uint64_t by_type[PP_PROFILE_TYPE_COUNT], samples = 0;
    totals_by_type(ap->snap, by_type);
    missed += counter(ap->snap, "lost_samples") + counter(ap->snap, "missed_samples");
    for (unsigned ty = 0; ty < PP_PROFILE_TYPE_COUNT; ty++) {
      const char *unit = pp_profile_type(ty)->unit;
      if (!strcmp(unit, "samples"))
        samples += by_type[ty];
      else if (by_type[ty])
        fprintf(stderr, " %s %llu %s (%s);", ap->info->desc.name, (unsigned long long)by_type[ty],
                unit, pp_profile_type(ty)->name);
    }
    if (samples)
      fprintf(stderr, " %s %llu samples = %.0f Hz;", ap->info->desc.name,
              (unsigned long long)samples, (double)samples / dur);
    else if (!pp_profile_stack_count(ap->snap) &&
             pp_program_why_silent(a, i, any_samples, why, sizeof(why)))
      fprintf(stderr, " %s 0 samples (%s);", ap->info->desc.name, why);
  }
  fprintf(stderr, " missed samples: %llu\n", (unsigned long long)missed);
}

static void hook_session(void *ctx, struct pp_agent *a, const struct session_times *t) {
  struct hook_state *hs = ctx;
  struct pp_program *pr = hs->pr;
  int rc;
  uint32_t only = pr->follow_children ? 0 : (uint32_t)pr->root;
  pr->table.duration_s = t->duration_s;
  pr->table.unit = pp_profile_type(pp_agent_merged_type(a))->unit;
  if (pr->format == PP_PROGRAM_DUMP || pr->format == PP_PROGRAM_DUMP_JSON) {
    pp_dump_session(pr->dump, pr->out, a->merged, pr->root, pr->format == PP_PROGRAM_DUMP_JSON);
    rc = ferror(pr->out) ? -EIO : 0;
  } else if (pr->format == PP_PROGRAM_FILE) {
    /* the session's own writers: the same file the agent would write */
    char start[32] = "", end[32] = "";
    pp_iso_time(t->start, start, sizeof(start));
    pp_iso_time(t->end, end, sizeof(end));
    struct pp_html_info hi = {.title = "polyprof",
                              .start_time = start,
                              .end_time = end,
                              .duration_s = t->duration_s,
                              .hostname = ""};
    struct pp_output_input in = {.profile = a->merged,
                                 .header_json = "{}",
                                 .html = &hi,
                                 .start = t->start,
                                 .end = t->end,
                                 .frequency = pr->frequency_hz,
                                 .name = "polyprof",
                                 .source_root = pr->source_root};
    rc = pr->file_format->write(pr->out, &in);
  } else if (pr->format == PP_PROGRAM_COLLAPSED)
    rc = pp_collapsed_write(pr->out, a->merged, only);
  else
    rc = pp_table_write(pr->out, a->merged, &pr->table, only);
  if (fflush(pr->out) != 0 && rc == 0) rc = -errno;
  if (rc < 0 && !pr->print_rc) pr->print_rc = rc;
  pr->wrote = true;
  if (pr->format == PP_PROGRAM_TABLE || pr->format == PP_PROGRAM_COLLAPSED ||
      pr->format == PP_PROGRAM_FILE)
    print_rates(a, t, pr->frequency_hz);
}

/* Renames the temporary output over --output, or removes it. */
static int finish_output(struct pp_program *pr, bool keep) {
  int rc = pr->print_rc;
  if (pr->output_tmp) {
    if (fclose(pr->out) != 0 && !rc) rc = -errno;
    pr->out = NULL;
    if (keep && !rc && rename(pr->output_tmp, pr->output) < 0) rc = -errno;
    if (!keep || rc) unlink(pr->output_tmp);
    free(pr->output_tmp);
    pr->output_tmp = NULL;
  }
  if (rc)
    fprintf(stderr, "polyprof: cannot write %s: %s\n", pr->output ? pr->output : "stdout",
            strerror(-rc));
  return rc;
}

void pp_program_discard(struct pp_program *pr) {
  finish_output(pr, false);
  free(pr->source_root);
  pr->source_root = NULL;
}

int pp_program_profile(struct pp_program *pr, struct pp_config *cfg) {
  struct hook_state *hs = calloc(1, sizeof(*hs));
  uint32_t *pids = malloc(sizeof(*pids));
  if (!hs || !pids) {
    free(hs);
    free(pids);
    pp_config_free(cfg);
    free(cfg);
    pp_program_discard(pr);
    return 1;
  }
  hs->pr = pr;
  /* perf keeps its samples of the subprocesses too, from their first
   * moments: the descendant walk of hook_poll is for the runtime plugins */
  if (pr->follow_children) pp_config_add_flag(cfg, "--perf-follow-children", NULL, false);
  pids[0] = (uint32_t)pr->root;
  free(cfg->pids);
  cfg->pids = pids;
  cfg->pid_count = 1;
  struct pp_agent_hooks hooks = {.ctx = hs,
                                 .poll = hook_poll,
                                 .session = hook_session,
                                 .forward_signals = pr->is_child && pr->pidfd >= 0,
                                 .forward_pidfd = pr->is_child ? pr->pidfd : -1};
  int rc = pp_agent_run_hooked(cfg, &hooks);
  free(hs);
  int out_rc = finish_output(pr, pr->wrote);
  free(pr->source_root);
  pr->source_root = NULL;
  if (rc == 0 && out_rc) rc = 1;
  return rc;
}
