/* SPDX-License-Identifier: Apache-2.0 */
/*
 * appids of Ruby application servers. The core already names plain scripts
 * (`ruby: app.rb (/abs/app.rb)`, gProfiler's rule); servers either rewrite
 * their process title (puma, unicorn, sidekiq) or run from a launcher with
 * no .rb argument (rails server), so the script rule finds nothing useful.
 * Format, after gProfiler's gunicorn rule: "<server>: <tag> (<cwd>)", or
 * "<server>: <cwd>" without a tag.
 */
#include <stdio.h>
#include <string.h>

#include "ruby.h"

#define MAX_ARGS 32

static const char *base_of(const char *s) {
  const char *b = strrchr(s, '/');
  return b ? b + 1 : s;
}

static bool starts(const char *s, const char *p) {
  return strncmp(s, p, strlen(p)) == 0;
}

/* Text inside the last [...] of a process title, e.g. puma's app tag. */
static bool last_bracket(const char *s, char *out, size_t cap) {
  const char *o = strrchr(s, '[');
  const char *c = o ? strchr(o, ']') : NULL;
  if (!o || !c || c == o + 1) return false;
  snprintf(out, cap, "%.*s", (int)(c - o - 1), o + 1);
  return true;
}

static int emit(char *out, size_t cap, const char *server, const char *tag, const char *cwd) {
  if (tag && tag[0])
    snprintf(out, cap, "%s: %s (%s)", server, tag, cwd && cwd[0] ? cwd : "unknown");
  else
    snprintf(out, cap, "%s: %s", server, cwd && cwd[0] ? cwd : "unknown");
  return 1;
}

int ruby_server_appid(const char *argv, size_t argv_len, const char *cwd, char *out, size_t cap) {
  const char *v[MAX_ARGS];
  size_t n = 0;
  for (size_t at = 0; at < argv_len && n < MAX_ARGS;) {
    v[n++] = argv + at;
    const char *nul = memchr(argv + at, '\0', argv_len - at);
    if (!nul) break;
    at = (size_t)(nul - argv) + 1;
  }
  if (n == 0 || argv[argv_len ? argv_len - 1 : 0] != '\0') return 0;
  char tag[128] = "";
  const char *a0 = v[0];

  /* rewritten titles: "puma 6.4.0 (tcp://0.0.0.0:3000) [app]",
   * "puma: cluster worker 0: 42 [app]", "unicorn worker[0] -c x.rb",
   * "sidekiq 7.2.0 app [0 of 5 busy]" */
  if (starts(a0, "puma ") || starts(a0, "puma: ")) {
    last_bracket(a0, tag, sizeof(tag));
    return emit(out, cap, "puma", tag, cwd);
  }
  if (starts(a0, "unicorn master") || starts(a0, "unicorn worker") ||
      starts(a0, "unicorn_rails master") || starts(a0, "unicorn_rails worker"))
    return emit(out, cap, "unicorn", NULL, cwd);
  if (starts(a0, "sidekiq ")) {
    char ver[32] = "", app[96] = "";
    if (sscanf(a0, "sidekiq %31s %95s", ver, app) == 2 && app[0] != '[')
      snprintf(tag, sizeof(tag), "%s", app);
    return emit(out, cap, "sidekiq", tag, cwd);
  }
  /* launchers: "ruby bin/rails server", "/usr/bin/ruby /usr/local/bin/puma" */
  for (size_t i = 0; i < n && i < 2; i++) {
    const char *b = base_of(v[i]);
    if (strcmp(b, "puma") == 0) return emit(out, cap, "puma", NULL, cwd);
    if (strcmp(b, "unicorn") == 0 || strcmp(b, "unicorn_rails") == 0)
      return emit(out, cap, "unicorn", NULL, cwd);
    if (strcmp(b, "sidekiq") == 0) return emit(out, cap, "sidekiq", NULL, cwd);
    if (strcmp(b, "rails") == 0 && i + 1 < n &&
        (strcmp(v[i + 1], "server") == 0 || strcmp(v[i + 1], "s") == 0))
      return emit(out, cap, "rails", NULL, cwd);
  }
  return 0;
}
