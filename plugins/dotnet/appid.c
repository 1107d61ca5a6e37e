/* .NET appids (gProfiler has none for .NET; the issue asks for them). */
#include "appid.h"

#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

void dotnet_appid(const struct pp_host *host, uint32_t pid, char *out, size_t cap) {
  out[0] = '\0';
  char path[64], argv[8192];
  snprintf(path, sizeof(path), "/proc/%u/cmdline", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = read(fd, argv, sizeof(argv) - 1);
  close(fd);
  if (n <= 0) return;
  argv[n] = '\0';
  const char *end = argv + n;
  char cwd[PATH_MAX] = "";
  snprintf(path, sizeof(path), "/proc/%u/cwd", pid);
  ssize_t cl = readlink(path, cwd, sizeof(cwd) - 1);
  cwd[cl > 0 ? cl : 0] = '\0';

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
  if (host->proc_exe(host, pid, exe, sizeof(exe)) < 0) return;
  snprintf(out, cap, "dotnet: %s (%s)", base_name(exe), exe);
}

void dotnet_json_string(const char *s, char *out, size_t cap) {
  size_t o = 0;
  if (cap < 3) {
    if (cap) out[0] = '\0';
    return;
  }
  out[o++] = '"';
  for (; *s && o + 8 < cap; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      out[o++] = '\\';
      out[o++] = (char)c;
    } else if (c < 0x20) {
      o += (size_t)snprintf(out + o, cap - o, "\\u%04x", c);
    } else {
      out[o++] = (char)c;
    }
  }
  out[o++] = '"';
  out[o] = '\0';
}
