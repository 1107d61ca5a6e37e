/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rootless mode: see rootless.h.
 */
#include "rootless.h"

#include <errno.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "polyprof/kit/proc.h"

void pp_rootless_user_dir(char *out, size_t cap) {
  const char *xdg = getenv("XDG_RUNTIME_DIR");
  struct stat st;
  /* systemd's per-user /run/user/<uid>: private and cleaned at logout */
  if (xdg && xdg[0] == '/' && stat(xdg, &st) == 0 && S_ISDIR(st.st_mode) &&
      st.st_uid == geteuid()) {
    snprintf(out, cap, "%s/polyprof", xdg);
    return;
  }
  const char *tmp = getenv("TMPDIR");
  snprintf(out, cap, "%s/polyprof-%u", tmp && tmp[0] == '/' ? tmp : "/tmp", (unsigned)geteuid());
}

int pp_rootless_make_user_dir(const char *dir) {
  if (mkdir(dir, 0700) == 0) return 0;
  if (errno != EEXIST) return -errno;
  struct stat st;
  if (lstat(dir, &st) < 0) return -errno;
  /* someone else may have planted it in a shared /tmp */
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid()) return -EPERM;
  if ((st.st_mode & 077) && chmod(dir, 0700) < 0) return -errno;
  return 0;
}

static void replace_default(char **field, const char *root_default, const char *dir,
                            const char *name) {
  if (!*field || strcmp(*field, root_default) != 0) return; /* set by the user: keep */
  char path[4200];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  char *s = strdup(path);
  if (!s) abort();
  free(*field);
  *field = s;
}

void pp_rootless_apply_defaults(struct pp_config *c) {
  if (!c->rootless) return;
  char dir[4096];
  pp_rootless_user_dir(dir, sizeof(dir));
  replace_default(&c->pid_file, PP_DEFAULT_PID_FILE, dir, "polyprof.pid");
  replace_default(&c->log_file, PP_DEFAULT_LOG_FILE, dir, "polyprof.log");
  replace_default(&c->spool_dir, PP_DEFAULT_SPOOL_DIR, dir, "spool");
}

static const char *user_name(uid_t uid, char *buf, size_t cap) {
  struct passwd pw, *res = NULL;
  char tmp[1024];
  if (getpwuid_r(uid, &pw, tmp, sizeof(tmp), &res) == 0 && res)
    snprintf(buf, cap, "%s", res->pw_name);
  else
    snprintf(buf, cap, "uid %u", (unsigned)uid);
  return buf;
}

int pp_rootless_validate(const struct pp_config *c, char err[PP_MAX_ERR]) {
  if (!c->rootless) return 0;
  if (geteuid() == 0) {
    snprintf(err, PP_MAX_ERR,
             "--rootless: you are root; rootless mode is for ordinary users (drop "
             "--rootless to profile the whole system)");
    return -1;
  }
  if (!c->pid_count) {
    snprintf(err, PP_MAX_ERR,
             "--rootless needs --pids: without root polyprof profiles only processes "
             "you own, listed with --pids PID[,PID]");
    return -1;
  }
  uid_t me = getuid();
  for (size_t i = 0; i < c->pid_count; i++) {
    char path[64], comm[64] = "?", who[64];
    snprintf(path, sizeof(path), "/proc/%u", c->pids[i]);
    struct stat st;
    if (stat(path, &st) < 0) {
      snprintf(err, PP_MAX_ERR, "--pids: pid %u does not exist", c->pids[i]);
      return -1;
    }
    pp_proc_comm(c->pids[i], comm, sizeof(comm));
    if (st.st_uid != me) {
      char mine[64];
      snprintf(err, PP_MAX_ERR,
               "--rootless: pid %u (%s) belongs to %s, not to you (%s): rootless mode "
               "profiles only your own processes",
               c->pids[i], comm, user_name(st.st_uid, who, sizeof(who)),
               user_name(me, mine, sizeof(mine)));
      return -1;
    }
  }
  return 0;
}

static long read_sysctl(const char *path) {
  char buf[64];
  if (pp_read_file(path, buf, sizeof(buf), NULL) < 0) return -1000;
  return strtol(buf, NULL, 10);
}

static bool have_cap(int bit) {
  char buf[4096];
  if (pp_read_file("/proc/self/status", buf, sizeof(buf), NULL) < 0) return false;
  const char *p = strstr(buf, "CapEff:");
  return p && ((strtoull(p + 7, NULL, 16) >> bit) & 1);
}

#define CAP_SYS_PTRACE_BIT 19
#define CAP_SYS_ADMIN_BIT 21
#define CAP_SYSLOG_BIT 34
#define CAP_PERFMON_BIT 38

void pp_rootless_report(const struct pp_config *c, pp_rootless_line_fn sink, void *arg) {
  char line[4400];
  long paranoid = read_sysctl("/proc/sys/kernel/perf_event_paranoid");
  long kptr = read_sysctl("/proc/sys/kernel/kptr_restrict");
  long yama = read_sysctl("/proc/sys/kernel/yama/ptrace_scope");
  bool perfmon = have_cap(CAP_PERFMON_BIT) || have_cap(CAP_SYS_ADMIN_BIT);

  sink(arg, false,
       "system-wide sampling: off, needs root or CAP_PERFMON; only the processes given with "
       "--pids (and the children they start) are profiled");
  if (paranoid >= 3 && !perfmon) {
    snprintf(line, sizeof(line),
             "perf (native stacks): off: kernel.perf_event_paranoid=%ld forbids perf_event_open "
             "to unprivileged users (Debian's default); 'sysctl kernel.perf_event_paranoid=2' "
             "allows sampling your own processes",
             paranoid);
    sink(arg, false, line);
  } else {
    snprintf(line, sizeof(line),
             "perf (native stacks): on for your --pids, per-thread events "
             "(kernel.perf_event_paranoid=%ld)",
             paranoid);
    sink(arg, true, line);
  }
  if (paranoid >= 2 && !perfmon) {
    snprintf(line, sizeof(line),
             "kernel frames (_[k]): off: kernel.perf_event_paranoid=%ld lets unprivileged users "
             "sample user space only (needs <= 1 or CAP_PERFMON)",
             paranoid);
    sink(arg, false, line);
  } else if (kptr != 0 && !have_cap(CAP_SYSLOG_BIT)) {
    snprintf(line, sizeof(line),
             "kernel frames (_[k]): sampled but unnamed: kernel.kptr_restrict=%ld hides "
             "/proc/kallsyms addresses without CAP_SYSLOG",
             kptr);
    sink(arg, false, line);
  } else {
    sink(arg, true, "kernel frames (_[k]): on");
  }
  if (yama >= 2 && !have_cap(CAP_SYS_PTRACE_BIT)) {
    snprintf(line, sizeof(line),
             "python, php, ruby, dotnet (read the target's memory): off: "
             "kernel.yama.ptrace_scope=%ld allows it only with CAP_SYS_PTRACE",
             yama);
    sink(arg, false, line);
  } else if (yama == 1 && !have_cap(CAP_SYS_PTRACE_BIT)) {
    sink(arg, false,
         "python, php, ruby, dotnet (read the target's memory): only processes started by the "
         "agent's own process tree: kernel.yama.ptrace_scope=1 (a target can allow it with "
         "prctl(PR_SET_PTRACER), or set the sysctl to 0)");
  } else {
    sink(arg, true,
         "python, php, ruby, dotnet (read the target's memory): on for your own processes "
         "(same uid)");
  }
  sink(arg, true,
       "java, nodejs (attach through the runtime's socket): your own processes only, no switch "
       "into other users' containers");
  sink(arg, false,
       "processes of other users, containers' pid namespaces of other users: off, needs root");
  char dir[4096];
  pp_rootless_user_dir(dir, sizeof(dir));
  snprintf(line, sizeof(line), "log file: %s",
           c->log_file && *c->log_file ? c->log_file : "(none)");
  sink(arg, true, line);
  snprintf(line, sizeof(line), "pid file: %s",
           c->pid_file && *c->pid_file ? c->pid_file : "(none)");
  sink(arg, true, line);
  snprintf(line, sizeof(line), "scratch files: %s/<plugin>", dir);
  sink(arg, true, line);
}
