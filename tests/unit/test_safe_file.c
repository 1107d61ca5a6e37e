/* SPDX-License-Identifier: Apache-2.0 */
/* support/safe_file: planted symlinks and foreign files are never written
 * through, temp names are fresh, leftovers are swept, directories with
 * loose permissions are refused, short reads are errors. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <utime.h>

#include "support/safe_file.h"
#include "testlib.h"

static char root[] = "/tmp/pp-safe-file-XXXXXX";

static const char *slurp(const char *path) {
  static char buf[256];
  buf[0] = '\0';
  int fd = open(path, O_RDONLY);
  if (fd < 0) return "(none)";
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  buf[n > 0 ? n : 0] = '\0';
  close(fd);
  return buf;
}

static void put(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

static int write_text(FILE *f, void *ctx) {
  fputs(ctx, f);
  return 0;
}

static int write_fail(FILE *f, void *ctx) {
  fputs(ctx, f);
  return -EPROTO;
}

static int count_temps(const char *dir) {
  char cmd[512];
  snprintf(cmd, sizeof(cmd), "ls -A %s | grep -c '^" PP_SAFE_TEMP_PREFIX "'", dir);
  FILE *p = popen(cmd, "r");
  int n = -1;
  if (p && fscanf(p, "%d", &n) != 1) n = -1;
  if (p) pclose(p);
  return n;
}

static void test_write_file(void) {
  char victim[256], out[256], tmp[300];
  snprintf(victim, sizeof(victim), "%s/victim", root);
  snprintf(out, sizeof(out), "%s/out.html", root);
  put(victim, "host file");
  /* a symlink at the final name and at the old fixed temp name */
  CHECK(symlink(victim, out) == 0);
  snprintf(tmp, sizeof(tmp), "%s.tmp", out);
  CHECK(symlink(victim, tmp) == 0);
  CHECK_EQ_INT(pp_safe_write_file(out, 0644, write_text, "new"), 0);
  CHECK_EQ_STR(slurp(victim), "host file");
  struct stat st;
  CHECK(lstat(out, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0644);
  CHECK_EQ_STR(slurp(out), "new");
  CHECK(lstat(tmp, &st) == 0 && S_ISLNK(st.st_mode)); /* left alone */
  CHECK_EQ_INT(count_temps(root), 0);
  /* a failing writer leaves the old file and no temp file */
  CHECK_EQ_INT(pp_safe_write_file(out, 0644, write_fail, "half"), -EPROTO);
  CHECK_EQ_STR(slurp(out), "new");
  CHECK_EQ_INT(count_temps(root), 0);
  /* a bare name is written in the current directory */
  char cwd[256];
  CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
  CHECK(chdir(root) == 0);
  CHECK_EQ_INT(pp_safe_write_file("bare.txt", 0600, write_text, "bare"), 0);
  CHECK(chdir(cwd) == 0);
  snprintf(tmp, sizeof(tmp), "%s/bare.txt", root);
  CHECK_EQ_STR(slurp(tmp), "bare");
}

static void test_temp_and_symlink(void) {
  char a[256], b[256], link[256];
  int fa = pp_safe_create_temp(root, "x", 0600, a, sizeof(a));
  int fb = pp_safe_create_temp(root, "x", 0600, b, sizeof(b));
  CHECK(fa >= 0 && fb >= 0);
  CHECK(strcmp(a, b) != 0);
  CHECK(strstr(a, "/" PP_SAFE_TEMP_PREFIX "x.") != NULL);
  close(fa);
  close(fb);
  unlink(a);
  unlink(b);
  snprintf(link, sizeof(link), "%s/last", root);
  CHECK(symlink("/etc/passwd", link) == 0);
  CHECK_EQ_INT(pp_safe_replace_symlink(root, "out.html", "last"), 0);
  char target[64] = "";
  CHECK(readlink(link, target, sizeof(target) - 1) > 0);
  CHECK_EQ_STR(target, "out.html");
  CHECK_EQ_INT(count_temps(root), 0);
}

static void test_sweep(void) {
  char dir[256], old[300], fresh[300], foreign[300], other[300];
  snprintf(dir, sizeof(dir), "%s/sweep", root);
  CHECK(mkdir(dir, 0755) == 0);
  snprintf(old, sizeof(old), "%s/" PP_SAFE_TEMP_PREFIX "a.1", dir);
  snprintf(fresh, sizeof(fresh), "%s/" PP_SAFE_TEMP_PREFIX "a.2", dir);
  snprintf(foreign, sizeof(foreign), "%s/" PP_SAFE_TEMP_PREFIX "a.3", dir);
  snprintf(other, sizeof(other), "%s/profile.col", dir);
  put(old, "o");
  put(fresh, "f");
  put(foreign, "x");
  put(other, "keep");
  struct utimbuf t = {time(NULL) - 3600, time(NULL) - 3600};
  CHECK(utime(old, &t) == 0 && utime(foreign, &t) == 0);
  CHECK(chown(foreign, 65534, 65534) == 0); /* not ours: never removed */
  CHECK_EQ_INT(pp_safe_sweep_temps(dir, 60), 1);
  CHECK(access(old, F_OK) < 0 && access(fresh, F_OK) == 0 && access(foreign, F_OK) == 0);
  CHECK(access(other, F_OK) == 0);
  CHECK_EQ_INT(pp_safe_sweep_temps(dir, 0), 1);
  CHECK(access(fresh, F_OK) < 0);
}

static void test_check_dir(void) {
  char dir[256], err[512], link[256];
  snprintf(dir, sizeof(dir), "%s/chk", root);
  CHECK(mkdir(dir, 0755) == 0);
  CHECK_EQ_INT(pp_safe_check_dir(dir, err, sizeof(err)), 0);
  CHECK(chmod(dir, 0777) == 0);
  CHECK_EQ_INT(pp_safe_check_dir(dir, err, sizeof(err)), -EPERM);
  CHECK_CONTAINS(err, dir);
  CHECK_CONTAINS(err, "writable by everyone");
  CHECK(chmod(dir, 0775) == 0);
  CHECK_EQ_INT(pp_safe_check_dir(dir, err, sizeof(err)), -EPERM);
  CHECK_CONTAINS(err, "writable by its group");
  CHECK(chmod(dir, 0755) == 0 && chown(dir, 65534, 65534) == 0);
  CHECK_EQ_INT(pp_safe_check_dir(dir, err, sizeof(err)), -EPERM);
  CHECK_CONTAINS(err, "owned by uid 65534");
  snprintf(link, sizeof(link), "%s/file", root);
  put(link, "");
  CHECK_EQ_INT(pp_safe_check_dir(link, err, sizeof(err)), -ENOTDIR);
}

static void test_open_own(void) {
  char path[256], victim[256], hard[256];
  snprintf(path, sizeof(path), "%s/agent.log", root);
  snprintf(victim, sizeof(victim), "%s/victim2", root);
  put(victim, "host");
  CHECK(symlink(victim, path) == 0);
  CHECK_EQ_INT(pp_safe_open_own(path, true, 0640), -EPERM);
  CHECK(unlink(path) == 0);
  /* a hard link to a host file would be written through */
  CHECK(link(victim, path) == 0);
  CHECK_EQ_INT(pp_safe_open_own(path, true, 0640), -EPERM);
  CHECK(unlink(path) == 0);
  /* a FIFO: refused without blocking */
  CHECK(mkfifo(path, 0600) == 0);
  CHECK_EQ_INT(pp_safe_open_own(path, true, 0640), -EPERM);
  CHECK(unlink(path) == 0);
  /* someone else's file */
  put(path, "theirs");
  CHECK(chown(path, 65534, 65534) == 0);
  CHECK_EQ_INT(pp_safe_open_own(path, true, 0640), -EPERM);
  CHECK(unlink(path) == 0);
  /* missing: created, with the mode asked, appended to */
  int fd = pp_safe_open_own(path, true, 0640);
  CHECK(fd >= 0);
  CHECK(write(fd, "a", 1) == 1);
  close(fd);
  fd = pp_safe_open_own(path, true, 0640);
  CHECK(fd >= 0);
  CHECK(write(fd, "b", 1) == 1);
  close(fd);
  CHECK_EQ_STR(slurp(path), "ab");
  struct stat st;
  CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0640 && st.st_nlink == 1);
  CHECK_EQ_STR(slurp(victim), "host");
  CHECK_EQ_INT(count_temps(root), 0);
  snprintf(hard, sizeof(hard), "%s/none/x", root);
  CHECK_EQ_INT(pp_safe_open_own(hard, false, 0644), -ENOENT);
}

static void test_exact_io(void) {
  int p[2];
  CHECK(pipe(p) == 0);
  CHECK_EQ_INT(pp_safe_write_all(p[1], "0123456789", 10), 0);
  close(p[1]);
  char buf[32];
  CHECK_EQ_INT(pp_safe_read_exact(p[0], buf, 4), 0);
  CHECK(memcmp(buf, "0123", 4) == 0);
  /* 6 left, 20 asked: a short read is an error, not a shorter result */
  CHECK_EQ_INT(pp_safe_read_exact(p[0], buf, 20), -EIO);
  close(p[0]);
  CHECK_EQ_INT(pp_safe_read_exact(-1, buf, 1), -EBADF);
}

int main(void) {
  CHECK(mkdtemp(root) != NULL);
  test_write_file();
  test_temp_and_symlink();
  test_sweep();
  test_check_dir();
  test_open_own();
  test_exact_io();
  char cmd[256];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
  return pp_test_finish("test_safe_file");
}
