/*
 * Component-by-component open without following links. See open_beneath.h.
 */
#include "polyprof/kit/open_beneath.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Turns an O_PATH fd into a readable one for the same inode, if it is a
 * regular file: reopening through /proc/self/fd cannot race with a rename. */
static int reopen_regular(int pfd) {
  struct stat st;
  if (fstat(pfd, &st) < 0 || !S_ISREG(st.st_mode)) {
    close(pfd);
    return -EINVAL;
  }
  char self[48];
  snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
  int fd = open(self, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  int rc = fd < 0 ? -errno : fd;
  close(pfd);
  return rc;
}

int pp_open_beneath(int dirfd, const char *path) {
  if (!path || !path[0]) return -ENOENT;
  size_t len = strlen(path);
  if (len >= PATH_MAX) return -ENAMETOOLONG;
  int cur = dirfd;
  const char *p = path;
  for (;;) {
    while (*p == '/')
      p++;
    const char *slash = strchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    const char *rest = slash;
    while (rest && *rest == '/')
      rest++;
    bool last = !rest || !*rest;
    char comp[NAME_MAX + 1];
    int rc = 0;
    if (n == 0 || n > NAME_MAX)
      rc = n ? -ENAMETOOLONG : -ENOENT;
    else if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
      rc = -EACCES;
    int fd = -1;
    if (rc == 0) {
      memcpy(comp, p, n);
      comp[n] = '\0';
      /* O_PATH opens nothing (no device open, no FIFO wait); a link as a
       * directory component fails with ENOTDIR, as the last one it is
       * refused below as not a regular file */
      fd = openat(cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC | (last ? 0 : O_DIRECTORY));
      if (fd < 0) rc = -errno;
    }
    if (cur != dirfd) close(cur);
    if (rc < 0) return rc;
    if (last) return reopen_regular(fd);
    cur = fd;
    p = rest;
  }
}

int pp_open_in_proc_root(uint32_t pid, const char *path) {
  char root[48];
  snprintf(root, sizeof(root), "/proc/%u/root", pid);
  /* the root link itself is followed on purpose: it is the target's root */
  int dfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return -errno;
  int fd = pp_open_beneath(dfd, path);
  close(dfd);
  return fd;
}
