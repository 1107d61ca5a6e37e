/* SPDX-License-Identifier: Apache-2.0 */
/* appid rules (docs/gprofiler-compat.md): every rule on literal argv
 * vectors, path resolution through a fake /proc/PID/root, and real python3,
 * python3 -m, node and java -jar processes read back through /proc. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "appid.h"
#include "enrich.h"
#include "polyprof/kit/proc.h"
#include "testlib.h"

static char tmp[PATH_MAX];

static void write_file(const char *dir, const char *name, const char *text) {
  char p[PATH_MAX * 2];
  snprintf(p, sizeof(p), "%s/%s", dir, name);
  FILE *f = fopen(p, "w");
  if (!f) {
    perror(p);
    exit(2);
  }
  fputs(text, f);
  fclose(f);
}

static void mkdir_p(const char *path) {
  char buf[PATH_MAX * 2];
  snprintf(buf, sizeof(buf), "%s", path);
  for (char *p = buf + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      mkdir(buf, 0755);
      *p = '/';
    }
  mkdir(buf, 0755);
}

/* argv vector -> NUL-separated cmdline bytes */
static size_t join_argv(const char *const *argv, char *out, size_t cap) {
  size_t n = 0;
  for (size_t i = 0; argv[i]; i++) {
    size_t l = strlen(argv[i]) + 1;
    if (n + l > cap) break;
    memcpy(out + n, argv[i], l);
    n += l;
  }
  return n;
}

static char *appid_v(const char *exe, const char *const *argv, const char *cwd, const char *root,
                     const struct pp_enrich_opts *opts) {
  char buf[8192];
  size_t n = join_argv(argv, buf, sizeof(buf));
  return pp_appid_for(exe, buf, n, cwd, root, opts);
}

#define A(...) ((const char *const[]){__VA_ARGS__, NULL})

struct rule_case {
  const char *exe;
  const char *const *argv;
  const char *expect; /* NULL: no appid */
};

static void test_table(void) {
  const struct rule_case cases[] = {
      /* gunicorn, setproctitle form: one non-empty argument */
      {"/usr/bin/python3.11", A("gunicorn: worker [myapp.wsgi:application]", "", ""),
       "gunicorn: myapp.wsgi:application (/srv/app/myapp/wsgi.py)"},
      {"/usr/bin/python3.11", A("gunicorn: master [app:app]", "", "", ""),
       "gunicorn: app:app (/srv/app/app.py)"},
      /* a lone title is split at its spaces by psutil: no match, as in gProfiler */
      {"/usr/bin/python3.11", A("gunicorn: master [app:app]"), NULL},
      {"/usr/bin/python3.11", A("gunicorn: worker [app:app]", "extra"), NULL},
      {"/usr/bin/python3.11", A("gunicorn: arbiter [app:app]"), NULL},
      /* gunicorn through its console script: spec not after an option */
      {"/usr/bin/python3.11",
       A("/usr/bin/python3", "/venv/bin/gunicorn", "-w", "4", "-b", "0.0.0.0:8000", "app:app"),
       "gunicorn: app:app (/srv/app/app.py)"},
      {"/usr/bin/python3.11", A("/venv/bin/gunicorn", "pkg.web:create()", "--reload"),
       "gunicorn: pkg.web:create() (/srv/app/pkg/web.py)"},
      {"/usr/bin/python3.11", A("/venv/bin/gunicorn", "--config", "gunicorn.conf.py"),
       "gunicorn: unknown app name (unknown app name)"},
      /* uvicorn, --factory may precede the spec */
      {"/usr/bin/python3.11",
       A("/usr/bin/python3", "/venv/bin/uvicorn", "--factory", "main:create_app", "--port", "80"),
       "uvicorn: main:create_app (/srv/app/main.py)"},
      {"/usr/bin/python3.11", A("uvicorn", "--host", "h:1", "api.main:app"),
       "uvicorn: api.main:app (/srv/app/api/main.py)"},
      /* uwsgi: -w / --wsgi-file (dots become slashes, gProfiler's quirk) */
      {"/usr/local/bin/uwsgi", A("uwsgi", "--http", ":8080", "-w", "hello.wsgi"),
       "uwsgi: hello.wsgi (/srv/app/hello/wsgi.py)"},
      {"/usr/local/bin/uwsgi", A("uwsgi", "--wsgi-file=app.py"), "uwsgi: app.py (/srv/app/app.py)"},
      {"/usr/local/bin/uwsgi", A("uwsgi", "--wsgi-file", "/opt/w.py"),
       "uwsgi: /opt/w.py (/opt/w.py)"},
      {"/usr/local/bin/uwsgi", A("uwsgi", "--http", ":80"),
       "uwsgi: ini file / wsgi module not found"},
      {"/usr/local/bin/uwsgi", A("uwsgi", "a.ini", "b.ini"),
       "uwsgi: ini file / wsgi module not found"},
      {"/usr/local/bin/uwsgi", A("uwsgi", "--ini", "/nonexistent/x.ini"), NULL},
      {"/usr/local/bin/uwsgi", A("uwsgi", "-w"), NULL},
      /* celery */
      {"/usr/bin/python3.11", A("/usr/bin/python3", "/venv/bin/celery", "-A", "proj", "worker"),
       "celery: proj (/srv/app/proj.py)"},
      {"/usr/bin/python3.11", A("celery", "-Aproj.tasks", "worker"),
       "celery: proj.tasks (/srv/app/proj/tasks.py)"},
      {"/usr/bin/python3.11", A("celery", "worker", "--app=tasks"),
       "celery: tasks (/srv/app/tasks.py)"},
      {"/usr/bin/python3.11", A("python3", "-m", "celery", "-A", "w", "worker"),
       "celery: w (/srv/app/w.py)"},
      {"/usr/bin/python3.11", A("celery", "worker", "-Q", "high,low"),
       "celery queue: high,low (/srv/app)"},
      {"/usr/bin/python3.11", A("celery", "worker", "--queues=q1"), "celery queue: q1 (/srv/app)"},
      {"/usr/bin/python3.11", A("python3", "-m", "celery", "worker"), "python: -m celery"},
      {"/usr/bin/python3.11", A("celery", "worker"), NULL},
      /* pyspark, python -m, python x.py */
      {"/usr/bin/python3.11", A("python3", "-m", "pyspark.daemon"), "pyspark"},
      {"/usr/bin/python3.11", A("python3", "-m", "http.server", "8000"), "python: -m http.server"},
      {"/usr/bin/python3.11", A("/usr/bin/python3.11", "app.py", "--x"),
       "python: app.py (/srv/app/app.py)"},
      {"/usr/bin/python3.11", A("python", "./app.py"), "python: ./app.py (/srv/app/app.py)"},
      {"/usr/bin/python3.11", A("python2.7", "/opt/x.py"), "python: /opt/x.py (/opt/x.py)"},
      {"/usr/bin/python3.11", A("python3", "../up.py"), "python: ../up.py (/srv/app/../up.py)"},
      {"/usr/bin/python3.11", A("python3", "-u", "app.py"), NULL},
      {"/usr/bin/python3.11", A("python3", "-c", "pass", "-m"), NULL},
      {"/usr/bin/python3.11", A("python3.123", "app.py"), NULL}, /* not python's name */
      {"/usr/bin/python3.11", A("ipython", "app.py"), NULL},
      /* java: jar or main class, launcher options skipped */
      {"/usr/lib/jvm/jdk/bin/java",
       A("java", "-Xmx1g", "-Dapp.env=prod", "-jar", "/opt/app.jar", "--port", "80"),
       "java: /opt/app.jar"},
      {"/usr/lib/jvm/jdk/bin/java",
       A("java", "-cp", "lib/*:classes", "-Dx=1", "com.example.Main", "a"),
       "java: com.example.Main"},
      {"/usr/lib/jvm/jdk/bin/java", A("java", "--class-path=a:b", "--add-opens", "x/y=ALL", "Main"),
       "java: Main"},
      {"/usr/lib/jvm/jdk/bin/java", A("java", "-m", "my.mod/my.pkg.Main"),
       "java: my.mod/my.pkg.Main"},
      {"/usr/lib/jvm/jdk/bin/java", A("java", "-version"), NULL},
      /* node: skips -r X, --require X, --require=X */
      {"/usr/bin/node",
       A("node", "-r", "dotenv/config.js", "--require=ts.js", "--require", "a.js", "server.js",
         "x.js"),
       "nodejs: server.js (/srv/app/server.js)"},
      {"/usr/bin/node", A("/usr/bin/node", "/opt/srv/index.js"),
       "nodejs: /opt/srv/index.js (/opt/srv/index.js)"},
      {"/usr/bin/node", A("node"), NULL},
      {"/usr/bin/nodejs", A("node", "--inspect", "lib/app.js"),
       "nodejs: lib/app.js (/srv/app/lib/app.js)"},
      /* ruby: skips -r X and -rX */
      {"/usr/bin/ruby3.1", A("ruby", "-rbundler/setup", "-r", "pre.rb", "app.rb"),
       "ruby: app.rb (/srv/app/app.rb)"},
      {"/usr/bin/ruby", A("/usr/bin/ruby", "-w", "bin/x.rb"), "ruby: bin/x.rb (/srv/app/bin/x.rb)"},
      /* runtimes without rules, and non-runtimes */
      {"/usr/bin/php8.1", A("php", "index.php"), NULL},
      {"/usr/bin/dotnet", A("dotnet", "app.dll"), NULL},
      {"/usr/bin/bash", A("bash", "x.py"), NULL},
      {"/usr/bin/bash", A("bash", "-c", "node x.js"), NULL},
      /* runtime from argv when the exe is unknown */
      {NULL, A("python3", "-m", "mod"), "python: -m mod"},
      {NULL, A("/usr/bin/python3", "/venv/bin/gunicorn", "a:b"), "gunicorn: a:b (/srv/app/a.py)"},
      {"/usr/bin/python3.12 (deleted)", A("python3", "-m", "mod"), "python: -m mod"},
  };
  struct pp_enrich_opts opts = {.appids = true};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char *got = appid_v(cases[i].exe, cases[i].argv, "/srv/app", NULL, &opts);
    if (cases[i].expect) {
      CHECK_EQ_STR(got, cases[i].expect);
    } else if (got) {
      CHECK_EQ_STR(got, "(no appid)");
    }
    if ((cases[i].expect == NULL) != (got == NULL)) fprintf(stderr, "  case %zu\n", i);
    free(got);
  }
}

static void test_java_filters(void) {
  const char *filters[] = {"^-Dapp\\.", "-Xmx\\d+g", "[invalid"};
  struct pp_enrich_opts opts = {
      .appids = true, .app_id_args_filters = filters, .app_id_args_filter_count = 3};
  char *got = appid_v("/usr/bin/java",
                      A("java", "-Xmx4g", "-Dapp.env=prod", "-Dother=1", "-cp", "-Dapp.cp", "-jar",
                        "app.jar", "-Dapp.after=1"),
                      "/srv", NULL, &opts);
  CHECK_EQ_STR(got, "java: app.jar (-Xmx4g -Dapp.env=prod)");
  free(got);
  opts.app_id_args_filter_count = 1;
  got = appid_v("/usr/bin/java", A("java", "-Xmx4g", "Main"), "/srv", NULL, &opts);
  CHECK_EQ_STR(got, "java: Main");
  free(got);
}

static void test_java_spark(void) {
  char dir[PATH_MAX + 32];
  snprintf(dir, sizeof(dir), "%s/spark/__spark_conf__", tmp);
  mkdir_p(dir);
  write_file(dir, "__spark_conf__.properties",
             "# comment\nspark.master=yarn\nspark.app.name=NightlyJob\nspark.x=1\n");
  snprintf(dir, sizeof(dir), "%s/spark", tmp);
  struct pp_enrich_opts opts = {.appids = true, .java_spark_appid = true};
  const char *const *argv =
      A("java", "-cp", "x", "org.apache.spark.executor.YarnCoarseGrainedExecutorBackend", "--id",
        "1");
  char *got = appid_v("/usr/bin/java", argv, dir, "/", &opts);
  CHECK_EQ_STR(
      got, "java: org.apache.spark.executor.YarnCoarseGrainedExecutorBackend, spark: NightlyJob");
  free(got);
  got = appid_v("/usr/bin/java", argv, "/nonexistent", "/", &opts);
  CHECK_EQ_STR(
      got, "java: org.apache.spark.executor.YarnCoarseGrainedExecutorBackend, app name not found");
  free(got);
  opts.java_spark_appid = false;
  got = appid_v("/usr/bin/java", argv, dir, "/", &opts);
  CHECK_EQ_STR(got, "java: org.apache.spark.executor.YarnCoarseGrainedExecutorBackend");
  free(got);
}

static void test_uwsgi_ini(void) {
  char dir[PATH_MAX + 32];
  snprintf(dir, sizeof(dir), "%s/uw", tmp);
  mkdir_p(dir);
  write_file(dir, "uwsgi.ini",
             "; comment\n[uwsgi]\nhttp = :8080\nMODULE = proj.wsgi:application\nmaster: true\n");
  write_file(dir, "nomod.ini", "[uwsgi]\nhttp = :8080\n");
  write_file(dir, "default.ini", "[DEFAULT]\nmodule = base.app\n[uwsgi]\nprocesses = 4\n");
  write_file(dir, "bad.ini", "[uwsgi]\nmodule = a.b\nthis line has no separator\n");
  write_file(dir, "nosect.ini", "module = a.b\n");
  write_file(dir, "pct.ini", "[uwsgi]\nmodule = a%%b\n");
  write_file(dir, "cont.ini", "[uwsgi]\nmodule = first\n  second\n");
  char fifo[PATH_MAX + 64];
  snprintf(fifo, sizeof(fifo), "%s/fifo.ini", dir);
  CHECK_EQ_INT(mkfifo(fifo, 0600), 0);
  struct pp_enrich_opts opts = {.appids = true};
  struct {
    const char *const *argv;
    const char *expect_fmt; /* {D} = dir */
  } cases[] = {
      {A("uwsgi", "--ini", "uwsgi.ini"), "uwsgi: uwsgi.ini ({D}/proj/wsgi:application.py)"},
      {A("uwsgi", "--ini=uwsgi.ini"), "uwsgi: uwsgi.ini ({D}/proj/wsgi:application.py)"},
      {A("uwsgi", "--ini-paste", "uwsgi.ini"), "uwsgi: uwsgi.ini ({D}/proj/wsgi:application.py)"},
      {A("uwsgi", "--ini-paste-logged", "uwsgi.ini"),
       "uwsgi: uwsgi.ini ({D}/proj/wsgi:application.py)"},
      {A("uwsgi", "uwsgi.ini"), "uwsgi: uwsgi.ini ({D}/proj/wsgi:application.py)"},
      {A("uwsgi", "--ini", "nomod.ini"), "uwsgi: nomod.ini"},
      {A("uwsgi", "--ini", "default.ini"), "uwsgi: default.ini ({D}/base/app.py)"},
      {A("uwsgi", "--ini", "bad.ini"), NULL},
      {A("uwsgi", "--ini", "nosect.ini"), NULL},
      {A("uwsgi", "--ini", "pct.ini"), "uwsgi: pct.ini ({D}/a%b.py)"},
      {A("uwsgi", "--ini", "cont.ini"), "uwsgi: cont.ini ({D}/first\nsecond.py)"},
      /* a FIFO (or device) named by the process is never opened: no hang */
      {A("uwsgi", "--ini", "fifo.ini"), NULL},
      {A("uwsgi", "--ini", "/dev/zero"), NULL},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char *got = appid_v("/usr/bin/uwsgi", cases[i].argv, dir, NULL, &opts);
    if (!cases[i].expect_fmt) {
      CHECK(got == NULL);
      free(got);
      continue;
    }
    char expect[PATH_MAX * 2];
    const char *d = strstr(cases[i].expect_fmt, "{D}");
    if (d)
      snprintf(expect, sizeof(expect), "%.*s%s%s", (int)(d - cases[i].expect_fmt),
               cases[i].expect_fmt, dir, d + 3);
    else
      snprintf(expect, sizeof(expect), "%s", cases[i].expect_fmt);
    CHECK_EQ_STR(got, expect);
    free(got);
  }
}

/* A fake container root: absolute links are re-rooted, relative ones
 * joined without normalising "..", loops give up. */
static void test_resolve(void) {
  char root[PATH_MAX + 32], p[PATH_MAX * 2];
  snprintf(root, sizeof(root), "%s/root", tmp);
  snprintf(p, sizeof(p), "%s/data/app", root);
  mkdir_p(p);
  snprintf(p, sizeof(p), "%s/data/lib", root);
  mkdir_p(p);
  write_file(p, "real.py", "");
  snprintf(p, sizeof(p), "%s/srv", root);
  mkdir_p(p);
  snprintf(p, sizeof(p), "%s/srv/app", root);
  CHECK_EQ_INT(symlink("/data/app", p), 0);
  snprintf(p, sizeof(p), "%s/data/app/main.py", root);
  CHECK_EQ_INT(symlink("../lib/real.py", p), 0);
  snprintf(p, sizeof(p), "%s/loop", root);
  CHECK_EQ_INT(symlink("loop", p), 0);
  snprintf(p, sizeof(p), "%s/esc", root);
  CHECK_EQ_INT(symlink("/etc", p), 0);

  char *r = pp_resolve_proc_path(root, "/srv/app", "main.py");
  CHECK_EQ_STR(r, "/data/app/../lib/real.py");
  free(r);
  r = pp_resolve_proc_path(root, "/srv/app", "./nothere.py");
  CHECK_EQ_STR(r, "/data/app/nothere.py");
  free(r);
  r = pp_resolve_proc_path(root, "/", "esc/passwd");
  CHECK_EQ_STR(r, "/etc/passwd"); /* re-rooted, not the host's /etc */
  free(r);
  r = pp_resolve_proc_path(root, "/", "loop/x");
  CHECK(r == NULL);
  free(r);
  r = pp_resolve_proc_path(NULL, "/a//b/./c", "../d.py");
  CHECK_EQ_STR(r, "/a/b/c/../d.py");
  free(r);
  r = pp_resolve_proc_path("", "relative", "x.py");
  CHECK(r == NULL);
  free(r);
  r = pp_resolve_proc_path(NULL, "/", "/");
  CHECK_EQ_STR(r, "/");
  free(r);
  char *longp = malloc(20000);
  memset(longp, 'a', 19999);
  longp[19999] = 0;
  r = pp_resolve_proc_path(NULL, "/", longp);
  CHECK(r == NULL);
  free(longp);

  struct pp_enrich_opts opts = {.appids = true};
  char *got = appid_v("/usr/bin/python3", A("python3", "main.py"), "/srv/app", root, &opts);
  CHECK_EQ_STR(got, "python: main.py (/data/app/../lib/real.py)");
  free(got);
  got = appid_v("/usr/bin/python3", A("python3", "/loop/x.py"), "/", root, &opts);
  CHECK(got == NULL);
  free(got);
}

static void test_split(void) {
  char *st;
  const char *v[8];
  size_t n = pp_split_cmdline("a\0b c\0\0", 7, &st, v, 8);
  CHECK_EQ_INT(n, 3);
  CHECK_EQ_STR(v[1], "b c");
  CHECK_EQ_STR(v[2], "");
  free(st);
  /* rewritten title without NULs: split at spaces */
  n = pp_split_cmdline("python3 app.py", 14, &st, v, 8);
  CHECK_EQ_INT(n, 2);
  CHECK_EQ_STR(v[1], "app.py");
  free(st);
  /* a single NUL-terminated argument with spaces is split too (psutil) */
  n = pp_split_cmdline("nginx: worker process\0", 22, &st, v, 8);
  CHECK_EQ_INT(n, 3);
  free(st);
  n = pp_split_cmdline("", 0, &st, v, 8);
  CHECK_EQ_INT(n, 0);
  /* more arguments than slots: capped */
  n = pp_split_cmdline("a\0b\0c\0d\0", 8, &st, v, 2);
  CHECK_EQ_INT(n, 2);
  free(st);
  struct pp_enrich_opts opts = {.appids = true};
  char *got = pp_appid_for("/usr/bin/python3", "python3 app.py", 14, "/w", NULL, &opts);
  CHECK_EQ_STR(got, "python: app.py (/w/app.py)");
  free(got);
  /* hostile: no terminator, huge single argument */
  char *big = malloc(100000);
  memset(big, 'x', 100000);
  got = pp_appid_for("/usr/bin/python3", big, 100000, "/w", NULL, &opts);
  CHECK(got == NULL);
  free(got);
  free(big);
}

static void test_runtime_detect(void) {
  CHECK_EQ_INT(pp_runtime_detect("/usr/bin/python3.11", "", 0), PP_RT_PYTHON);
  CHECK_EQ_INT(pp_runtime_detect("/usr/bin/python3.13t", "", 0), PP_RT_PYTHON);
  CHECK_EQ_INT(pp_runtime_detect("/opt/uwsgi", "", 0), PP_RT_PYTHON);
  CHECK_EQ_INT(pp_runtime_detect("/usr/lib/jvm/x/bin/java", "", 0), PP_RT_JAVA);
  CHECK_EQ_INT(pp_runtime_detect("/usr/bin/node", "", 0), PP_RT_NODE);
  CHECK_EQ_INT(pp_runtime_detect("/usr/bin/ruby2.7", "", 0), PP_RT_RUBY);
  CHECK_EQ_INT(pp_runtime_detect("/usr/sbin/php-fpm8.1", "", 0), PP_RT_PHP);
  CHECK_EQ_INT(pp_runtime_detect("/usr/bin/dotnet", "", 0), PP_RT_DOTNET);
  CHECK_EQ_INT(pp_runtime_detect("/usr/bin/bash", "bash\0", 5), PP_RT_UNKNOWN);
  CHECK_EQ_INT(pp_runtime_detect("/usr/bin/rubyx", "", 0), PP_RT_UNKNOWN);
  CHECK_EQ_STR(pp_runtime_name(PP_RT_NODE), "node");
}

/* ---- real processes ---- */

static pid_t spawn(const char *const *argv, const char *cwd) {
  pid_t pid = fork();
  if (pid == 0) {
    if (chdir(cwd) != 0) _exit(126);
    int fd = open("/dev/null", O_RDWR);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execvp(argv[0], (char *const *)argv);
    _exit(127);
  }
  return pid;
}

/* Until the child has exec'd something whose exe basename starts with
 * `exe_prefix` (or 10 s). */
static bool wait_exec(pid_t pid, const char *exe_prefix) {
  for (int i = 0; i < 1000; i++) {
    char exe[PATH_MAX];
    if (pp_proc_exe((uint32_t)pid, exe, sizeof(exe)) == 0) {
      const char *b = strrchr(exe, '/');
      /* /proc/PID/exe switches before the new argv is in place: wait for
       * both, or a reader can see the new exe with an empty cmdline */
      char cmd[256];
      size_t len = 0;
      if (b && strncmp(b + 1, exe_prefix, strlen(exe_prefix)) == 0 &&
          pp_proc_cmdline((uint32_t)pid, cmd, sizeof(cmd), &len) == 0 && len > 0)
        return true;
    }
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return false;
}

static void reap(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
}

static char *appid_of_pid(pid_t pid, const struct pp_enrich_opts *opts) {
  char exe[PATH_MAX], cwd[PATH_MAX], root[64];
  char *cmd = malloc(65536);
  size_t len = 0;
  if (pp_proc_exe((uint32_t)pid, exe, sizeof(exe)) ||
      pp_proc_cwd((uint32_t)pid, cwd, sizeof(cwd)) ||
      pp_proc_cmdline((uint32_t)pid, cmd, 65536, &len)) {
    free(cmd);
    return NULL;
  }
  pp_proc_root((uint32_t)pid, root, sizeof(root));
  char *r = pp_appid_for(exe, cmd, len, cwd, root, opts);
  free(cmd);
  return r;
}

static bool have(const char *path) {
  return access(path, X_OK) == 0;
}

static void test_real_processes(void) {
  struct pp_enrich_opts opts = {.appids = true};
  char dir[PATH_MAX + 32], expect[PATH_MAX * 2];
  snprintf(dir, sizeof(dir), "%s/real", tmp);
  mkdir_p(dir);
  write_file(dir, "app.py", "import time\ntime.sleep(30)\n");
  write_file(dir, "sleepmod.py", "import time\ntime.sleep(30)\n");
  write_file(dir, "server.js", "setTimeout(() => {}, 30000);\n");
  const char *py = have("/usr/bin/python3") ? "/usr/bin/python3" : "python3";

  pid_t p1 = spawn(A(py, "app.py"), dir);
  CHECK(wait_exec(p1, "python"));
  char *got = appid_of_pid(p1, &opts);
  snprintf(expect, sizeof(expect), "python: app.py (%s/app.py)", dir);
  CHECK_EQ_STR(got, expect);
  free(got);

  pid_t p2 = spawn(A(py, "-m", "sleepmod"), dir);
  CHECK(wait_exec(p2, "python"));
  got = appid_of_pid(p2, &opts);
  CHECK_EQ_STR(got, "python: -m sleepmod");
  free(got);

  if (have("/usr/bin/node")) {
    pid_t p3 = spawn(A("/usr/bin/node", "server.js"), dir);
    CHECK(wait_exec(p3, "node"));
    got = appid_of_pid(p3, &opts);
    snprintf(expect, sizeof(expect), "nodejs: server.js (%s/server.js)", dir);
    CHECK_EQ_STR(got, expect);
    free(got);
    reap(p3);
  } else {
    printf("SKIPPED node appid: /usr/bin/node not found\n");
  }
  reap(p1);
  reap(p2);

  /* java -jar with a jar built here (a few seconds; skipped without a JDK) */
  if (have("/usr/bin/javac") && have("/usr/bin/jar") && have("/usr/bin/java")) {
    write_file(dir, "Sleeper.java",
               "public class Sleeper { public static void main(String[] a) throws Exception {"
               " Thread.sleep(30000); } }\n");
    write_file(dir, "manifest.txt", "Main-Class: Sleeper\n");
    char cmd[PATH_MAX * 3];
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && javac Sleeper.java && jar cfm sleeper.jar manifest.txt Sleeper.class",
             dir);
    if (system(cmd) == 0) {
      const char *filters[] = {"^-Dpolyprof\\."};
      struct pp_enrich_opts jo = {
          .appids = true, .app_id_args_filters = filters, .app_id_args_filter_count = 1};
      pid_t pj =
          spawn(A("/usr/bin/java", "-Xss512k", "-Dpolyprof.test=1", "-jar", "sleeper.jar"), dir);
      CHECK(wait_exec(pj, "java"));
      got = appid_of_pid(pj, &jo);
      CHECK_EQ_STR(got, "java: sleeper.jar (-Dpolyprof.test=1)");
      free(got);
      reap(pj);
    } else {
      printf("SKIPPED java -jar appid: building the jar failed\n");
    }
  } else {
    printf("SKIPPED java -jar appid: no JDK (javac/jar/java)\n");
  }
}

int main(void) {
  snprintf(tmp, sizeof(tmp), "/tmp/pp_test_appid.XXXXXX");
  if (!mkdtemp(tmp)) {
    perror("mkdtemp");
    return 2;
  }
  test_table();
  test_java_filters();
  test_java_spark();
  test_uwsgi_ini();
  test_resolve();
  test_split();
  test_runtime_detect();
  test_real_processes();
  char cmd[PATH_MAX + 16];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
  if (system(cmd) != 0) fprintf(stderr, "cleanup of %s failed\n", tmp);
  return pp_test_finish("test_appid");
}
