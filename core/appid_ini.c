/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `module` of a uwsgi ini file, read the way Python's
 * configparser.ConfigParser(strict=False) reads it, because gProfiler's
 * uwsgi appid rule is defined by that parser: "[section]" headers,
 * "key = value" / "key: value" (keys case-insensitive), '#' and ';' comment
 * lines, indented continuation lines, [DEFAULT] fallbacks, "%%" escapes. A
 * line ConfigParser rejects (no separator, no section yet) makes the whole
 * file unusable, as the exception did there.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "appid.h"

static char *join_lines(const char *a, const char *b) {
  char *out = NULL;
  return asprintf(&out, "%s\n%s", a, b) < 0 ? NULL : out;
}

int pp_ini_find_module(const char *text, char **module) {
  *module = NULL;
  char *section = NULL, *uw_module = NULL, *def_module = NULL, *other = NULL;
  char **last_val = NULL; /* the value continuation lines append to */
  int rc = 0;
  const char *p = text;
  while (*p && rc == 0) {
    const char *eol = strchr(p, '\n');
    size_t ll = eol ? (size_t)(eol - p) : strlen(p);
    char *line = strndup(p, ll);
    p += ll + (eol ? 1 : 0);
    if (!line) {
      rc = -1;
      break;
    }
    size_t l = strlen(line);
    while (l && (line[l - 1] == '\r' || line[l - 1] == ' ' || line[l - 1] == '\t'))
      line[--l] = 0;
    char *s = line;
    while (*s == ' ' || *s == '\t')
      s++;
    bool indented = s != line;
    if (!*s || *s == '#' || *s == ';') {
      free(line);
      continue;
    }
    if (indented && last_val && *last_val) {
      char *v = join_lines(*last_val, s);
      if (!v) rc = -1;
      free(*last_val);
      *last_val = v;
    } else if (*s == '[' && strchr(s + 1, ']') && strrchr(s, ']') > s + 1) {
      free(section);
      section = strndup(s + 1, (size_t)(strrchr(s, ']') - s - 1));
      last_val = NULL;
    } else {
      size_t k = strcspn(s, "=:");
      if (!s[k] || !section) {
        rc = -1; /* ParsingError / MissingSectionHeaderError */
      } else {
        size_t kl = k;
        while (kl && (s[kl - 1] == ' ' || s[kl - 1] == '\t'))
          kl--;
        char *v = s + k + 1;
        while (*v == ' ' || *v == '\t')
          v++;
        bool is_module = kl == 6 && strncasecmp(s, "module", 6) == 0;
        last_val = NULL;
        if (is_module && strcmp(section, "uwsgi") == 0) last_val = &uw_module;
        if (is_module && strcmp(section, "DEFAULT") == 0) last_val = &def_module;
        if (last_val) {
          free(*last_val);
          *last_val = strdup(v);
        } else {
          /* other keys only matter as targets of continuation lines; their
           * values are not kept (only "%%" interpolation is supported) */
          free(other);
          other = strdup(v);
          last_val = &other;
        }
      }
    }
    free(line);
  }
  free(section);
  char *m = uw_module ? uw_module : def_module;
  if (rc == 0 && m) {
    /* BasicInterpolation: "%%" -> "%"; any other '%' (references to other
     * keys) is not supported here and makes the lookup fail like a
     * ConfigParser error would for a missing reference. */
    char *o = malloc(strlen(m) + 1), *w = o;
    for (const char *r = m; o && *r; r++) {
      if (*r != '%') {
        *w++ = *r;
      } else if (r[1] == '%') {
        *w++ = '%';
        r++;
      } else {
        rc = -1;
        break;
      }
    }
    if (o) *w = 0;
    if (rc == 0)
      *module = o;
    else
      free(o);
  }
  free(uw_module);
  free(def_module);
  free(other);
  return rc;
}
