/* SPDX-License-Identifier: Apache-2.0 */
/* Rootless mode's rules (core/rootless.c) through the real command line:
 * where the pid file, log and spool go (XDG_RUNTIME_DIR, else
 * TMPDIR/polyprof-<uid>; explicit values kept, root's defaults replaced even
 * when written out in the config file), the private directory refusing a
 * planted symlink, and the pid checks (missing --pids, a pid that does not
 * exist, running as root). The end-to-end run as an unprivileged user is
 * tests/integration/test_rootless.py. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "rootless.h"
#include "testlib.h"

static int configure(struct pp_config *c, int argc, char **argv, char err[PP_MAX_ERR]) {
  struct pp_cli cli;
  int rc = pp_cli_parse(&cli, argc, argv, err);
  if (rc == 0) rc = pp_cli_configure(&cli, c, err);
  pp_cli_free(&cli);
  return rc;
}

static void test_paths(const char *tmp) {
  char xdg[512], want[600], err[PP_MAX_ERR];
  snprintf(xdg, sizeof(xdg), "%s/xdg", tmp);
  CHECK(mkdir(xdg, 0700) == 0);
  setenv("XDG_RUNTIME_DIR", xdg, 1);
  /* the shipped config spells out root's defaults: they still move */
  char shipped[512];
  snprintf(shipped, sizeof(shipped), "%s/config/polyprof.yaml", getenv("PP_SOURCE_DIR"));
  char *argv[] = {"polyprof", "--config", shipped,      "--rootless",
                  "--pids",   "1",        "--log-file", "/tmp/mine.log"};
  struct pp_config c;
  CHECK_EQ_INT(configure(&c, 8, argv, err), 0);
  CHECK(c.rootless);
  snprintf(want, sizeof(want), "%s/polyprof/polyprof.pid", xdg);
  CHECK_EQ_STR(c.pid_file, want);
  CHECK_EQ_STR(c.log_file, "/tmp/mine.log");
  snprintf(want, sizeof(want), "%s/polyprof/spool", xdg);
  CHECK_EQ_STR(c.spool_dir, want);
  pp_config_free(&c);

  /* XDG_RUNTIME_DIR that is not a directory of ours: the temp directory */
  setenv("XDG_RUNTIME_DIR", "relative/path", 1);
  setenv("TMPDIR", tmp, 1);
  char *argv2[] = {"polyprof", "--config", shipped, "--rootless", "--pids", "1"};
  CHECK_EQ_INT(configure(&c, 6, argv2, err), 0);
  snprintf(want, sizeof(want), "%s/polyprof-%u/polyprof.log", tmp, (unsigned)geteuid());
  CHECK_EQ_STR(c.log_file, want);
  pp_config_free(&c);

  /* without --rootless nothing moves */
  char *argv3[] = {"polyprof", "--config", shipped, "--pids", "1"};
  CHECK_EQ_INT(configure(&c, 5, argv3, err), 0);
  CHECK_EQ_STR(c.pid_file, PP_DEFAULT_PID_FILE);
  CHECK_EQ_STR(c.log_file, PP_DEFAULT_LOG_FILE);
  pp_config_free(&c);
  unsetenv("XDG_RUNTIME_DIR");
  unsetenv("TMPDIR");
}

static void test_user_dir(const char *tmp) {
  char dir[512], target[512];
  snprintf(dir, sizeof(dir), "%s/made", tmp);
  CHECK_EQ_INT(pp_rootless_make_user_dir(dir), 0);
  struct stat st;
  CHECK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700);
  CHECK_EQ_INT(pp_rootless_make_user_dir(dir), 0); /* exists and ours: fine */
  chmod(dir, 0755);
  CHECK_EQ_INT(pp_rootless_make_user_dir(dir), 0); /* made private again */
  CHECK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700);
  /* a symlink planted where the directory should be is refused */
  snprintf(target, sizeof(target), "%s/elsewhere", tmp);
  CHECK(mkdir(target, 0700) == 0);
  snprintf(dir, sizeof(dir), "%s/planted", tmp);
  CHECK(symlink(target, dir) == 0);
  CHECK(pp_rootless_make_user_dir(dir) < 0);
}

static void test_validate(void) {
  char err[PP_MAX_ERR];
  struct pp_config c;
  pp_config_defaults(&c);
  CHECK_EQ_INT(pp_rootless_validate(&c, err), 0); /* not rootless: nothing to check */
  c.rootless = true;
  CHECK_EQ_INT(pp_rootless_validate(&c, err), -1);
  if (geteuid() == 0) {
    CHECK_CONTAINS(err, "you are root");
  } else {
    CHECK_CONTAINS(err, "--rootless needs --pids");
    uint32_t gone = 0x3ffffff; /* above pid_max's ceiling: never a process */
    c.pids = &gone;
    c.pid_count = 1;
    CHECK_EQ_INT(pp_rootless_validate(&c, err), -1);
    CHECK_CONTAINS(err, "does not exist");
    uint32_t self = (uint32_t)getpid();
    c.pids = &self;
    CHECK_EQ_INT(pp_rootless_validate(&c, err), 0);
    c.pids = NULL;
    c.pid_count = 0;
  }
  pp_config_free(&c);
}

int main(void) {
  char tmp[] = "/tmp/pp-rootless-XXXXXX";
  CHECK(mkdtemp(tmp) != NULL);
  test_paths(tmp);
  test_user_dir(tmp);
  test_validate();
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
  return pp_test_finish("test_rootless");
}
