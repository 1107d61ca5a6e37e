/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Application identifiers ("appid: ..." frames), gProfiler's rules
 * (listed in docs/gprofiler-compat.md): gunicorn (plain and setproctitle
 * form), uvicorn, uwsgi (incl. its ini file), celery, pyspark, python -m /
 * python x.py, java (jar or main class from argv, plus JVM args matching the
 * --app-id-args-filter regexes, plus the optional Spark app name), node and
 * ruby. The rules work on the process's argv as psutil would have split it,
 * because gProfiler's quirks (what counts as "the" argument) come from there.
 *
 * Everything here comes from another process: argv counts and lengths are
 * capped, files are read with a size cap, symlink chains are bounded.
 */
#include "appid.h"

#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "enrich.h"
#include "polyprof/kit/proc.h"

#define MAX_ARGS 4096
#define MAX_PATH_TEXT 8192 /* resolved paths longer than this are hostile */
#define MAX_LINK_HOPS 40   /* like the kernel's ELOOP limit */
#define MAX_INI_BYTES (256 * 1024)
#define UNKNOWN_APP "unknown app name"

struct args {
  const char *v[MAX_ARGS];
  size_t n;
  char *storage;
};

/* ---- small helpers ---- */

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

static bool ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

static bool starts_with(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  char *out = NULL;
  int r = vasprintf(&out, f, ap);
  va_end(ap);
  return r < 0 ? NULL : out;
}

static const char *arg_at(const struct args *a, size_t i) {
  return i < a->n ? a->v[i] : NULL;
}

/* gProfiler's _get_cli_arg_by_name: the value after an exact `name`
 * (ARG_ERROR if `name` is the last argument: Python raised IndexError there
 * and the whole rule was skipped), else "name=value", else "<name>value". */
enum { ARG_NA = 0, ARG_FOUND = 1, ARG_ERROR = -1 };
static int arg_by_name(const struct args *a, const char *name, bool equals, bool short_prefix,
                       const char **out) {
  *out = NULL;
  for (size_t i = 0; i < a->n; i++) {
    if (strcmp(a->v[i], name) == 0) {
      if (i + 1 >= a->n) return ARG_ERROR;
      *out = a->v[i + 1];
      return ARG_FOUND;
    }
  }
  size_t nl = strlen(name);
  if (equals) {
    for (size_t i = 0; i < a->n; i++) {
      const char *eq = strchr(a->v[i], '=');
      size_t kl = eq ? (size_t)(eq - a->v[i]) : strlen(a->v[i]);
      if (kl == nl && memcmp(a->v[i], name, nl) == 0) {
        *out = eq ? eq + 1 : "";
        return ARG_FOUND;
      }
    }
  }
  if (short_prefix) {
    for (size_t i = 0; i < a->n; i++) {
      if (starts_with(a->v[i], name)) {
        *out = a->v[i] + nl;
        return ARG_FOUND;
      }
    }
  }
  return ARG_NA;
}

/* Python's `by_name(x) or by_name(y)`: an empty value counts as absent. */
static int arg_by_name_or(const struct args *a, const char *n1, bool eq1, bool sp1, const char *n2,
                          bool eq2, bool sp2, const char **out) {
  int r = arg_by_name(a, n1, eq1, sp1, out);
  if (r == ARG_ERROR) return r;
  if (r == ARG_FOUND && **out) return r;
  return arg_by_name(a, n2, eq2, sp2, out);
}

/* ^python([23](\.\d{1,2})?)?$ on the basename */
static bool is_python_bin(const char *arg) {
  const char *b = base_name(arg);
  if (!starts_with(b, "python")) return false;
  b += 6;
  if (!*b) return true;
  if (*b != '2' && *b != '3') return false;
  b++;
  if (!*b) return true;
  if (*b++ != '.') return false;
  int digits = 0;
  while (*b >= '0' && *b <= '9' && digits < 3)
    b++, digits++;
  return *b == '\0' && digits >= 1 && digits <= 2;
}

static bool is_python_m_proc(const struct args *a) {
  return a->n >= 3 && is_python_bin(a->v[0]) && strcmp(a->v[1], "-m") == 0;
}

/* ---- files named by another process ---- */

int pp_open_regular(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) return -errno;
  if (!S_ISREG(st.st_mode)) return -EINVAL;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return -errno;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return -EINVAL;
  }
  return fd;
}

int pp_read_regular(const char *path, char *buf, size_t cap, size_t *len) {
  if (cap == 0) return -EINVAL;
  int fd = pp_open_regular(path);
  if (fd < 0) return fd;
  size_t got = 0;
  while (got + 1 < cap) {
    ssize_t r = read(fd, buf + got, cap - 1 - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  buf[got] = '\0';
  if (len) *len = got;
  return 0;
}

/* ---- argv splitting (psutil semantics) ---- */

size_t pp_split_cmdline(const char *data, size_t len, char **storage, const char **out,
                        size_t max) {
  *storage = NULL;
  if (!data || len == 0 || max == 0) return 0;
  char *buf = malloc(len + 1);
  if (!buf) return 0;
  memcpy(buf, data, len);
  buf[len] = '\0';
  char sep = data[len - 1] == '\0' ? '\0' : ' ';
  size_t end = len;
  if (data[end - 1] == sep) end--;
  buf[end] = '\0';
  if (sep == '\0' && !memchr(buf, '\0', end) && memchr(buf, ' ', end)) sep = ' ';
  size_t n = 0, start = 0;
  for (size_t i = 0; i <= end && n < max; i++) {
    if (i == end || buf[i] == sep) {
      buf[i] = '\0';
      out[n++] = buf + start;
      start = i + 1;
    }
  }
  /* An embedded NUL in space-separated data would cut an argument short;
   * that only shortens what we read, which is safe. */
  *storage = buf;
  return n;
}

static void args_split(struct args *a, const char *argv, size_t len) {
  a->n = pp_split_cmdline(argv, len, &a->storage, a->v, MAX_ARGS);
}

/* ---- path resolution ---- */

struct pbuf {
  char s[MAX_PATH_TEXT];
  size_t len;
};

static bool pbuf_set(struct pbuf *p, const char *a, size_t alen, const char *b, size_t blen) {
  if (alen + blen + 1 >= sizeof(p->s)) return false;
  memmove(p->s, a, alen);
  memcpy(p->s + alen, b, blen);
  p->len = alen + blen;
  p->s[p->len] = '\0';
  return true;
}

/* os.path.join(dir, name) for a relative name */
static bool pbuf_join(struct pbuf *out, const struct pbuf *dir, const char *name, size_t nlen) {
  char tmp[MAX_PATH_TEXT];
  if (dir->len + nlen + 2 >= sizeof(tmp)) return false;
  memcpy(tmp, dir->s, dir->len);
  size_t l = dir->len;
  if (l == 0 || tmp[l - 1] != '/') tmp[l++] = '/';
  memcpy(tmp + l, name, nlen);
  l += nlen;
  return pbuf_set(out, tmp, l, "", 0);
}

char *pp_resolve_proc_path(const char *root, const char *cwd, const char *path) {
  if (!path || !*path) return NULL;
  if (path[0] != '/' && (!cwd || cwd[0] != '/')) return NULL;
  /* root "/" or "" means the agent's own view: nothing to prefix. */
  size_t rlen = root ? strlen(root) : 0;
  while (rlen > 0 && root[rlen - 1] == '/')
    rlen--;
  bool resolve_links = root != NULL && root[0] != '\0';

  /* os.path.join(cwd, path): an absolute path replaces the cwd. */
  char joined[MAX_PATH_TEXT];
  int jl = path[0] == '/' ? snprintf(joined, sizeof(joined), "%s", path)
                          : snprintf(joined, sizeof(joined), "%s/%s", cwd, path);
  if (jl < 0 || (size_t)jl >= sizeof(joined)) return NULL;

  struct pbuf cur;
  pbuf_set(&cur, root ? root : "", rlen, "", 0);
  /* pathlib's parts: empty and "." components vanish, ".." stays. */
  const char *p = joined;
  while (*p) {
    while (*p == '/')
      p++;
    if (!*p) break;
    const char *e = strchr(p, '/');
    size_t clen = e ? (size_t)(e - p) : strlen(p);
    if (!(clen == 1 && p[0] == '.')) {
      struct pbuf next;
      if (!pbuf_join(&next, &cur, p, clen)) return NULL;
      for (int hops = 0; resolve_links; hops++) {
        struct stat st;
        if (lstat(next.s, &st) != 0 || !S_ISLNK(st.st_mode)) break;
        if (hops >= MAX_LINK_HOPS) return NULL;
        char link[4096];
        ssize_t ll = readlink(next.s, link, sizeof(link) - 1);
        if (ll <= 0) break;
        link[ll] = '\0';
        if (link[0] == '/') {
          if (!pbuf_set(&next, root, rlen, link, (size_t)ll)) return NULL;
        } else if (!pbuf_join(&next, &cur, link, (size_t)ll)) {
          return NULL;
        }
      }
      cur = next;
    }
    p += clen;
  }
  const char *rel = cur.s + rlen;
  if (cur.len < rlen || memcmp(cur.s, root ? root : "", rlen) != 0) return NULL;
  return strdup(*rel ? rel : "/");
}

/* gProfiler's _append_file_to_proc_wd */
static char *file_in_proc(const char *root, const char *cwd, const char *file) {
  return pp_resolve_proc_path(root, cwd, file);
}

/* _append_python_module_to_proc_wd: "a.b" -> "a/b.py" unless it ends in .py */
static char *module_in_proc(const char *root, const char *cwd, const char *module) {
  if (strcmp(module, UNKNOWN_APP) == 0) return strdup(module);
  if (ends_with(module, ".py")) return file_in_proc(root, cwd, module);
  size_t l = strlen(module);
  char *m = malloc(l + 4);
  if (!m) return NULL;
  for (size_t i = 0; i < l; i++)
    m[i] = module[i] == '.' ? '/' : module[i];
  memcpy(m + l, ".py", 4);
  char *r = file_in_proc(root, cwd, m);
  free(m);
  return r;
}

/* "<prefix>: <spec> (<resolved>)" or NULL */
static char *with_path(const char *prefix, const char *spec, char *resolved) {
  if (!resolved) return NULL;
  char *r = fmt("%s: %s (%s)", prefix, spec, resolved);
  free(resolved);
  return r;
}

/* ---- python rules ---- */

struct ctx {
  const struct args *a;
  const char *cwd, *root;
  const struct pp_enrich_opts *opts;
};

static char *app_spec_to_id(const struct ctx *c, const char *kind, const char *spec) {
  /* the module part of "module:callable" */
  const char *colon = strchr(spec, ':');
  char *file = colon ? strndup(spec, (size_t)(colon - spec)) : strdup(spec);
  if (!file) return NULL;
  char *r = with_path(kind, spec, module_in_proc(c->root, c->cwd, file));
  free(file);
  return r;
}

/* First argument containing ':' whose predecessor is not an option. Index 0
 * looks at the last argument, as Python's cmdline[-1] did. */
static const char *find_app_spec(const struct args *a, bool allow_factory) {
  for (size_t i = 0; i < a->n; i++) {
    if (!strchr(a->v[i], ':')) continue;
    const char *prev = a->v[i == 0 ? a->n - 1 : i - 1];
    if (prev[0] != '-' || (allow_factory && strcmp(prev, "--factory") == 0)) return a->v[i];
  }
  return UNKNOWN_APP;
}

static char *rule_gunicorn_title(const struct ctx *c) {
  const struct args *a = c->a;
  if (a->n == 0 || !starts_with(a->v[0], "gunicorn: ")) return NULL;
  for (size_t i = 1; i < a->n; i++)
    if (a->v[i][0]) return NULL; /* setproctitle leaves only empty args */
  const char *t = a->v[0] + strlen("gunicorn: ");
  if (starts_with(t, "master ["))
    t += strlen("master [");
  else if (starts_with(t, "worker ["))
    t += strlen("worker [");
  else
    return NULL;
  size_t l = strlen(t);
  if (l == 0 || t[l - 1] != ']') return NULL;
  if (memchr(t, ']', l - 1)) return NULL; /* [^\]]* */
  char *spec = strndup(t, l - 1);
  if (!spec) return NULL;
  char *r = app_spec_to_id(c, "gunicorn", spec);
  free(spec);
  return r;
}

static bool argv01_basename_is(const struct args *a, const char *name) {
  const char *a0 = arg_at(a, 0), *a1 = arg_at(a, 1);
  return (a0 && strcmp(base_name(a0), name) == 0) || (a1 && strcmp(base_name(a1), name) == 0);
}

static char *rule_gunicorn(const struct ctx *c) {
  if (!argv01_basename_is(c->a, "gunicorn")) return NULL;
  return app_spec_to_id(c, "gunicorn", find_app_spec(c->a, false));
}

static char *rule_uvicorn(const struct ctx *c) {
  if (!argv01_basename_is(c->a, "uvicorn")) return NULL;
  return app_spec_to_id(c, "uvicorn", find_app_spec(c->a, true));
}

static int uwsgi_config(const struct ctx *c, const char **ini_out, char **module) {
  const struct args *a = c->a;
  const char *ini = NULL;
  static const char *const flags[] = {"--ini", "--ini-paste", "--ini-paste-logged"};
  *ini_out = NULL;
  *module = NULL;
  for (size_t i = 0; i < 3 && !ini; i++) {
    int r = arg_by_name(a, flags[i], true, false, &ini);
    if (r == ARG_ERROR) return -1;
  }
  if (!ini) {
    /* a lone "*.ini" argument works too; more than one is ambiguous */
    size_t count = 0;
    for (size_t i = 0; i < a->n; i++)
      if (ends_with(a->v[i], ".ini")) ini = count++ ? NULL : a->v[i];
    if (count != 1) return 0;
  }
  *ini_out = ini;
  char *rel = pp_resolve_proc_path(c->root, c->cwd, ini);
  if (!rel) return -1;
  char *path = fmt("%s%s", (c->root && strcmp(c->root, "/") != 0) ? c->root : "", rel);
  free(rel);
  if (!path) return -1;
  char *text = malloc(MAX_INI_BYTES);
  int rc = text ? pp_read_regular(path, text, MAX_INI_BYTES, NULL) : -ENOMEM;
  free(path);
  if (rc == 0) rc = pp_ini_find_module(text, module);
  free(text);
  return rc == 0 ? 0 : -1;
}

static char *rule_uwsgi(const struct ctx *c) {
  const struct args *a = c->a;
  if (a->n == 0 || strcmp(base_name(a->v[0]), "uwsgi") != 0) return NULL;
  const char *w;
  int r = arg_by_name_or(a, "-w", false, false, "--wsgi-file", true, false, &w);
  if (r == ARG_ERROR) return NULL;
  if (r == ARG_FOUND) return with_path("uwsgi", w, module_in_proc(c->root, c->cwd, w));
  const char *ini;
  char *module;
  if (uwsgi_config(c, &ini, &module) != 0) return NULL; /* unreadable ini: rule fails */
  if (module) {
    char *res = with_path("uwsgi", ini, module_in_proc(c->root, c->cwd, module));
    free(module);
    return res;
  }
  return ini ? fmt("uwsgi: %s", ini) : strdup("uwsgi: ini file / wsgi module not found");
}

static char *rule_celery(const struct ctx *c) {
  const struct args *a = c->a;
  bool celery =
      argv01_basename_is(a, "celery") || (is_python_m_proc(a) && strcmp(a->v[2], "celery") == 0);
  if (!celery) return NULL;
  const char *app;
  int r = arg_by_name_or(a, "-A", false, true, "--app", true, false, &app);
  if (r == ARG_ERROR) return NULL;
  if (r == ARG_NA) {
    const char *q;
    int rq = arg_by_name_or(a, "-Q", false, true, "--queues", true, false, &q);
    if (rq == ARG_ERROR) return NULL;
    if (rq == ARG_FOUND) return c->cwd ? fmt("celery queue: %s (%s)", q, c->cwd) : NULL;
    return NULL;
  }
  return with_path("celery", app, module_in_proc(c->root, c->cwd, app));
}

static char *rule_pyspark(const struct ctx *c) {
  return is_python_m_proc(c->a) && strcmp(c->a->v[2], "pyspark.daemon") == 0 ? strdup("pyspark")
                                                                             : NULL;
}

static char *rule_python(const struct ctx *c) {
  const struct args *a = c->a;
  if (a->n == 0 || !is_python_bin(a->v[0])) return NULL;
  const char *mod;
  int r = arg_by_name(a, "-m", false, false, &mod);
  if (r == ARG_ERROR) return NULL;
  if (r == ARG_FOUND) return fmt("python: -m %s", mod);
  const char *a1 = arg_at(a, 1);
  if (a1 && ends_with(a1, ".py"))
    return with_path("python", a1, module_in_proc(c->root, c->cwd, a1));
  return NULL;
}

/* ---- node, ruby ---- */

static char *rule_node(const struct ctx *c) {
  const struct args *a = c->a;
  for (size_t i = 1; i < a->n; i++) {
    const char *s = a->v[i];
    if (starts_with(s, "--require=")) continue;
    if (strcmp(s, "--require") == 0 || strcmp(s, "-r") == 0) {
      i++;
      continue;
    }
    if (ends_with(s, ".js")) return with_path("nodejs", s, file_in_proc(c->root, c->cwd, s));
  }
  return NULL;
}

static char *rule_ruby(const struct ctx *c) {
  const struct args *a = c->a;
  for (size_t i = 0; i < a->n; i++) {
    const char *s = a->v[i];
    if (starts_with(s, "-r")) {
      if (strlen(s) <= 2) i++;
      continue;
    }
    if (ends_with(s, ".rb")) return with_path("ruby", s, file_in_proc(c->root, c->cwd, s));
  }
  return NULL;
}

/* ---- java ---- */

/* Launcher options whose value is the next argument. They are consumed by
 * the launcher and never reach the JVM's jvm_args line. */
static bool java_launcher_opt_with_value(const char *s) {
  static const char *const opts[] = {
      "-cp",
      "-classpath",
      "--class-path",
      "-p",
      "--module-path",
      "--upgrade-module-path",
      "--add-modules",
      "--limit-modules",
      "--add-reads",
      "--add-exports",
      "--add-opens",
      "--patch-module",
      "--enable-native-access",
      "--source",
      "--describe-module",
      "-d",
  };
  for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
    if (strcmp(s, opts[i]) == 0) return true;
  return false;
}

static bool java_launcher_opt_inline(const char *s) {
  static const char *const pre[] = {
      "--class-path=",
      "--module-path=",
      "--upgrade-module-path=",
      "--add-modules=",
      "--limit-modules=",
      "--add-reads=",
      "--add-exports=",
      "--add-opens=",
      "--patch-module=",
      "--enable-native-access=",
      "--source=",
      "--describe-module=",
      "-splash:",
      "@",
  };
  for (size_t i = 0; i < sizeof(pre) / sizeof(pre[0]); i++)
    if (starts_with(s, pre[i])) return true;
  return false;
}

/* Python-style escapes that POSIX ERE lacks, outside bracket expressions. */
static char *python_re_to_ere(const char *re) {
  size_t l = strlen(re);
  char *o = malloc(l * 12 + 1), *w = o;
  if (!o) return NULL;
  bool in_bracket = false;
  for (size_t i = 0; i < l; i++) {
    char ch = re[i];
    if (!in_bracket && ch == '\\' && i + 1 < l) {
      const char *rep = NULL;
      switch (re[i + 1]) {
        case 'd':
          rep = "[0-9]";
          break;
        case 'D':
          rep = "[^0-9]";
          break;
        case 'w':
          rep = "[[:alnum:]_]";
          break;
        case 'W':
          rep = "[^[:alnum:]_]";
          break;
        case 's':
          rep = "[[:space:]]";
          break;
        case 'S':
          rep = "[^[:space:]]";
          break;
      }
      if (rep) {
        w = stpcpy(w, rep);
        i++;
        continue;
      }
      *w++ = ch;
      *w++ = re[++i];
      continue;
    }
    if (!in_bracket && ch == '[')
      in_bracket = true;
    else if (in_bracket && ch == ']')
      in_bracket = false;
    *w++ = ch;
  }
  *w = 0;
  return o;
}

static bool arg_matches_filters(const char *arg, regex_t *res, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (regexec(&res[i], arg, 0, NULL, 0) == 0) return true;
  return false;
}

static char *java_spark(const struct ctx *c) {
  const struct args *a = c->a;
  bool spark = false;
  for (size_t i = 0; i < a->n && !spark; i++)
    spark = strstr(a->v[i], "org.apache.spark.executor");
  if (!spark || !c->cwd) return NULL;
  char *rel = pp_resolve_proc_path(c->root, c->cwd, "__spark_conf__/__spark_conf__.properties");
  char *path = rel ? fmt("%s%s", (c->root && strcmp(c->root, "/") != 0) ? c->root : "", rel) : NULL;
  free(rel);
  char *text = path ? malloc(MAX_INI_BYTES) : NULL;
  int rc = text ? pp_read_regular(path, text, MAX_INI_BYTES, NULL) : -ENOMEM;
  free(path);
  char *name = NULL;
  for (char *line = text; rc == 0 && line && *line;) {
    char *eol = strchr(line, '\n');
    if (eol) *eol = 0;
    if (line[0] != '#') {
      char *hash = strchr(line, '#');
      if (hash) *hash = 0;
      char *eq = strchr(line, '=');
      if (eq && (size_t)(eq - line) == strlen("spark.app.name") &&
          starts_with(line, "spark.app.name")) {
        free(name);
        name = strdup(eq + 1); /* later keys win, as in a dict */
      }
    }
    line = eol ? eol + 1 : NULL;
  }
  free(text);
  char *r = name ? fmt("spark: %s", name) : strdup("app name not found");
  free(name);
  return r;
}

static char *rule_java(const struct ctx *c) {
  const struct args *a = c->a;
  const char *command = NULL;
  size_t first_prog = a->n;
  for (size_t i = 1; i < a->n; i++) {
    const char *s = a->v[i];
    if (strcmp(s, "-jar") == 0 || strcmp(s, "-m") == 0 || strcmp(s, "--module") == 0) {
      command = arg_at(a, i + 1);
      first_prog = i;
      break;
    }
    if (starts_with(s, "--module=")) {
      command = s + strlen("--module=");
      first_prog = i;
      break;
    }
    if (java_launcher_opt_with_value(s)) {
      i++;
      continue;
    }
    if (s[0] == '-' || java_launcher_opt_inline(s)) continue;
    command = s;
    first_prog = i;
    break;
  }
  char *id = NULL;
  if (command && *command) {
    /* jvm args matching the user's filters, in argv order */
    size_t nf = c->opts ? c->opts->app_id_args_filter_count : 0;
    regex_t *res = nf ? calloc(nf, sizeof(*res)) : NULL;
    size_t ok = 0;
    for (size_t f = 0; res && f < nf; f++) {
      char *ere = python_re_to_ere(c->opts->app_id_args_filters[f]);
      if (ere && regcomp(&res[ok], ere, REG_EXTENDED | REG_NOSUB) == 0) ok++;
      free(ere);
    }
    char *extra = NULL;
    for (size_t i = 1; ok && i < first_prog; i++) {
      const char *s = a->v[i];
      if (java_launcher_opt_with_value(s)) {
        i++;
        continue;
      }
      if (s[0] != '-' || java_launcher_opt_inline(s)) continue;
      if (!arg_matches_filters(s, res, ok)) continue;
      char *n = extra ? fmt("%s %s", extra, s) : strdup(s);
      free(extra);
      extra = n;
    }
    for (size_t f = 0; f < ok; f++)
      regfree(&res[f]);
    free(res);
    id = extra ? fmt("java: %s (%s)", command, extra) : fmt("java: %s", command);
    free(extra);
  }
  if (c->opts && c->opts->java_spark_appid) {
    char *sp = java_spark(c);
    if (sp && id) {
      char *j = fmt("%s, %s", id, sp);
      free(id);
      free(sp);
      id = j;
    } else if (sp) {
      id = sp;
    }
  }
  return id;
}

/* ---- runtime detection and entry point ---- */

static bool name_is_ruby(const char *b) {
  if (!starts_with(b, "ruby")) return false;
  for (b += 4; *b; b++)
    if (!((*b >= '0' && *b <= '9') || *b == '.')) return false;
  return true;
}

static bool name_is_python_exe(const char *b) {
  /* python, python3, python3.12, python3.13t, python3.8m, python2.7d */
  if (!starts_with(b, "python")) return false;
  for (b += 6; *b; b++)
    if (!((*b >= '0' && *b <= '9') || *b == '.' || *b == 't' || *b == 'm' || *b == 'd'))
      return false;
  return true;
}

static enum pp_runtime runtime_of_name(const char *b) {
  if (name_is_python_exe(b) || strcmp(b, "uwsgi") == 0) return PP_RT_PYTHON;
  if (strcmp(b, "java") == 0) return PP_RT_JAVA;
  if (strcmp(b, "node") == 0 || strcmp(b, "nodejs") == 0) return PP_RT_NODE;
  if (name_is_ruby(b)) return PP_RT_RUBY;
  if (strcmp(b, "dotnet") == 0) return PP_RT_DOTNET;
  if (starts_with(b, "php")) return PP_RT_PHP;
  return PP_RT_UNKNOWN;
}

enum pp_runtime pp_runtime_detect(const char *exe, const char *argv, size_t argv_len) {
  if (exe && *exe) {
    char b[256];
    snprintf(b, sizeof(b), "%s", base_name(exe));
    char *del = strstr(b, " (deleted)");
    if (del && del[strlen(" (deleted)")] == '\0') *del = '\0';
    enum pp_runtime rt = runtime_of_name(b);
    if (rt != PP_RT_UNKNOWN) return rt;
  }
  struct args *a = calloc(1, sizeof(*a));
  if (!a) return PP_RT_UNKNOWN;
  args_split(a, argv, argv_len);
  enum pp_runtime rt = PP_RT_UNKNOWN;
  if (a->n > 0) {
    rt = runtime_of_name(base_name(a->v[0]));
    if (rt == PP_RT_UNKNOWN) {
      static const char *const py_tools[] = {"gunicorn", "uvicorn", "celery", "uwsgi"};
      for (size_t i = 0; i < 4 && rt == PP_RT_UNKNOWN; i++)
        if (argv01_basename_is(a, py_tools[i]) || starts_with(a->v[0], "gunicorn: "))
          rt = PP_RT_PYTHON;
    }
  }
  free(a->storage);
  free(a);
  return rt;
}

const char *pp_runtime_name(enum pp_runtime rt) {
  switch (rt) {
    case PP_RT_PYTHON:
      return "python";
    case PP_RT_JAVA:
      return "java";
    case PP_RT_NODE:
      return "node";
    case PP_RT_RUBY:
      return "ruby";
    case PP_RT_DOTNET:
      return "dotnet";
    case PP_RT_PHP:
      return "php";
    default:
      return "unknown";
  }
}

typedef char *(*rule_fn)(const struct ctx *);

char *pp_appid_for(const char *exe, const char *argv, size_t argv_len, const char *cwd,
                   const char *root, const struct pp_enrich_opts *opts) {
  enum pp_runtime rt = pp_runtime_detect(exe, argv, argv_len);
  static const rule_fn python_rules[] = {rule_gunicorn_title, rule_gunicorn, rule_uvicorn,
                                         rule_uwsgi,          rule_celery,   rule_pyspark,
                                         rule_python};
  const rule_fn *rules = NULL;
  size_t nrules = 0;
  static const rule_fn java_rules[] = {rule_java}, node_rules[] = {rule_node},
                       ruby_rules[] = {rule_ruby};
  switch (rt) {
    case PP_RT_PYTHON:
      rules = python_rules, nrules = 7;
      break;
    case PP_RT_JAVA:
      rules = java_rules, nrules = 1;
      break;
    case PP_RT_NODE:
      rules = node_rules, nrules = 1;
      break;
    case PP_RT_RUBY:
      rules = ruby_rules, nrules = 1;
      break;
    default:
      return NULL; /* PHP, .NET, Go: no rules, as in gProfiler */
  }
  struct args *a = calloc(1, sizeof(*a));
  if (!a) return NULL;
  args_split(a, argv, argv_len);
  struct ctx c = {.a = a, .cwd = cwd, .root = root, .opts = opts};
  char *id = NULL;
  /* first match wins; a rule that fails (NULL) lets the next one try */
  for (size_t i = 0; i < nrules && !id && a->n > 0; i++)
    id = rules[i](&c);
  free(a->storage);
  free(a);
  return id;
}
