/* SPDX-License-Identifier: Apache-2.0 */
/* Registry: scan the test plugins and check each is accepted or refused for
 * the right reason, without harm to this process. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "supervisor.h"
#include "testlib.h"

static const struct pp_plugin_info *find(const struct pp_plugin_info *v, size_t n,
                                         const char *file) {
  for (size_t i = 0; i < n; i++) {
    const char *slash = strrchr(v[i].path, '/');
    if (slash && strcmp(slash + 1, file) == 0) return &v[i];
  }
  fprintf(stderr, "no entry for %s\n", file);
  return NULL;
}

static void expect_refused(const struct pp_plugin_info *v, size_t n, const char *file,
                           const char *why) {
  const struct pp_plugin_info *i = find(v, n, file);
  CHECK(i != NULL);
  if (!i) return;
  CHECK(i->error != NULL);
  CHECK_CONTAINS(i->error, why);
  CHECK_CONTAINS(i->error, file); /* the reason names the file */
  CHECK(i->desc.name == NULL);
}

static const struct pp_plugin *expect_ok(const struct pp_plugin_info *v, size_t n, const char *file,
                                         const char *name) {
  const struct pp_plugin_info *i = find(v, n, file);
  CHECK(i != NULL);
  if (!i) return NULL;
  if (i->error) fprintf(stderr, "%s refused: %s\n", file, i->error);
  CHECK(i->error == NULL);
  CHECK(i->path[0] == '/');
  CHECK_EQ_STR(i->desc.name, name);
  return &i->desc;
}

static void test_scan(const char *dir) {
  struct pp_plugin_info *v;
  size_t n;
  pid_t me = getpid();
  CHECK_EQ_INT(pp_registry_scan(dir, &v, &n), 0);
  CHECK(n >= 11);
  for (size_t i = 1; i < n; i++)
    CHECK(strcmp(v[i - 1].path, v[i].path) < 0); /* sorted */

  const struct pp_plugin *d = expect_ok(v, n, "tp_ok.so", "tp_ok");
  if (d) {
    CHECK_EQ_INT(d->abi_major, PP_ABI_MAJOR);
    CHECK_EQ_INT(d->struct_size, sizeof(struct pp_plugin));
    CHECK_EQ_STR(d->version, "1.0");
    CHECK_EQ_STR(d->description, "well-behaved test plugin");
    CHECK(d->capabilities == (PP_CAP_RUNTIME | PP_CAP_NEEDS_NOTHING));
    CHECK(d->match_exe && d->match_exe[0] && d->match_exe[1] == NULL);
    if (d->match_exe) CHECK_EQ_STR(d->match_exe[0], "tp_ok_target*");
    CHECK(d->match_maps == NULL);
    CHECK_EQ_INT(d->option_count, 7);
    if (d->option_count == 7) {
      CHECK_EQ_STR(d->options[0].key, "greeting");
      CHECK_EQ_INT(d->options[0].type, PP_OPT_STRING);
      CHECK_EQ_STR(d->options[0].default_value, "hello");
      CHECK_EQ_STR(d->options[0].help, "word");
      CHECK(d->options[0].cli_flag == NULL);
      CHECK_EQ_INT(d->options[1].min, 1);
      CHECK_EQ_INT(d->options[1].max, 64);
      CHECK_EQ_STR(d->options[6].key, "mode");
      CHECK(d->options[6].choices && d->options[6].choices[2] == NULL);
      if (d->options[6].choices) CHECK_EQ_STR(d->options[6].choices[1], "slow");
    }
    /* A copy: no pointer into the plugin's code. */
    CHECK(!d->init && !d->start && !d->add_targets && !d->tick && !d->snapshot && !d->stop &&
          !d->fini);
  }
  d = expect_ok(v, n, "tp_minimal.so", "tp_minimal");
  if (d) {
    CHECK_EQ_STR(d->version, ""); /* never NULL */
    CHECK_EQ_STR(d->description, "");
    CHECK_EQ_INT(d->option_count, 0);
    CHECK(d->options == NULL);
  }
  expect_ok(v, n, "tp_crash.so", "tp_crash");
  expect_ok(v, n, "tp_hang.so", "tp_hang");
  expect_ok(v, n, "tp_leak.so", "tp_leak");
  expect_ok(v, n, "tp_evil.so", "tp_evil");

  char want[64];
  snprintf(want, sizeof(want), "ABI major %d, this agent speaks %d", PP_ABI_MAJOR + 1,
           PP_ABI_MAJOR);
  expect_refused(v, n, "tp_abi_major.so", want);
  expect_refused(v, n, "tp_no_entry.so", "no symbol polyprof_plugin_entry");
  expect_refused(v, n, "tp_ctor_crash.so", "crashed while loading: SIGSEGV");
  expect_refused(v, n, "tp_bad_name.so", "plugin name \"Bad-Name\" is not [a-z0-9_]+");
  expect_refused(v, n, "tp_small_struct.so", "smaller than the ABI 1.0 minimum");
  expect_refused(v, n, "tp_zdup.so", "duplicate plugin name \"tp_ok\"");
  expect_refused(v, n, "tp_undeclared.so", "plugin tp_undeclared declares no privileges");
  CHECK_EQ_INT(getpid(), me); /* probes never return into our code */
  pp_registry_free(v, n);
}

/* A directory with odd entries: not ELF, a directory named *.so, other
 * extensions; relative path given. */
static void test_odd_dir(const char *plugdir) {
  char tmpl[] = "/tmp/pp_registry_XXXXXX";
  char *dir = mkdtemp(tmpl);
  CHECK(dir != NULL);
  if (!dir) return;
  char p[512], target[4200];
  snprintf(p, sizeof(p), "%s/garbage.so", dir);
  int fd = open(p, O_CREAT | O_WRONLY, 0644);
  CHECK_EQ_INT(write(fd, "not an ELF file\n", 16), 16);
  close(fd);
  snprintf(p, sizeof(p), "%s/dir.so", dir);
  mkdir(p, 0755);
  snprintf(p, sizeof(p), "%s/readme.txt", dir);
  close(open(p, O_CREAT | O_WRONLY, 0644));
  snprintf(p, sizeof(p), "%s/a_link.so", dir);
  snprintf(target, sizeof(target), "%s/tp_minimal.so", plugdir);
  CHECK_EQ_INT(symlink(target, p), 0);

  char cwd[512];
  CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
  CHECK_EQ_INT(chdir("/tmp"), 0);
  struct pp_plugin_info *v;
  size_t n;
  CHECK_EQ_INT(pp_registry_scan(dir + 5, &v, &n), 0); /* relative: "pp_registry_..." */
  CHECK_EQ_INT(chdir(cwd), 0);
  CHECK_EQ_INT(n, 2);
  if (n == 2) {
    CHECK_CONTAINS(v[0].path, "/a_link.so");
    CHECK(v[0].path[0] == '/');
    CHECK(v[0].error == NULL);
    CHECK_EQ_STR(v[0].desc.name, "tp_minimal");
    CHECK_CONTAINS(v[1].error, "garbage.so: dlopen: ");
  }
  pp_registry_free(v, n);

  unlink(p);
  snprintf(p, sizeof(p), "%s/garbage.so", dir);
  unlink(p);
  snprintf(p, sizeof(p), "%s/readme.txt", dir);
  unlink(p);
  snprintf(p, sizeof(p), "%s/dir.so", dir);
  rmdir(p);
  CHECK_EQ_INT(rmdir(dir), 0);

  CHECK_EQ_INT(pp_registry_scan("/nonexistent/polyprof", &v, &n), -ENOENT);
  CHECK(v == NULL && n == 0);
}

int main(void) {
  const char *build = getenv("PP_BUILD_DIR");
  char dir[4096];
  snprintf(dir, sizeof(dir), "%s/tests/plugins", build ? build : "build");
  test_scan(dir);
  test_odd_dir(dir);
  return pp_test_finish("test_registry");
}
