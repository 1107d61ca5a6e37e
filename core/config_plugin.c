/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Plugin sections: a plugin's YAML section and its command-line flags,
 * validated against the options its descriptor declares, once the plugins
 * are loaded. Keys the host handles for every plugin: enabled, mode,
 * isolation. Flags every plugin gets: --<name>-mode, --no-<name>,
 * --<name>-isolation, plus one per declared option.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "config.h"
#include "config_alloc.h"

#define FLAG_MAX 128

/* Runtimes polyprof ships plugins for: a section or flag for one of these
 * that is not installed is a note, not an error. */
static const char *const known_runtimes[] = {"perf", "python", "java",   "php",
                                             "ruby", "nodejs", "dotnet", "example"};
#define NKNOWN (sizeof(known_runtimes) / sizeof(known_runtimes[0]))

static char *xasprintf(const char *fmt, ...) PP_PRINTF(1, 2);
static char *xasprintf(const char *fmt, ...) {
  va_list ap;
  char *s;
  va_start(ap, fmt);
  int n = vasprintf(&s, fmt, ap);
  va_end(ap);
  if (n < 0) abort();
  return s;
}

static char **strv_dup(char *const *items, size_t n) {
  char **v = xrealloc(NULL, (n + 1) * sizeof(*v));
  for (size_t i = 0; i < n; i++)
    v[i] = xstrdup(items[i]);
  v[n] = NULL;
  return v;
}

/* "a,b, c" -> {"a", "b", "c"}: how list flags and list defaults are written. */
static char **split_commas(const char *s, size_t *n) {
  char **v = xrealloc(NULL, sizeof(*v));
  *n = 0;
  while (s && *s) {
    const char *end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    while (len && *s == ' ')
      s++, len--;
    while (len && s[len - 1] == ' ')
      len--;
    if (len) {
      v = xrealloc(v, (*n + 2) * sizeof(*v));
      v[*n] = strndup(s, len);
      if (!v[*n]) abort();
      (*n)++;
    }
    s = end ? end + 1 : NULL;
  }
  v[*n] = NULL;
  return v;
}

static void dashed(const char *name, char *buf, size_t len) {
  snprintf(buf, len, "%s", name);
  for (char *p = buf; *p; p++)
    if (*p == '_') *p = '-';
}

static bool in_list(const char *const *list, size_t n, const char *s) {
  for (size_t i = 0; i < n; i++)
    if (list[i] && strcmp(list[i], s) == 0) return true;
  return false;
}

void pp_config_add_flag(struct pp_config *c, const char *flag, const char *value,
                        bool value_attached) {
  c->flags = xrealloc(c->flags, (c->flag_count + 1) * sizeof(*c->flags));
  struct pp_config_flag *f = &c->flags[c->flag_count++];
  f->flag = xstrdup(flag);
  f->value = value ? xstrdup(value) : NULL;
  f->value_attached = value_attached;
  f->claimed = false;
}

const struct pp_plugin_config *pp_config_plugin(const struct pp_config *c, const char *name) {
  for (size_t i = 0; i < c->plugin_count; i++)
    if (strcmp(c->plugins[i].name, name) == 0) return &c->plugins[i];
  return NULL;
}

/* ---- binding ------------------------------------------------------------ */

struct binder {
  struct pp_config *c;
  const struct pp_plugin *p;
  const char *name;
  const struct pp_option *opts;
  size_t nopts;
  const struct pp_option *mode_opt; /* "mode" declared as an enum, or NULL */
  char *err;
};

static void fail(struct binder *b, const struct pp_config_value *v, const char *fmt, ...)
    PP_PRINTF(3, 4);
static void fail(struct binder *b, const struct pp_config_value *v, const char *fmt, ...) {
  int n;
  if (v && v->flag)
    n = snprintf(b->err, PP_MAX_ERR, "polyprof: %s: ", v->flag);
  else if (v)
    n = snprintf(b->err, PP_MAX_ERR, "%s:%d: %s.%s: ", v->origin, v->line, b->name, v->key);
  else
    n = snprintf(b->err, PP_MAX_ERR, "polyprof: plugin %s: ", b->name);
  if (n < 0 || n >= PP_MAX_ERR) return; /* a truncated message still names the key */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b->err + n, PP_MAX_ERR - (size_t)n, fmt, ap);
  va_end(ap);
}

static const struct pp_option *find_option(const struct binder *b, const char *key) {
  for (size_t i = 0; i < b->nopts; i++)
    if (b->opts[i].key && strcmp(b->opts[i].key, key) == 0) return &b->opts[i];
  return NULL;
}

/* Does command-line flag f belong to this plugin? If so, the key it sets and
 * its value (which may be an error to report). */
static int claim_flag(struct binder *b, struct pp_config_flag *f, struct pp_config_value *out) {
  char name[FLAG_MAX], want[FLAG_MAX + 16], optflag[FLAG_MAX];
  dashed(b->name, name, sizeof(name));
  const char *key = NULL, *value = f->value;
  bool takes_value = true;
  const char *fixed = NULL;

  snprintf(want, sizeof(want), "--no-%s", name);
  if (strcmp(f->flag, want) == 0) {
    key = "enabled";
    takes_value = false;
    fixed = "false";
  }
  snprintf(want, sizeof(want), "--%s-mode", name);
  if (!key && strcmp(f->flag, want) == 0) key = "mode";
  snprintf(want, sizeof(want), "--%s-isolation", name);
  if (!key && strcmp(f->flag, want) == 0) key = "isolation";
  for (size_t i = 0; !key && i < b->nopts; i++) {
    if (!b->opts[i].key) continue;
    snprintf(want, sizeof(want), "--%s",
             pp_config_option_flag(b->name, &b->opts[i], optflag, sizeof(optflag)));
    if (strcmp(f->flag, want) != 0) continue;
    key = b->opts[i].key;
    if (b->opts[i].type == PP_OPT_BOOL) {
      takes_value = false;
      fixed = pp_config_bool_flag_sets(f->flag + 2) ? "true" : "false";
    }
  }
  if (!key) return 0;

  f->claimed = true;
  memset(out, 0, sizeof(*out));
  out->key = xstrdup(key);
  out->flag = xstrdup(f->flag);
  out->origin = "command line";
  if (!takes_value) {
    /* "--flag=false" is explicit; a following word is not ours to take */
    if (value && !f->value_attached) {
      fail(b, out, "takes no value (unexpected '%s')", value);
      return -1;
    }
    out->scalar = xstrdup(value ? value : fixed);
    if (value && strcmp(fixed, "false") == 0) {
      bool v;
      if (pp_config_parse_bool(value, &v) < 0) {
        fail(b, out, "expected true or false, got '%s'", value);
        return -1;
      }
      /* --no-python=false means "do not disable" */
      free(out->scalar);
      out->scalar = xstrdup(v ? "false" : "true");
    }
    return 1;
  }
  if (!value) {
    fail(b, out, "needs a value");
    return -1;
  }
  const struct pp_option *o = find_option(b, key);
  if (o && o->type == PP_OPT_LIST) {
    size_t n;
    out->items = split_commas(value, &n);
    out->item_count = n;
  } else {
    out->scalar = xstrdup(value);
  }
  return 1;
}

static struct pp_plugin_section *section_of(struct pp_config *c, const char *name, bool create) {
  for (size_t i = 0; i < c->section_count; i++)
    if (strcmp(c->sections[i].name, name) == 0) return &c->sections[i];
  if (!create) return NULL;
  c->sections = xrealloc(c->sections, (c->section_count + 1) * sizeof(*c->sections));
  struct pp_plugin_section *s = &c->sections[c->section_count++];
  memset(s, 0, sizeof(*s));
  s->name = xstrdup(name);
  return s;
}

/* Flags are appended after the file's values: later entries win. */
static int claim_flags(struct binder *b) {
  for (size_t i = 0; i < b->c->flag_count; i++) {
    struct pp_config_flag *f = &b->c->flags[i];
    if (f->claimed) continue;
    struct pp_config_value v;
    int rc = claim_flag(b, f, &v);
    if (rc == 0) continue;
    struct pp_plugin_section *s = section_of(b->c, b->name, true);
    s->values = xrealloc(s->values, (s->count + 1) * sizeof(*s->values));
    s->values[s->count++] = v; /* kept even on error: the section owns it */
    if (rc < 0) return -1;
  }
  return 0;
}

static void choices_text(const char *const *choices, const char *extra, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; choices && choices[i] && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", choices[i]);
  if (extra && used < len) snprintf(buf + used, len - used, "%s%s", used ? ", " : "", extra);
}

static bool in_choices(const char *const *choices, const char *s) {
  for (size_t i = 0; choices && choices[i]; i++)
    if (strcmp(choices[i], s) == 0) return true;
  return false;
}

static char *where(const struct pp_config_value *v, const char *plugin) {
  if (v->flag) return xasprintf("%s %s", v->flag, v->scalar ? v->scalar : "");
  return xasprintf("%s.%s: %s (%s:%d)", plugin, v->key, v->scalar ? v->scalar : "", v->origin,
                   v->line);
}

/* Checks one value against its option; the normalised text goes to bo.
 * *from_cli tracks where a list came from: repeated flags add up, the first
 * flag replaces what the file said. */
static int bind_value(struct binder *b, const struct pp_option *o, const struct pp_config_value *v,
                      struct pp_bound_option *bo, bool *from_cli) {
  char buf[256];
  if (o->type == PP_OPT_LIST) {
    char **items;
    size_t n;
    if (v->items)
      items = strv_dup(v->items, n = v->item_count);
    else
      items = split_commas(v->scalar, &n);
    if (v->flag && *from_cli) {
      bo->items = xrealloc(bo->items, (bo->item_count + n + 1) * sizeof(*bo->items));
      memcpy(bo->items + bo->item_count, items, (n + 1) * sizeof(*items));
      bo->item_count += n;
      free(items);
    } else {
      strv_free(bo->items);
      bo->items = items;
      bo->item_count = n;
    }
    *from_cli = v->flag != NULL;
    return 0;
  }
  if (v->items) {
    fail(b, v, "expected a single value, got a list");
    return -1;
  }
  const char *s = v->scalar;
  char norm[32];
  switch (o->type) {
    case PP_OPT_BOOL: {
      bool x;
      if (pp_config_parse_bool(s, &x) < 0) {
        fail(b, v, "expected true or false, got '%s'", s);
        return -1;
      }
      s = x ? "true" : "false";
      break;
    }
    case PP_OPT_INT: {
      int64_t x;
      if (pp_config_parse_int(s, &x) < 0) {
        fail(b, v, "expected an integer, got '%s'", s);
        return -1;
      }
      if (o->min <= o->max && (x < o->min || x > o->max)) {
        fail(b, v, "must be between %lld and %lld (got %s)", (long long)o->min, (long long)o->max,
             s);
        return -1;
      }
      snprintf(norm, sizeof(norm), "%lld", (long long)x);
      s = norm;
      break;
    }
    case PP_OPT_ENUM:
      if (!in_choices(o->choices, s)) {
        choices_text(o->choices, NULL, buf, sizeof(buf));
        fail(b, v, "unknown value '%s' (expected one of: %s)", s, buf);
        return -1;
      }
      break;
    default:
      break;
  }
  free(bo->scalar);
  bo->scalar = xstrdup(s);
  return 0;
}

static void unknown_key(struct binder *b, const struct pp_config_value *v) {
  const char **names = xrealloc(NULL, (b->nopts + 3) * sizeof(*names));
  size_t n = 0;
  names[n++] = "enabled";
  names[n++] = "mode";
  names[n++] = "isolation";
  for (size_t i = 0; i < b->nopts; i++)
    if (b->opts[i].key) names[n++] = b->opts[i].key;
  const char *s = pp_config_suggest(v->key, names, n);
  if (s)
    fail(b, v, "unknown key (did you mean '%s'?)", s);
  else
    fail(b, v, "unknown key (plugin %s has no such option)", b->name);
  free(names);
}

struct state {
  bool enabled;
  const struct pp_config_value *enabled_src; /* the value that disabled it */
  char *mode;
  const struct pp_config_value *mode_src;
  char *isolation;
};

static int bind_host_key(struct binder *b, const struct pp_config_value *v, struct state *st) {
  char buf[256];
  if (v->items) {
    fail(b, v, "expected a single value, got a list");
    return -1;
  }
  if (strcmp(v->key, "enabled") == 0) {
    if (pp_config_parse_bool(v->scalar, &st->enabled) < 0) {
      fail(b, v, "expected true or false, got '%s'", v->scalar);
      return -1;
    }
    st->enabled_src = v;
    return 0;
  }
  if (strcmp(v->key, "isolation") == 0) {
    if (strcmp(v->scalar, "worker") != 0 && strcmp(v->scalar, "inline") != 0) {
      fail(b, v, "unknown isolation '%s' (expected one of: worker, inline)", v->scalar);
      return -1;
    }
    free(st->isolation);
    st->isolation = xstrdup(v->scalar);
    return 0;
  }
  /* mode: "none" is gProfiler's old spelling of "disabled" */
  const char *m = strcmp(v->scalar, "none") == 0 ? "disabled" : v->scalar;
  bool ok = strcmp(m, "disabled") == 0 ||
            (b->mode_opt ? in_choices(b->mode_opt->choices, m) : strcmp(m, "enabled") == 0);
  if (!ok) {
    choices_text(b->mode_opt ? b->mode_opt->choices : (const char *const[]){"enabled", NULL},
                 "disabled", buf, sizeof(buf));
    fail(b, v, "unknown mode '%s' (expected one of: %s)", v->scalar, buf);
    return -1;
  }
  free(st->mode);
  st->mode = xstrdup(m);
  st->mode_src = v;
  return 0;
}

void pp_plugin_config_clear(struct pp_plugin_config *pc) {
  for (size_t i = 0; i < pc->option_count; i++) {
    free(pc->options[i].scalar);
    strv_free(pc->options[i].items);
  }
  free(pc->options);
  free(pc->name);
  free(pc->mode);
  free(pc->disabled_by);
  free(pc->isolation);
}

static void apply_defaults(struct binder *b, struct pp_bound_option *bo) {
  for (size_t i = 0; i < b->nopts; i++) {
    const struct pp_option *o = &b->opts[i];
    bo[i].opt = o;
    if (o->type == PP_OPT_LIST) {
      if (!bo[i].items) {
        size_t n;
        bo[i].items = split_commas(o->default_value, &n);
        bo[i].item_count = n;
      }
    } else if (!bo[i].scalar && o->default_value) {
      bo[i].scalar = xstrdup(o->default_value);
    }
  }
}

int pp_config_bind_plugin(struct pp_config *c, const struct pp_plugin *plugin,
                          char err[PP_MAX_ERR]) {
  struct binder b = {.c = c, .p = plugin, .name = plugin ? plugin->name : NULL, .err = err};
  err[0] = '\0';
  if (!b.name || !*b.name || strlen(b.name) >= FLAG_MAX) {
    snprintf(err, PP_MAX_ERR, "polyprof: a plugin has no usable name");
    return -1;
  }
  if (pp_config_plugin(c, b.name)) {
    fail(&b, NULL, "configured twice");
    return -1;
  }
  b.opts = pp_config_plugin_options(plugin, &b.nopts);
  const struct pp_option *m = find_option(&b, "mode");
  b.mode_opt = m && m->type == PP_OPT_ENUM ? m : NULL;
  if (claim_flags(&b) < 0) return -1;

  struct state st = {.enabled = true};
  if (b.mode_opt)
    st.mode = xstrdup(b.mode_opt->default_value                       ? b.mode_opt->default_value
                      : b.mode_opt->choices && b.mode_opt->choices[0] ? b.mode_opt->choices[0]
                                                                      : "disabled");
  struct pp_plugin_config pc = {.name = xstrdup(b.name)};
  pc.options = xrealloc(NULL, (b.nopts + 1) * sizeof(*pc.options));
  memset(pc.options, 0, (b.nopts + 1) * sizeof(*pc.options));
  pc.option_count = b.nopts;
  bool *list_from_cli = calloc(b.nopts + 1, sizeof(bool));
  if (!list_from_cli) abort();

  const struct pp_plugin_section *s = section_of(c, b.name, false);
  for (size_t i = 0; s && i < s->count; i++) {
    const struct pp_config_value *v = &s->values[i];
    int rc;
    if (!strcmp(v->key, "enabled") || !strcmp(v->key, "mode") || !strcmp(v->key, "isolation")) {
      rc = bind_host_key(&b, v, &st);
    } else {
      const struct pp_option *o = find_option(&b, v->key);
      if (!o) {
        unknown_key(&b, v);
        rc = -1;
      } else {
        rc = bind_value(&b, o, v, &pc.options[o - b.opts], &list_from_cli[o - b.opts]);
      }
    }
    if (rc < 0) {
      free(list_from_cli);
      free(st.mode);
      free(st.isolation);
      pp_plugin_config_clear(&pc);
      return -1;
    }
  }
  free(list_from_cli);
  apply_defaults(&b, pc.options);
  if (b.mode_opt) { /* plugins read their mode like any option */
    struct pp_bound_option *bo = &pc.options[b.mode_opt - b.opts];
    free(bo->scalar);
    bo->scalar = xstrdup(st.mode);
  }

  bool mode_off = st.mode && strcmp(st.mode, "disabled") == 0;
  pc.enabled = st.enabled && !mode_off;
  if (!st.enabled)
    pc.disabled_by =
        st.enabled_src->flag ? xstrdup(st.enabled_src->flag) : where(st.enabled_src, b.name);
  else if (mode_off && st.mode_src)
    pc.disabled_by = where(st.mode_src, b.name);
  else if (mode_off) {
    char dname[FLAG_MAX];
    dashed(b.name, dname, sizeof(dname));
    pc.disabled_by =
        xasprintf("%s.mode defaults to disabled (turn it on with --%s-mode)", b.name, dname);
  }
  pc.mode = st.mode;
  pc.isolation = st.isolation ? st.isolation : xstrdup(c->isolation ? c->isolation : "worker");

  c->plugins = xrealloc(c->plugins, (c->plugin_count + 1) * sizeof(*c->plugins));
  c->plugins[c->plugin_count++] = pc;
  return 0;
}

/* ---- what nobody claimed ------------------------------------------------ */

static void note(char err[PP_MAX_ERR], int *problems, const char *fmt, ...) PP_PRINTF(3, 4);
static void note(char err[PP_MAX_ERR], int *problems, const char *fmt, ...) {
  if ((*problems)++) return; /* the first problem is the one to fix first */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, PP_MAX_ERR, fmt, ap);
  va_end(ap);
}

/* The runtime a flag is about: "--no-php" -> php, "--php-proc-filter" -> php. */
static void flag_subject(const char *flag, char *buf, size_t len) {
  const char *s = flag + 2;
  if (strncmp(s, "no-", 3) == 0) s += 3;
  size_t n = strcspn(s, "-");
  snprintf(buf, len, "%.*s", (int)n, s);
}

/* Every flag a loaded plugin answers to, for suggestions. */
static char **plugin_flags(const struct pp_config *c, size_t *count) {
  size_t n = 0, cap = 8 + 3 * NKNOWN;
  char **v = xrealloc(NULL, cap * sizeof(*v));
  char name[FLAG_MAX], buf[FLAG_MAX];
  for (size_t i = 0; i < NKNOWN; i++) {
    v[n++] = xasprintf("--%s-mode", known_runtimes[i]);
    v[n++] = xasprintf("--no-%s", known_runtimes[i]);
    v[n++] = xasprintf("--%s-isolation", known_runtimes[i]);
  }
  for (size_t i = 0; i < c->plugin_count; i++) {
    const struct pp_plugin_config *p = &c->plugins[i];
    if (n + 3 + p->option_count > cap) {
      cap = n + 3 + p->option_count + 8;
      v = xrealloc(v, cap * sizeof(*v));
    }
    dashed(p->name, name, sizeof(name));
    v[n++] = xasprintf("--%s-mode", name);
    v[n++] = xasprintf("--no-%s", name);
    v[n++] = xasprintf("--%s-isolation", name);
    for (size_t j = 0; j < p->option_count; j++)
      if (p->options[j].opt && p->options[j].opt->key)
        v[n++] =
            xasprintf("--%s", pp_config_option_flag(p->name, p->options[j].opt, buf, sizeof(buf)));
  }
  *count = n;
  return v;
}

int pp_config_check_orphans(const struct pp_config *c, const char *const *loaded_names,
                            char err[PP_MAX_ERR]) {
  int problems = 0;
  size_t nloaded = 0;
  err[0] = '\0';
  while (loaded_names && loaded_names[nloaded])
    nloaded++;

  for (size_t i = 0; i < c->section_count; i++) {
    const struct pp_plugin_section *s = &c->sections[i];
    if (in_list(loaded_names, nloaded, s->name) || in_list(known_runtimes, NKNOWN, s->name))
      continue;
    if (!s->origin) continue; /* created for flags only; those are reported below */
    size_t ncore = 0;
    while (pp_config_sections[ncore])
      ncore++;
    const char **cands = xrealloc(NULL, (nloaded + NKNOWN + ncore) * sizeof(*cands));
    size_t n = 0;
    for (size_t j = 0; j < nloaded; j++)
      cands[n++] = loaded_names[j];
    for (size_t j = 0; j < NKNOWN; j++)
      cands[n++] = known_runtimes[j];
    for (size_t j = 0; j < ncore; j++)
      cands[n++] = pp_config_sections[j];
    const char *sug = pp_config_suggest(s->name, cands, n);
    free(cands);
    if (sug)
      note(err, &problems, "%s:%d: %s: unknown section (did you mean '%s'?)", s->origin, s->line,
           s->name, sug);
    else
      note(err, &problems, "%s:%d: %s: unknown section (no plugin of that name is installed)",
           s->origin, s->line, s->name);
  }

  size_t nflags = 0;
  char **flags = NULL;
  for (size_t i = 0; i < c->flag_count; i++) {
    const struct pp_config_flag *f = &c->flags[i];
    char subject[FLAG_MAX];
    if (f->claimed) continue;
    flag_subject(f->flag, subject, sizeof(subject));
    if (!in_list(loaded_names, nloaded, subject) && in_list(known_runtimes, NKNOWN, subject))
      continue; /* e.g. --php-mode with no php plugin installed */
    if (!flags) flags = plugin_flags(c, &nflags);
    const char *sug = pp_cli_suggest_flag(f->flag, (const char *const *)flags, nflags);
    if (sug)
      note(err, &problems, "polyprof: unknown flag %s (did you mean %s?)", f->flag, sug);
    else
      note(err, &problems, "polyprof: unknown flag %s", f->flag);
  }
  for (size_t i = 0; i < nflags; i++)
    free(flags[i]);
  free(flags);
  return problems;
}
