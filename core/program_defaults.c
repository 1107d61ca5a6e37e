/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the one-program commands default to per runtime: the sampling rate
 * each runtime's plugin sustains on one busy program (10 kHz where it
 * holds; bench/one-program/rates.py measures it, docs/performance.md has
 * the figures) and wall time where the plugin has it.
 *
 * The rate is one for the whole session, so it is chosen from the program
 * itself: run's command line (its first word, or the program a wrapper
 * such as `timeout` or `env` starts), attach's and dump's executable.
 */
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "program.h"

struct runtime_default {
  const char *runtime;
  const char *const *exe;  /* fnmatch patterns of the executable's basename */
  const char *const *libs; /* ... or of a mapped library's (an embedded runtime) */
  int hz;
};

static const char *const python_exe[] = {"python", "python[23]*", "pypy*",
                                         "uwsgi",  "gunicorn",    NULL};
static const char *const ruby_exe[] = {"ruby",  "ruby[0-9]*", "bundle", "rake",
                                       "rails", "rspec",      NULL};
static const char *const php_exe[] = {"php", "php[0-9]*", "php-cgi*", "php-fpm*", NULL};
static const char *const node_exe[] = {"node", "nodejs", "npm", "npx", NULL};
static const char *const java_exe[] = {"java", "javaw", "mvn", "gradle", "sbt", NULL};
static const char *const dotnet_exe[] = {"dotnet", NULL};
static const char *const python_libs[] = {"libpython*", NULL};
static const char *const ruby_libs[] = {"libruby*", NULL};
static const char *const php_libs[] = {"libphp*", NULL};
static const char *const node_libs[] = {"libnode*", NULL};
static const char *const java_libs[] = {"libjvm.so", NULL};
static const char *const dotnet_libs[] = {"libcoreclr.so", NULL};

/* Figures of record in docs/performance.md ("One program: sampling rates");
 * a rate a plugin cannot reach is not asked for, since it only shows as
 * missed samples and costs the program CPU. */
static const struct runtime_default defaults[] = {
    /* reads every thread from outside: 10 kHz held on a quiet host, not
     * under load (half the samples missed), 5 kHz did */
    {"python", python_exe, python_libs, 5000},
    {"php", php_exe, php_libs, 10000},
    /* the plugin's own ceiling */
    {"ruby", ruby_exe, ruby_libs, 1000},
    /* V8 read from outside the process: about 500 stacks a second */
    {"nodejs", node_exe, node_libs, 500},
    /* the JVMTI agent's ceiling per thread */
    {"java", java_exe, java_libs, 1000},
    /* EventPipe's sampler: 1 ms at the least */
    {"dotnet", dotnet_exe, dotnet_libs, 1000},
};
#define NATIVE_HZ 10000 /* perf */

/* Wrappers whose operands hold the program they start. */
static const char *const wrappers[] = {"timeout", "env",  "nice",   "nohup",  "taskset", "time",
                                       "ionice",  "chrt", "stdbuf", "setsid", "exec",    NULL};

static bool matches(const char *const *patterns, const char *name) {
  for (size_t i = 0; patterns[i]; i++)
    if (fnmatch(patterns[i], name, 0) == 0) return true;
  return false;
}

static const char *base_of(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

static const struct runtime_default *default_of(const char *exe) {
  const char *name = base_of(exe);
  for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
    if (matches(defaults[i].exe, name)) return &defaults[i];
  return NULL;
}

/* A wrapper's own flags, durations, priorities, CPU lists and VAR=value
 * words are skipped; the first other word is the program. */
static bool is_wrapper_operand(const char *w) {
  if (w[0] == '-' || strchr(w, '=')) return true;
  return strspn(w, "0123456789.,smhd") == strlen(w);
}

/* Wrapper flags whose value is the next word (timeout -s KILL, nice -n 5,
 * env -u NAME, taskset -c 0, ionice -c 2, stdbuf -o L, chrt -p ...). */
static bool takes_value(const char *w) {
  static const char *const flags[] = {
      "-s",           "-k",      "-n",       "-u",
      "-c",           "-p",      "-o",       "-e",
      "-C",           "-S",      "--signal", "--kill-after",
      "--adjustment", "--unset", "--chdir",  "--split-string",
      NULL,
  };
  for (size_t i = 0; flags[i]; i++)
    if (!strcmp(w, flags[i])) return true;
  return false;
}

const char *pp_program_runtime_of_argv(const char *const *argv, size_t argc) {
  size_t i = 0;
  while (i < argc && matches(wrappers, base_of(argv[i]))) {
    i++;
    while (i < argc && is_wrapper_operand(argv[i]))
      i += takes_value(argv[i]) && i + 1 < argc ? 2 : 1;
  }
  const struct runtime_default *d = i < argc ? default_of(argv[i]) : NULL;
  return d ? d->runtime : "native";
}

/* The runtime whose library the process maps (a runtime embedded in, or
 * started by, an executable of another name: an apphost, a custom JVM
 * launcher). The maps are the process's: each line is bounded. */
static const struct runtime_default *default_of_maps(pid_t pid) {
  char path[64], line[PATH_MAX + 128];
  snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
  FILE *f = fopen(path, "re");
  if (!f) return NULL;
  const struct runtime_default *found = NULL;
  while (!found && fgets(line, sizeof(line), f)) {
    char *nl = strchr(line, '\n');
    if (nl) *nl = '\0';
    const char *slash = strrchr(line, '/');
    if (!slash) continue;
    for (size_t i = 0; !found && i < sizeof(defaults) / sizeof(defaults[0]); i++)
      if (matches(defaults[i].libs, slash + 1)) found = &defaults[i];
  }
  fclose(f);
  return found;
}

const char *pp_program_runtime_of_pid(pid_t pid) {
  char path[64], exe[PATH_MAX];
  snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
  ssize_t n = readlink(path, exe, sizeof(exe) - 1);
  const struct runtime_default *d = NULL;
  if (n > 0) {
    exe[n] = '\0';
    d = default_of(exe);
  }
  if (!d) d = default_of_maps(pid);
  return d ? d->runtime : "native";
}

int pp_program_default_hz(const char *runtime) {
  for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
    if (!strcmp(defaults[i].runtime, runtime)) return defaults[i].hz;
  return NATIVE_HZ;
}
