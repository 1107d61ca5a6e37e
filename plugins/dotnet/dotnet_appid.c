/* SPDX-License-Identifier: Apache-2.0 */
/* .NET appids (gProfiler has none for .NET): from the command line, as
 * the process shows it in /proc (never a file in its root). */
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "dotnet.h"

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

static bool ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* Host options of the muxer that take a value (`dotnet --depsfile x app.dll`). */
static bool takes_value(const char *opt) {
  static const char *const opts[] = {"--additionalprobingpath",
                                     "--additional-deps",
                                     "--depsfile",
                                     "--fx-version",
                                     "--roll-forward",
                                     "--runtimeconfig",
                                     "--roll-forward-on-no-candidate-fx"};
  for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
    if (strcmp(opt, opts[i]) == 0) return true;
  return false;
}

void dotnet_appid(uint32_t pid, char *out, size_t cap) {
  out[0] = '\0';
  char argv[8192];
  size_t n = 0;
  if (pp_proc_cmdline(pid, argv, sizeof(argv), &n) < 0 || n == 0) return;
  const char *end = argv + n; /* NUL-terminated at n by the reader */
  char cwd[PATH_MAX] = "";
  if (pp_proc_cwd(pid, cwd, sizeof(cwd)) < 0) cwd[0] = '\0';

  if (strcmp(base_name(argv), "dotnet") == 0) {
    const char *p = argv + strlen(argv) + 1;
    for (; p < end; p += strlen(p) + 1) {
      if (strcmp(p, "exec") == 0) continue;
      if (p[0] == '-') {
        if (takes_value(p) && p + strlen(p) + 1 < end) p += strlen(p) + 1;
        continue;
      }
      if (!ends_with(p, ".dll")) return; /* an SDK command (build, run...): no app */
      if (p[0] == '/' || !cwd[0])
        snprintf(out, cap, "dotnet: %s (%s)", p, p);
      else
        snprintf(out, cap, "dotnet: %s (%s/%s)", p, strcmp(cwd, "/") ? cwd : "", p);
      return;
    }
    return;
  }
  char exe[PATH_MAX];
  if (pp_proc_exe(pid, exe, sizeof(exe)) < 0) return;
  snprintf(out, cap, "dotnet: %s (%s)", base_name(exe), exe);
}
