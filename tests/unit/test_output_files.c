/* SPDX-License-Identifier: Apache-2.0 */
/* Output files on real directories: names, symlinks, rotation, and
 * failures (no space, file size limit, read-only mount, not a directory)
 * that must leave no partial file and the previous link untouched.
 *
 * Tests run as root, so permission bits prove nothing; failures are made
 * real instead: RLIMIT_FSIZE (EFBIG on write), and where the kernel lets us
 * create a private mount namespace, a 16 KiB tmpfs (ENOSPC) and a
 * read-only remount of it (EROFS). Without that the last two say SKIPPED. */
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "output/files.h"
#include "testlib.h"

static char root[64];

static int write_text(FILE *f, void *ctx) {
  return fputs(ctx, f) < 0 ? -EIO : 0;
}

static int write_big(FILE *f, void *ctx) {
  static char block[4096];
  memset(block, 'x', sizeof(block));
  for (int i = 0; i < 256; i++) /* 1 MiB */
    if (fwrite(block, 1, sizeof(block), f) != sizeof(block)) return -(errno ? errno : EIO);
  return 0;
}

static int write_fail(FILE *f, void *ctx) {
  fputs("partial", f);
  return -EPROTO;
}

/* Sorted, space-separated directory listing (hidden files included). */
static void listing(const char *dir, char *out, size_t len) {
  struct dirent **names;
  int n = scandir(dir, &names, NULL, alphasort);
  out[0] = '\0';
  for (int i = 0; i < n; i++) {
    if (strcmp(names[i]->d_name, ".") && strcmp(names[i]->d_name, "..")) {
      if (out[0]) strncat(out, " ", len - strlen(out) - 1);
      strncat(out, names[i]->d_name, len - strlen(out) - 1);
    }
    free(names[i]);
  }
  free(n >= 0 ? names : NULL);
}

static char *link_target(const char *dir, const char *name) {
  static char buf[256];
  char path[256];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  ssize_t n = readlink(path, buf, sizeof(buf) - 1);
  buf[n > 0 ? n : 0] = '\0';
  return buf;
}

static char *slurp(const char *dir, const char *name) {
  static char buf[256];
  char path[256];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "r");
  buf[0] = '\0';
  if (f) {
    buf[fread(buf, 1, sizeof(buf) - 1, f)] = '\0';
    fclose(f);
  }
  return buf;
}

static void test_stem(void) {
  char b[64];
  pp_output_stem(0, b, sizeof(b));
  CHECK_EQ_STR(b, "profile_1970-01-01T00:00:00");
  pp_output_stem(1795326600, b, sizeof(b));
  CHECK_EQ_STR(b, "profile_2026-11-22T05:50:00");
}

/* Two sessions ending in the same second (SIGTERM right after a session
 * end) must not share a stem: the second would overwrite the first. */
static void test_session_stem(void) {
  char dir[128], err[512], b[80];
  snprintf(dir, sizeof(dir), "%s/stems", root);
  CHECK_EQ_INT(pp_output_check_dir(dir, err, sizeof(err)), 0);
  pp_output_session_stem(dir, 1795326600, b, sizeof(b));
  CHECK_EQ_STR(b, "profile_2026-11-22T05:50:00");
  CHECK_EQ_INT(pp_output_publish(dir, b, ".col", "last_profile.col", false, write_text, "first",
                                 err, sizeof(err)),
               0);
  pp_output_session_stem(dir, 1795326600, b, sizeof(b));
  CHECK_EQ_STR(b, "profile_2026-11-22T05:50:00_2");
  CHECK_EQ_INT(
      pp_output_publish(dir, b, ".html", NULL, false, write_text, "second", err, sizeof(err)), 0);
  pp_output_session_stem(dir, 1795326600, b, sizeof(b));
  CHECK_EQ_STR(b, "profile_2026-11-22T05:50:00_3"); /* an .html alone also takes it */
  CHECK_EQ_STR(slurp(dir, "profile_2026-11-22T05:50:00.col"), "first");
  pp_output_session_stem(dir, 1795326601, b, sizeof(b));
  CHECK_EQ_STR(b, "profile_2026-11-22T05:50:01");
}

static void test_check_dir(void) {
  char dir[128], err[512], ls[512];
  snprintf(dir, sizeof(dir), "%s/a/b/c", root);
  CHECK_EQ_INT(pp_output_check_dir(dir, err, sizeof(err)), 0);
  struct stat st;
  CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode));
  listing(dir, ls, sizeof(ls));
  CHECK_EQ_STR(ls, "");                                        /* probe removed */
  CHECK_EQ_INT(pp_output_check_dir(dir, err, sizeof(err)), 0); /* exists: fine */

  char file[128], under[160];
  snprintf(file, sizeof(file), "%s/plainfile", root);
  fclose(fopen(file, "w"));
  snprintf(under, sizeof(under), "%s/sub", file);
  CHECK_EQ_INT(pp_output_check_dir(under, err, sizeof(err)), -ENOTDIR);
  CHECK_CONTAINS(err, under);
  CHECK_CONTAINS(err, strerror(ENOTDIR));
  CHECK_EQ_INT(pp_output_check_dir(file, err, sizeof(err)), -ENOTDIR);
  CHECK_EQ_INT(pp_output_check_dir("", err, sizeof(err)), -EINVAL);
  unlink(file);
}

static void test_publish_and_rotate(void) {
  char dir[128], err[512], ls[1024];
  snprintf(dir, sizeof(dir), "%s/out", root);
  CHECK_EQ_INT(pp_output_check_dir(dir, err, sizeof(err)), 0);
  umask(022);

  CHECK_EQ_INT(pp_output_publish(dir, "profile_A", ".col", "last_profile.col", false, write_text,
                                 "one", err, sizeof(err)),
               0);
  CHECK_EQ_STR(slurp(dir, "profile_A.col"), "one");
  CHECK_EQ_STR(link_target(dir, "last_profile.col"), "profile_A.col"); /* relative basename */
  CHECK_EQ_STR(slurp(dir, "last_profile.col"), "one");
  char path[256];
  struct stat st;
  snprintf(path, sizeof(path), "%s/profile_A.col", dir);
  CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0644);

  /* not rotating: both stay */
  CHECK_EQ_INT(pp_output_publish(dir, "profile_B", ".col", "last_profile.col", false, write_text,
                                 "two", err, sizeof(err)),
               0);
  listing(dir, ls, sizeof(ls));
  CHECK_EQ_STR(ls, "last_profile.col profile_A.col profile_B.col");
  CHECK_EQ_STR(link_target(dir, "last_profile.col"), "profile_B.col");

  /* rotating, .col and .html per session: exactly the last pair remains */
  const char *stems[] = {"profile_C", "profile_D", "profile_E"};
  unlink(path); /* start from one pair */
  for (int i = 0; i < 3; i++) {
    CHECK_EQ_INT(pp_output_publish(dir, stems[i], ".col", "last_profile.col", true, write_text,
                                   "col", err, sizeof(err)),
                 0);
    CHECK_EQ_INT(pp_output_publish(dir, stems[i], ".html", "last_flamegraph.html", true, write_text,
                                   "html", err, sizeof(err)),
                 0);
  }
  listing(dir, ls, sizeof(ls));
  CHECK_EQ_STR(ls, "last_flamegraph.html last_profile.col profile_E.col profile_E.html");
  CHECK_EQ_STR(link_target(dir, "last_flamegraph.html"), "profile_E.html");

  /* same stem twice (two sessions in one second): replaced, not deleted */
  CHECK_EQ_INT(pp_output_publish(dir, "profile_E", ".col", "last_profile.col", true, write_text,
                                 "again", err, sizeof(err)),
               0);
  CHECK_EQ_STR(slurp(dir, "profile_E.col"), "again");

  /* a link someone pointed elsewhere: that target is never deleted */
  char keep[256], lnk[256];
  snprintf(keep, sizeof(keep), "%s/keep.txt", root);
  fclose(fopen(keep, "w"));
  snprintf(lnk, sizeof(lnk), "%s/last_profile.col", dir);
  unlink(lnk);
  CHECK(symlink(keep, lnk) == 0);
  /* a symlink planted at the old fixed temp name is neither used nor
   * followed: the link is made under a fresh name */
  snprintf(path, sizeof(path), "%s/last_profile.col.tmp", dir);
  CHECK(symlink("garbage", path) == 0);
  CHECK_EQ_INT(pp_output_publish(dir, "profile_F", ".col", "last_profile.col", true, write_text,
                                 "f", err, sizeof(err)),
               0);
  CHECK(access(keep, F_OK) == 0);
  CHECK_EQ_STR(link_target(dir, "last_profile.col"), "profile_F.col");
  listing(dir, ls, sizeof(ls));
  CHECK_EQ_STR(ls,
               "last_flamegraph.html last_profile.col last_profile.col.tmp profile_E.col "
               "profile_E.html profile_F.col");
  CHECK_EQ_STR(link_target(dir, "last_profile.col.tmp"), "garbage");
  unlink(path);
  unlink(keep);

  /* no link at all */
  CHECK_EQ_INT(
      pp_output_publish(dir, "profile_G", ".pb.gz", NULL, true, write_text, "g", err, sizeof(err)),
      0);
  CHECK_EQ_STR(slurp(dir, "profile_G.pb.gz"), "g");
  CHECK_EQ_INT(
      pp_output_publish(dir, "../x", ".col", NULL, false, write_text, "", err, sizeof(err)),
      -EINVAL);
}

/* A failed write: error returned, no file (final or temp), link as before. */
static void expect_clean_failure(const char *dir, pp_output_write_fn fn, int want_rc,
                                 const char *what) {
  char err[512], before[1024], after[1024], target[256];
  listing(dir, before, sizeof(before));
  snprintf(target, sizeof(target), "%s", link_target(dir, "last_profile.col"));
  int rc = pp_output_publish(dir, "profile_Z", ".col", "last_profile.col", true, fn, "x", err,
                             sizeof(err));
  if (rc != want_rc) fprintf(stderr, "-- %s: %s\n", what, err);
  CHECK_EQ_INT(rc, want_rc);
  CHECK_CONTAINS(err, strerror(-want_rc));
  listing(dir, after, sizeof(after));
  CHECK_EQ_STR(after, before);
  CHECK_EQ_STR(link_target(dir, "last_profile.col"), target);
}

static void test_failures(void) {
  char dir[128], err[512];
  snprintf(dir, sizeof(dir), "%s/fail", root);
  CHECK_EQ_INT(pp_output_check_dir(dir, err, sizeof(err)), 0);
  CHECK_EQ_INT(pp_output_publish(dir, "profile_A", ".col", "last_profile.col", true, write_text,
                                 "good", err, sizeof(err)),
               0);
  expect_clean_failure(dir, write_fail, -EPROTO, "writer error");

  /* file size limit: write() itself fails with EFBIG */
  struct rlimit old, lim;
  getrlimit(RLIMIT_FSIZE, &old);
  lim = old;
  lim.rlim_cur = 8192;
  signal(SIGXFSZ, SIG_IGN);
  CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
  expect_clean_failure(dir, write_big, -EFBIG, "RLIMIT_FSIZE");
  setrlimit(RLIMIT_FSIZE, &old);
  CHECK_EQ_STR(slurp(dir, "profile_A.col"), "good");
}

static void test_tmpfs(void) {
  char dir[128], sub[160], err[512];
  snprintf(dir, sizeof(dir), "%s/tiny", root);
  mkdir(dir, 0755);
  if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
      mount("tmpfs", dir, "tmpfs", 0, "size=16k,mode=0755") < 0) {
    printf("test_output_files: SKIPPED ENOSPC/EROFS cases: cannot mount a private tmpfs (%s)\n",
           strerror(errno));
    return;
  }
  CHECK_EQ_INT(pp_output_check_dir(dir, err, sizeof(err)), 0);
  CHECK_EQ_INT(pp_output_publish(dir, "profile_A", ".col", "last_profile.col", true, write_text,
                                 "good", err, sizeof(err)),
               0);
  expect_clean_failure(dir, write_big, -ENOSPC, "tmpfs full");

  CHECK(mount(NULL, dir, NULL, MS_REMOUNT | MS_RDONLY, "size=16k,mode=0755") == 0);
  snprintf(sub, sizeof(sub), "%s/new", dir);
  CHECK_EQ_INT(pp_output_check_dir(dir, err, sizeof(err)), -EROFS);
  CHECK_CONTAINS(err, dir);
  CHECK_CONTAINS(err, strerror(EROFS));
  CHECK_EQ_INT(pp_output_check_dir(sub, err, sizeof(err)), -EROFS);
  expect_clean_failure(dir, write_text, -EROFS, "read-only");
  CHECK_EQ_STR(link_target(dir, "last_profile.col"), "profile_A.col");
  umount(dir);
}

int main(void) {
  snprintf(root, sizeof(root), "/tmp/pp_test_files.XXXXXX");
  if (!mkdtemp(root)) return 1;
  test_stem();
  test_session_stem();
  test_check_dir();
  test_publish_and_rotate();
  test_failures();
  test_tmpfs();
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
  return pp_test_finish("test_output_files");
}
