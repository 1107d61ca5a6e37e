/* SPDX-License-Identifier: Apache-2.0 */
#include "pidfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/safe_file.h"

static void mkdir_parent(const char *path) {
  char dir[4096];
  snprintf(dir, sizeof(dir), "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash || slash == dir) return;
  *slash = '\0';
  mkdir(dir, 0755);
}

/* Whether fd is still the file at path: an agent that exits unlinks the
 * file while holding the lock, so a lock won on an unlinked file is
 * worthless and the open is retried. */
static bool still_at(int fd, const char *path) {
  struct stat a, b;
  return fstat(fd, &a) == 0 && lstat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int pp_pidfile_acquire(const char *path, char *err, size_t errlen) {
  mkdir_parent(path);
  int fd = -1;
  for (int attempt = 0; attempt < 8; attempt++) {
    /* the file may sit in a shared directory: never follow a planted
     * symlink, never write a file someone else created */
    fd = pp_safe_open_own(path, false, 0644);
    if (fd < 0) {
      snprintf(err, errlen, "cannot open pid file %s: %s", path,
               fd == -EPERM ? "not a regular file of the agent's user (planted?)" : strerror(-fd));
      return fd;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
      int e = errno;
      char buf[32] = "";
      ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
      if (n > 0) buf[n] = '\0';
      long holder = strtol(buf, NULL, 10);
      if (e == EWOULDBLOCK && holder > 0)
        snprintf(err, errlen, "another polyprof (pid %ld) is running: %s is locked", holder, path);
      else
        snprintf(err, errlen, "cannot lock pid file %s: %s", path, strerror(e));
      close(fd);
      return -(e == EWOULDBLOCK ? EBUSY : e);
    }
    if (still_at(fd, path)) break;
    close(fd);
    fd = -1;
  }
  if (fd < 0) {
    snprintf(err, errlen, "cannot lock pid file %s: it keeps being replaced", path);
    return -EBUSY;
  }
  char buf[32];
  int n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
  if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, (size_t)n, 0) != n) {
    int e = errno;
    snprintf(err, errlen, "cannot write pid file %s: %s", path, strerror(e));
    close(fd);
    return -e;
  }
  return fd;
}

void pp_pidfile_release(int fd, const char *path) {
  if (fd < 0) return;
  /* unlink while still holding the lock so a new agent never sees our pid */
  if (path) unlink(path);
  close(fd);
}
