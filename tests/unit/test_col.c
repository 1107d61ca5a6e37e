/* SPDX-License-Identifier: Apache-2.0 */
/* .col writer and parser: exact bytes of gProfiler's layout
 * (docs/gprofiler-compat.md), parser errors, layouts, and
 * write -> parse -> write identity. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "output/col.h"
#include "testlib.h"

static const char *HEADER =
    "{\"containers\": [\"web\"], \"container_names_enabled\": true, \"application_metadata\": "
    "[null, {\"exe\": \"/usr/bin/java\"}], \"application_metadata_enabled\": true}";

struct fr {
  const char *name, *file;
  uint32_t line, kind;
};

static uint32_t frame(struct pp_profile *p, struct fr f) {
  return pp_profile_intern_frame(p, pp_profile_intern_cstr(p, f.name),
                                 pp_profile_intern_cstr(p, f.file), f.line, f.kind);
}

/* frames root-first, terminated by a NULL name */
static void stack(struct pp_profile *p, uint32_t pid, const char *comm, const struct fr *f,
                  uint64_t count) {
  uint32_t ids[64], n = 0;
  for (; f[n].name; n++)
    ids[n] = frame(p, f[n]);
  CHECK_EQ_INT(pp_profile_add_stack(p, pid, pp_profile_intern_cstr(p, comm), ids, n, count), 0);
}

static void pid_info(struct pp_profile *p, uint32_t pid, const char *comm, const char *container,
                     const char *appid, uint32_t idx) {
  uint32_t c = pp_profile_intern_cstr(p, comm), k = pp_profile_intern_cstr(p, container);
  uint32_t a = pp_profile_intern_cstr(p, appid);
  struct pp_pid_rec *r = pp_profile_pid_upsert(p, pid);
  r->comm = c;
  r->container = k;
  r->appid = a;
  r->app_meta_index = idx;
}

static char *write_col(const struct pp_profile *p, const char *header,
                       const struct pp_col_opts *o) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  CHECK_EQ_INT(pp_col_write(f, p, header, o), 0);
  fclose(f);
  return text;
}

/* A typical gProfiler file (a Java, a kernel and an error line), built from facts. */
static struct pp_profile *example(void) {
  struct pp_profile *p = pp_profile_new();
  pid_info(p, 100, "java", "web", "java: /app/app.jar", 1);
  stack(p, 100, NULL,
        (struct fr[]){{"java/lang/Thread.run()V", NULL, 0, PP_FRAME_JAVA_JIT},
                      {"com/example/Foo.bar(Ljava/lang/String;)V", NULL, 0, PP_FRAME_JAVA_JIT},
                      {0}},
        7);
  pid_info(p, 0, "swapper", NULL, NULL, 0);
  stack(p, 0, NULL,
        (struct fr[]){{"secondary_startup_64", NULL, 0, PP_FRAME_KERNEL},
                      {"cpu_startup_entry", NULL, 0, PP_FRAME_KERNEL},
                      {"do_idle", NULL, 0, PP_FRAME_KERNEL},
                      {0}},
        120);
  pid_info(p, 200, "python", NULL, NULL, 0);
  stack(p, 200, NULL,
        (struct fr[]){{"[Profiling error: exception CalledProcessError]", NULL, 0, PP_FRAME_ERROR},
                      {"_start", "/usr/bin/python3", 0, PP_FRAME_NATIVE},
                      {"__libc_start_main", NULL, 0, PP_FRAME_NATIVE},
                      {"Py_Main", NULL, 0, PP_FRAME_NATIVE},
                      {0}},
        3);
  return p;
}

static const char *EXAMPLE_LINES =
    "1;web;java;appid: java: /app/app.jar;java/lang/Thread.run()V_[j];"
    "com/example/Foo.bar(Ljava/lang/String|)V_[j] 7\n"
    "0;;swapper;secondary_startup_64_[k];cpu_startup_entry_[k];do_idle_[k] 120\n"
    "0;;python;[Profiling error: exception CalledProcessError];_start;__libc_start_main;Py_Main 3";

static void test_write_exact(void) {
  struct pp_profile *p = example();
  char *t = write_col(p, HEADER, NULL);
  char want[2048];
  snprintf(want, sizeof(want), "# %s\n%s", HEADER, EXAMPLE_LINES);
  CHECK_EQ_STR(t, want);
  free(t);

  /* app metadata off: container prefix stays (empty or not), no idx */
  struct pp_col_opts no_idx = {.container_prefix = true, .appids = true};
  t = write_col(p, NULL, &no_idx);
  CHECK_EQ_STR(t,
               "web;java;appid: java: /app/app.jar;java/lang/Thread.run()V_[j];"
               "com/example/Foo.bar(Ljava/lang/String|)V_[j] 7\n"
               ";swapper;secondary_startup_64_[k];cpu_startup_entry_[k];do_idle_[k] 120\n"
               ";python;[Profiling error: exception CalledProcessError];_start;"
               "__libc_start_main;Py_Main 3");
  free(t);
  /* API v1, appids off */
  struct pp_col_opts v1 = {0};
  t = write_col(p, "{}", &v1);
  CHECK_EQ_STR(t,
               "# {}\njava;java/lang/Thread.run()V_[j];com/example/Foo.bar(Ljava/lang/String|)V_[j]"
               " 7\nswapper;secondary_startup_64_[k];cpu_startup_entry_[k];do_idle_[k] 120\n"
               "python;[Profiling error: exception CalledProcessError];_start;__libc_start_main;"
               "Py_Main 3");
  free(t);
  pp_profile_free(p);

  /* header only, no stacks: no newline at all; comm fallbacks; separators
   * inside names replaced */
  p = pp_profile_new();
  t = write_col(p, "{}", NULL);
  CHECK_EQ_STR(t, "# {}");
  free(t);
  stack(p, 42, NULL, (struct fr[]){{"f", NULL, 0, 0}, {0}}, 1);
  stack(p, 42, "thr;ead\n1", (struct fr[]){{"g;h", NULL, 0, 0}, {0}}, 2);
  pid_info(p, 43, "c", "k8s;x", "a;b", 0);
  stack(p, 43, NULL, (struct fr[]){{"z", NULL, 0, 0}, {0}}, 3);
  stack(p, 43, NULL, (struct fr[]){{0}}, 4); /* no frames: comm and appid only */
  t = write_col(p, NULL, NULL);
  CHECK_EQ_STR(t,
               "0;;:42;f 1\n0;;thr|ead 1;g|h 2\n0;k8s|x;c;appid: a|b;z 3\n"
               "0;k8s|x;c;appid: a|b 4");
  free(t);
  pp_profile_free(p);
}

static int parse(const char *text, struct pp_profile *p, char **hdr, char *err) {
  return pp_col_parse(text, strlen(text), p, hdr, err, 256);
}

static const char *frame_name(const struct pp_profile *p, size_t stack_i, uint32_t k,
                              uint32_t *kind) {
  const struct pp_stack_rec *s = pp_profile_stack(p, stack_i);
  const struct pp_frame_rec *f = pp_profile_frame(p, pp_profile_stack_frames(p, s)[k]);
  if (kind) *kind = f->kind;
  return pp_profile_str(p, f->name);
}

static void test_parse(void) {
  struct pp_profile *p = pp_profile_new();
  char err[256], *hdr = NULL;
  char text[2048];
  snprintf(text, sizeof(text), "# %s\r\n%s\r\n", HEADER, EXAMPLE_LINES);
  CHECK_EQ_INT(parse(text, p, &hdr, err), 0);
  CHECK_EQ_STR(hdr, HEADER);
  free(hdr);
  CHECK_EQ_INT(pp_profile_stack_count(p), 3);
  CHECK_EQ_INT(pp_profile_pid_count(p), 3);
  const struct pp_pid_rec *r = pp_profile_pid(p, 1);
  CHECK_EQ_STR(pp_profile_str(p, r->comm), "java");
  CHECK_EQ_STR(pp_profile_str(p, r->container), "web");
  CHECK_EQ_STR(pp_profile_str(p, r->appid), "java: /app/app.jar");
  CHECK_EQ_INT(r->app_meta_index, 1);
  CHECK_EQ_STR(pp_profile_str(p, r->app_meta), "{\"exe\":\"/usr/bin/java\"}");
  CHECK_EQ_INT(pp_profile_pid(p, 2)->container, PP_NO_STR);
  CHECK_EQ_INT(pp_profile_pid(p, 2)->app_meta, PP_NO_STR);
  uint32_t kind;
  CHECK_EQ_STR(frame_name(p, 0, 1, &kind), "com/example/Foo.bar(Ljava/lang/String|)V");
  CHECK_EQ_INT(kind, PP_FRAME_JAVA_JIT);
  CHECK_EQ_STR(frame_name(p, 1, 2, &kind), "do_idle");
  CHECK_EQ_INT(kind, PP_FRAME_KERNEL);
  CHECK_EQ_STR(frame_name(p, 2, 0, &kind), "[Profiling error: exception CalledProcessError]");
  CHECK_EQ_INT(kind, PP_FRAME_ERROR);
  CHECK_EQ_INT(pp_profile_stack(p, 1)->count, 120);

  /* every suffix back to its kind */
  static const struct {
    const char *suffix;
    uint32_t kind;
  } kinds[] = {{"_[k]", PP_FRAME_KERNEL},
               {"_[p]", PP_FRAME_PYTHON},
               {"_[pn]", PP_FRAME_PYTHON_NATIVE},
               {"_[pe]", PP_FRAME_PYTHON_ERROR},
               {"_[j]", PP_FRAME_JAVA_JIT},
               {"_[i]", PP_FRAME_JAVA_INLINED},
               {"_[0]", PP_FRAME_JAVA_INTERPRETED},
               {"_[1]", PP_FRAME_JAVA_C1},
               {"_[rb]", PP_FRAME_RUBY},
               {"_[php]", PP_FRAME_PHP},
               {"_[net]", PP_FRAME_DOTNET},
               {"", PP_FRAME_NATIVE},
               {"_[x]", PP_FRAME_NATIVE}};
  for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
    snprintf(text, sizeof(text), "0;;comm;fn x%s 1", kinds[i].suffix);
    CHECK_EQ_INT(parse(text, p, NULL, err), 0);
    char want[32];
    snprintf(want, sizeof(want), "fn x%s", kinds[i].kind ? "" : kinds[i].suffix);
    CHECK_EQ_STR(frame_name(p, 0, 0, &kind), want);
    CHECK_EQ_INT(kind, kinds[i].kind);
  }
  /* JavaScript tiers share Java's letters; a frame shaped like JS's takes
   * the JS kind */
  static const struct {
    const char *suffix;
    uint32_t kind;
  } js[] = {{"_[j]", PP_FRAME_JS_OPTIMIZED},
            {"_[i]", PP_FRAME_JS_INLINED},
            {"_[0]", PP_FRAME_JS_INTERPRETED},
            {"_[1]", PP_FRAME_JS_BASELINE}};
  for (size_t i = 0; i < sizeof(js) / sizeof(js[0]); i++) {
    snprintf(text, sizeof(text), "0;;comm;hashLoop (/app/x.js:10)%s 1", js[i].suffix);
    CHECK_EQ_INT(parse(text, p, NULL, err), 0);
    CHECK_EQ_STR(frame_name(p, 0, 0, &kind), "hashLoop"); /* the file and line apart */
    CHECK_EQ_INT(kind, js[i].kind);
  }
  CHECK_EQ_INT(parse("0;;c;[Profiling skipped: disabled due to x] 1", p, NULL, err), 0);
  frame_name(p, 0, 0, &kind);
  CHECK_EQ_INT(kind, PP_FRAME_ERROR);

  /* layouts */
  CHECK_EQ_INT(parse("bash;main;read_[k] 5\nsshd;poll 2\n", p, NULL, err), 0); /* v1 */
  CHECK_EQ_STR(pp_profile_str(p, pp_profile_pid(p, 1)->comm), "bash");
  CHECK_EQ_INT(pp_profile_stack(p, 0)->nframes, 2);
  CHECK_EQ_INT(parse("# {\"containers\": [\"web\"]}\nweb;java;f 1\n;bash;g 2", p, NULL, err), 0);
  CHECK_EQ_STR(pp_profile_str(p, pp_profile_pid(p, 1)->container), "web"); /* no idx */
  CHECK_EQ_STR(pp_profile_str(p, pp_profile_pid(p, 2)->comm), "bash");
  /* digits first but the second field is no known container: v1 */
  CHECK_EQ_INT(parse("# {\"containers\": []}\n12;java;f 1", p, NULL, err), 0);
  CHECK_EQ_STR(pp_profile_str(p, pp_profile_pid(p, 1)->comm), "12");
  /* one v1-looking line makes the whole file v1 */
  CHECK_EQ_INT(parse("0;;java;f 1\nbash;g 2", p, NULL, err), 0);
  CHECK_EQ_STR(pp_profile_str(p, pp_profile_pid(p, 1)->comm), "0");
  /* synthetic pids: one per distinct prefix */
  CHECK_EQ_INT(
      parse("0;;a;f 1\n0;;a;g 1\n0;x;a;f 1\n1;;a;f 1\n0;;a;appid: q;f 1\n0;;b;f 1", p, NULL, err),
      0);
  CHECK_EQ_INT(pp_profile_pid_count(p), 5);
  CHECK_EQ_INT(pp_profile_stack(p, 1)->pid, 1);
  CHECK_EQ_INT(pp_profile_stack(p, 5)->pid, 5);
  /* leniencies: blank lines, zero counts, no header, trailing newline */
  CHECK_EQ_INT(parse("\n\na;b 0\n\na;c 3\n", p, NULL, err), 0);
  CHECK_EQ_INT(pp_profile_stack_count(p), 1);
  CHECK_EQ_INT(parse("", p, &hdr, err), 0);
  CHECK(hdr == NULL);
  CHECK_EQ_INT(parse("# not json\na;b 1", p, &hdr, err), 0);
  CHECK_EQ_STR(hdr, "not json");
  free(hdr);
  pp_profile_free(p);
}

static void test_parse_errors(void) {
  struct pp_profile *p = pp_profile_new();
  char err[256], *hdr = (char *)1;
  static const struct {
    const char *text, *err;
  } cases[] = {
      {"# {}\na;b 1\na;b", "line 3: no count (expected \"<frames> <count>\")"},
      {"a;b 1\na;b x1", "line 2: count is not a decimal number"},
      {"a;b -1", "line 1: count is not a decimal number"},
      {"a;b 1 ", "line 1: no count after the last space"},
      {"a;b 99999999999999999999", "line 1: count out of range"},
      {"a;b 123456789012345678901", "line 1: count out of range"},
      {" 5", "line 1: empty stack"},
      {"\n\n x", "line 3: count is not a decimal number"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    CHECK_EQ_INT(parse(cases[i].text, p, &hdr, err), -EINVAL);
    CHECK_EQ_STR(err, cases[i].err);
    CHECK(hdr == NULL);
    CHECK_EQ_INT(pp_profile_stack_count(p), 0); /* nothing half-parsed */
  }
  static const char nul[] = "a;b 1\na\0b 2";
  CHECK_EQ_INT(pp_col_parse(nul, sizeof(nul) - 1, p, NULL, err, sizeof(err)), -EINVAL);
  CHECK_EQ_STR(err, "line 2: NUL byte");
  CHECK_EQ_INT(pp_col_parse("a;b 1", 5, p, NULL, NULL, 0), 0); /* no err buffer is fine */

  /* hostile bytes: never crash, always 0 or -EINVAL with a line number */
  static const char alphabet[] = ";;;# \n\r0123456789ab_[]kpj:appid ";
  uint64_t x = 88172645463325252ull;
  char buf[300];
  int bad = 0;
  for (int round = 0; round < 20000; round++) {
    size_t n = 0, len = (size_t)(round % 290);
    for (; n < len; n++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      buf[n] = alphabet[x % (sizeof(alphabet) - 1)];
    }
    int rc = pp_col_parse(buf, n, p, &hdr, err, sizeof(err));
    if (rc == 0) free(hdr);
    if (rc != 0 && (rc != -EINVAL || strncmp(err, "line ", 5) != 0)) bad++;
  }
  CHECK_EQ_INT(bad, 0);
  /* a stack deeper than PP_MAX_FRAMES keeps its leaf side */
  size_t deep_len = (PP_MAX_FRAMES + 10) * 2 + 16;
  char *deep = malloc(deep_len), *q = deep;
  q += sprintf(q, "c");
  for (int i = 0; i < PP_MAX_FRAMES + 10; i++)
    q += sprintf(q, ";%c", i == PP_MAX_FRAMES + 9 ? 'L' : 'f');
  q += sprintf(q, " 1");
  CHECK_EQ_INT(pp_col_parse(deep, (size_t)(q - deep), p, NULL, err, sizeof(err)), 0);
  CHECK_EQ_INT(pp_profile_stack(p, 0)->nframes, PP_MAX_FRAMES);
  CHECK_EQ_STR(frame_name(p, 0, PP_MAX_FRAMES - 1, NULL), "L");
  free(deep);
  pp_profile_free(p);
}

/* Frame k of stack i (the file's line i): name, file ("" without), line. */
static void located(const struct pp_profile *p, size_t i, uint32_t k, const char *name,
                    const char *file, uint32_t line, uint32_t kind) {
  const struct pp_stack_rec *s = pp_profile_stack(p, i);
  const struct pp_frame_rec *f = pp_profile_frame(p, pp_profile_stack_frames(p, s)[k]);
  CHECK_EQ_STR(pp_profile_str(p, f->name), name);
  CHECK_EQ_STR(f->file == PP_NO_STR ? "" : pp_profile_str(p, f->file), file);
  CHECK_EQ_INT(f->line, line);
  CHECK_EQ_INT(f->kind, kind);
}

/* Runtime layouts come back as the name, file and line a live profile has
 * (what the gecko, pprof and speedscope writers show apart); what only
 * looks like one stays whole. */
static void test_parse_locations(void) {
  struct pp_profile *p = pp_profile_new();
  char err[256] = "";
  const char *col =
      "python3;main (app.py:10)_[p];f (lib/x.py)_[p];g (x.py:0)_[p];h ()_[p] 1\n"
      "ruby;work - app.rb:7_[rb];blk - app.rb:0_[rb];odd - app.rb_[rb] 1\n"
      "php;index /var/www/index.php:3_[php];main_[php] 1\n"
      "node;handle (/srv/app.js:20);run (/srv/app.js:3)_[j];f(int) (x);g (a:01) 1\n";
  CHECK_EQ_INT(parse(col, p, NULL, err), 0);
  static const struct {
    size_t stack;
    uint32_t k;
    const char *name, *file;
    uint32_t line, kind;
  } want[] = {
      {0, 0, "main", "app.py", 10, PP_FRAME_PYTHON},
      {0, 1, "f", "lib/x.py", 0, PP_FRAME_PYTHON},
      {0, 2, "g", "x.py:0", 0, PP_FRAME_PYTHON},
      {0, 3, "h ()", "", 0, PP_FRAME_PYTHON},
      {1, 0, "work", "app.rb", 7, PP_FRAME_RUBY},
      {1, 1, "blk", "app.rb", 0, PP_FRAME_RUBY},
      {1, 2, "odd - app.rb", "", 0, PP_FRAME_RUBY},
      {2, 0, "index", "/var/www/index.php", 3, PP_FRAME_PHP},
      {2, 1, "main", "", 0, PP_FRAME_PHP},
      {3, 0, "handle", "/srv/app.js", 20, PP_FRAME_JS},
      {3, 1, "run", "/srv/app.js", 3, PP_FRAME_JS_OPTIMIZED},
      {3, 2, "f(int) (x)", "", 0, PP_FRAME_NATIVE},
      {3, 3, "g (a:01)", "", 0, PP_FRAME_NATIVE},
  };
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
    located(p, want[i].stack, want[i].k, want[i].name, want[i].file, want[i].line, want[i].kind);
  /* and the same text again */
  char *a = write_col(p, NULL, &(struct pp_col_opts){0});
  CHECK_CONTAINS(a, "python3;main (app.py:10)_[p];f (lib/x.py)_[p];g (x.py:0)_[p];h ()_[p] 1");
  CHECK_CONTAINS(a, "ruby;work - app.rb:7_[rb];blk - app.rb:0_[rb];odd - app.rb_[rb] 1");
  CHECK_CONTAINS(a, "php;index /var/www/index.php:3_[php];main_[php] 1");
  CHECK_CONTAINS(a, "node;handle (/srv/app.js:20);run (/srv/app.js:3)_[j];f(int) (x);g (a:01) 1");
  free(a);
  pp_profile_free(p);
}

/* Every frame kind, runtime layouts with files, error frames, appids,
 * containers, unicode, spaces: write -> parse -> write is the identity. */
static void test_round_trip(void) {
  struct pp_profile *p = pp_profile_new(), *q = pp_profile_new();
  const char *hdr =
      "{\"containers\": [\"web\", \"k8s_app_pod-7\\u00e9\"], \"application_metadata\": [null, "
      "{\"python_version\": \"Python 3.11.2\"}]}";
  pid_info(p, 10, "python3", "web", "uwsgi: /srv/app.ini", 1);
  stack(p, 10, NULL,
        (struct fr[]){{"<module>", "/srv/app.py", 1, PP_FRAME_PYTHON},
                      {"handle (/srv/h.py:12 [flask==3.0.0])", NULL, 0, PP_FRAME_PYTHON},
                      {"PyObject_Call", NULL, 0, PP_FRAME_PYTHON_NATIVE},
                      {"[Sample Error ERROR_X]", NULL, 0, PP_FRAME_PYTHON_ERROR},
                      {"do_syscall_64", NULL, 0, PP_FRAME_KERNEL},
                      {0}},
        11);
  stack(p, 10, "worker thread",
        (struct fr[]){{"(/usr/lib/libpython3.11.so.1.0)", NULL, 0, PP_FRAME_NATIVE},
                      {"[unknown]", NULL, 0, PP_FRAME_NATIVE},
                      {0}},
        2);
  pid_info(p, 11, "java", "k8s_app_pod-7\xc3\xa9", NULL, 0);
  stack(p, 11, NULL,
        (struct fr[]){{"[main tid=1]", NULL, 0, PP_FRAME_PSEUDO},
                      {"Main.main([Ljava/lang/String;)V", NULL, 0, PP_FRAME_JAVA_INTERPRETED},
                      {"Foo.bar(I)J", NULL, 0, PP_FRAME_JAVA_C1},
                      {"Foo.baz()V", NULL, 0, PP_FRAME_JAVA_INLINED},
                      {"Foo.qux()V", NULL, 0, PP_FRAME_JAVA_JIT},
                      {"Unsafe_Park", NULL, 0, PP_FRAME_NATIVE},
                      {0}},
        5);
  pid_info(p, 12, "ruby", NULL, "rails: /app", 0);
  stack(p, 12, NULL,
        (struct fr[]){{"<main>", "/app/bin/rails", 4, PP_FRAME_RUBY},
                      {"(unknown) [c function] - (unknown):0", NULL, 0, PP_FRAME_NATIVE},
                      {0}},
        9);
  pid_info(p, 13, "php-fpm: pool www", NULL, NULL, 0);
  stack(p, 13, "php",
        (struct fr[]){
            {"index", "/var/www/index.php", 3, PP_FRAME_PHP},
            {"Program.Main", NULL, 0, PP_FRAME_DOTNET},
            {"processTicksAndRejections", "node:internal/process/task_queues", 95, PP_FRAME_JS},
            {"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x94\xa5", NULL, 0, PP_FRAME_NATIVE},
            {"", NULL, 0, PP_FRAME_NATIVE},
            {0}},
        1);
  pid_info(p, 14, "java", NULL, NULL, 0);
  stack(p, 14, NULL,
        (struct fr[]){{"[Profiling skipped: profiled-oom]", NULL, 0, PP_FRAME_ERROR},
                      {"main", NULL, 0, PP_FRAME_NATIVE},
                      {0}},
        3);
  stack(p, 14, NULL,
        (struct fr[]){{"[Profiling error: exception X]", NULL, 0, PP_FRAME_ERROR}, {0}},
        18446744073709551615ull);

  pid_info(p, 15, "node", NULL, NULL, 0);
  stack(p, 15, NULL,
        (struct fr[]){{"(anonymous)", "/app/x.js", 1, PP_FRAME_JS_INTERPRETED},
                      {"main", "/app/x.js", 3, PP_FRAME_JS_OPTIMIZED},
                      {"mix", "/app/x.js", 6, PP_FRAME_JS_INLINED},
                      {"sqrt", NULL, 0, PP_FRAME_JS_BUILTIN},
                      {"spin", "/app/x.js", 9, PP_FRAME_JS_BASELINE},
                      {"node::crypto::PBKDF2Traits::DeriveBits", NULL, 0, PP_FRAME_NATIVE},
                      {0}},
        4);

  static const struct pp_col_opts layouts[] = {
      {.app_metadata_prefix = true, .container_prefix = true, .appids = true},
      {.container_prefix = true, .appids = true},
      {.appids = true},
      {0},
  };
  for (size_t i = 0; i < 4; i++) {
    char *a = write_col(p, hdr, &layouts[i]), *h2 = NULL, err[256] = "";
    CHECK_CONTAINS(a,
                   "(anonymous) (/app/x.js:1)_[0];main (/app/x.js:3)_[j];mix (/app/x.js:6)_[i];"
                   "sqrt;spin (/app/x.js:9)_[1];node::crypto::PBKDF2Traits::DeriveBits 4");
    CHECK_EQ_INT(pp_col_parse(a, strlen(a), q, &h2, err, sizeof(err)), 0);
    CHECK_EQ_STR(err, "");
    char *b = write_col(q, h2, &layouts[i]);
    CHECK_EQ_STR(b, a);
    free(a);
    free(b);
    free(h2);
  }
  pp_profile_free(p);
  pp_profile_free(q);
}

int main(void) {
  test_write_exact();
  test_parse();
  test_parse_locations();
  test_parse_errors();
  test_round_trip();
  return pp_test_finish("test_col");
}
