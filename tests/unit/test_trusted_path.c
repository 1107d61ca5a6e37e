/* SPDX-License-Identifier: Apache-2.0 */
/* support/trusted_path: every component of a plugin or worker path must be
 * owned by root (or the agent's user) and not writable by group or others;
 * symlinks are followed and checked where they lie. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/trusted_path.h"
#include "testlib.h"

static char root[] = "/tmp/pp-trusted-XXXXXX";

static void mk(const char *rel, mode_t mode, bool dir) {
  char p[512];
  snprintf(p, sizeof(p), "%s/%s", root, rel);
  if (dir)
    CHECK(mkdir(p, mode) == 0);
  else
    close(open(p, O_CREAT | O_WRONLY, mode));
  CHECK(chmod(p, mode) == 0); /* past the umask */
}

static int check(const char *rel, bool want_dir, char *err, size_t len) {
  char p[512];
  snprintf(p, sizeof(p), "%s/%s", root, rel);
  err[0] = '\0';
  return pp_trusted_path_check(p, want_dir, err, len);
}

int main(void) {
  CHECK(mkdtemp(root) != NULL);
  CHECK(chmod(root, 0755) == 0);
  char err[1024], p[512], q[512];
  mk("ok", 0755, true);
  mk("ok/plugin.so", 0755, false);
  CHECK_EQ_INT(check("ok", true, err, sizeof(err)), 0);
  CHECK_EQ_INT(check("ok/plugin.so", false, err, sizeof(err)), 0);
  CHECK_EQ_INT(check("ok//./plugin.so", false, err, sizeof(err)), 0);
  /* the final object's kind */
  CHECK_EQ_INT(check("ok", false, err, sizeof(err)), -EACCES);
  CHECK_EQ_INT(check("ok/plugin.so", true, err, sizeof(err)), -ENOTDIR);
  CHECK_EQ_INT(check("ok/missing.so", false, err, sizeof(err)), -ENOENT);

  /* a world-writable directory, even with the sticky bit, as the final
   * directory; the world-writable sticky /tmp above is fine */
  mk("world", 01777, true);
  CHECK_EQ_INT(check("world", true, err, sizeof(err)), -EPERM);
  CHECK_CONTAINS(err, "/world is writable by everyone");
  mk("world/sub", 0755, true);
  mk("world/sub/x.so", 0755, false);
  CHECK_EQ_INT(check("world/sub/x.so", false, err, sizeof(err)), 0); /* sticky, root's */
  mk("open", 0777, true);
  mk("open/sub", 0755, true);
  CHECK_EQ_INT(check("open/sub", true, err, sizeof(err)), -EPERM);
  CHECK_CONTAINS(err, "/open is writable by everyone");

  /* a group-writable file; a file of another user */
  mk("ok/group.so", 0775, false);
  CHECK_EQ_INT(check("ok/group.so", false, err, sizeof(err)), -EPERM);
  CHECK_CONTAINS(err, "group.so is writable by its group");
  mk("ok/theirs.so", 0755, false);
  snprintf(p, sizeof(p), "%s/ok/theirs.so", root);
  CHECK(chown(p, 65534, 65534) == 0);
  CHECK_EQ_INT(check("ok/theirs.so", false, err, sizeof(err)), -EPERM);
  CHECK_CONTAINS(err, "theirs.so is not owned by root");
  CHECK_CONTAINS(err, "uid 65534");

  /* symlinks: a trusted link into an untrusted directory is refused where
   * the target lies; a link owned by someone else is refused itself */
  snprintf(p, sizeof(p), "%s/open", root);
  snprintf(q, sizeof(q), "%s/ok/link", root);
  CHECK(symlink(p, q) == 0);
  CHECK_EQ_INT(check("ok/link/sub", true, err, sizeof(err)), -EPERM);
  CHECK_CONTAINS(err, "/open is writable by everyone");
  snprintf(q, sizeof(q), "%s/ok/rel.so", root);
  CHECK(symlink("plugin.so", q) == 0);
  CHECK_EQ_INT(check("ok/rel.so", false, err, sizeof(err)), 0);
  snprintf(q, sizeof(q), "%s/ok/up", root);
  CHECK(symlink("../ok", q) == 0);
  CHECK_EQ_INT(check("ok/up/up/up/plugin.so", false, err, sizeof(err)), 0);
  CHECK(lchown(q, 65534, 65534) == 0);
  CHECK_EQ_INT(check("ok/up/plugin.so", false, err, sizeof(err)), -EPERM);
  CHECK_CONTAINS(err, "/ok/up is not owned by root");
  snprintf(q, sizeof(q), "%s/ok/loop", root);
  CHECK(symlink("loop", q) == 0);
  CHECK_EQ_INT(check("ok/loop", true, err, sizeof(err)), -ELOOP);

  /* a relative path is taken from the working directory */
  char cwd[512];
  CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
  CHECK(chdir(root) == 0);
  CHECK_EQ_INT(pp_trusted_path_check("ok/plugin.so", false, err, sizeof(err)), 0);
  CHECK_EQ_INT(pp_trusted_path_check("world", true, err, sizeof(err)), -EPERM);
  CHECK(chdir(cwd) == 0);
  CHECK_EQ_INT(pp_trusted_path_check("", true, err, sizeof(err)), -EINVAL);

  snprintf(p, sizeof(p), "rm -rf %s", root);
  if (system(p) != 0) fprintf(stderr, "could not remove %s\n", root);
  return pp_test_finish("test_trusted_path");
}
