/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Text -> values for every configuration source (YAML, command line, plugin
 * options), and the "did you mean" helper shared by all their messages.
 */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"

int pp_config_parse_bool(const char *s, bool *out) {
  static const char *const yes[] = {"true", "yes", "on", "1"};
  static const char *const no[] = {"false", "no", "off", "0"};
  if (!s) return -1;
  for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
    if (strcasecmp(s, yes[i]) == 0) {
      *out = true;
      return 0;
    }
    if (strcasecmp(s, no[i]) == 0) {
      *out = false;
      return 0;
    }
  }
  return -1;
}

int pp_config_parse_int(const char *s, int64_t *out) {
  if (!s) return -1;
  const char *p = s;
  if (*p == '+' || *p == '-') p++;
  /* strtoll alone would accept leading blanks, "0x10" and "12abc" */
  if (!isdigit((unsigned char)*p)) return -1;
  for (const char *q = p; *q; q++)
    if (!isdigit((unsigned char)*q)) return -1;
  errno = 0;
  long long v = strtoll(s, NULL, 10);
  if (errno == ERANGE) return -1;
  *out = v;
  return 0;
}

/* Optimal string alignment distance: a swapped pair of letters ("frequnecy")
 * is one typo, not two. */
static size_t edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 64 || lb > 64) return (size_t)-1; /* nobody typos a 64-char word */
  size_t d[65][65];
  for (size_t i = 0; i <= la; i++)
    d[i][0] = i;
  for (size_t j = 0; j <= lb; j++)
    d[0][j] = j;
  for (size_t i = 1; i <= la; i++) {
    for (size_t j = 1; j <= lb; j++) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      size_t best = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
      if (d[i - 1][j - 1] + cost < best) best = d[i - 1][j - 1] + cost;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
          d[i - 2][j - 2] + 1 < best)
        best = d[i - 2][j - 2] + 1;
      d[i][j] = best;
    }
  }
  return d[la][lb];
}

const char *pp_config_suggest(const char *word, const char *const *candidates, size_t n) {
  if (!word || !*word) return NULL;
  size_t len = strlen(word);
  /* Short words tolerate fewer edits, or "log" would suggest "pid". */
  size_t limit = len <= 3 ? 1 : len <= 6 ? 2 : 3;
  const char *best = NULL;
  size_t best_d = (size_t)-1;
  for (size_t i = 0; i < n; i++) {
    if (!candidates[i]) continue;
    size_t d = edit_distance(word, candidates[i]);
    /* an abbreviation ("--profiling-freq") is as good as a typo */
    if (len >= 4 && strncmp(candidates[i], word, len) == 0 && d > 1) d = limit;
    if (d < best_d) {
      best_d = d;
      best = candidates[i];
    }
  }
  return best_d <= limit && best_d > 0 ? best : NULL;
}

const struct pp_option *pp_config_plugin_options(const struct pp_plugin *p, size_t *count) {
  *count = 0;
  /* a descriptor built against an older header may end before these fields */
  size_t end = offsetof(struct pp_plugin, option_count) + sizeof(p->option_count);
  if (!p || p->struct_size < end || !p->options) return NULL;
  *count = p->option_count;
  return p->options;
}

const char *pp_config_option_flag(const char *plugin, const struct pp_option *o, char *buf,
                                  size_t len) {
  if (o->cli_flag && *o->cli_flag) {
    snprintf(buf, len, "%s", o->cli_flag);
    return buf;
  }
  snprintf(buf, len, "%s-%s", plugin, o->key ? o->key : "");
  for (char *p = buf; *p; p++)
    if (*p == '_') *p = '-';
  return buf;
}

/* gProfiler's flags say their effect in their name: --java-collect-thread-names
 * turns something on, --no-python-versions and --perf-no-memory-restart off. */
bool pp_config_bool_flag_sets(const char *flag) {
  return !(strncmp(flag, "no-", 3) == 0 || strstr(flag, "-no-") ||
           strncmp(flag, "disable-", 8) == 0 || strstr(flag, "-disable-"));
}
