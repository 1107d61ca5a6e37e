/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Opening what a target names, inside its root. See target_files.h.
 */
#include "polyprof/kit/target_files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "polyprof/kit/proc.h"

#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#ifndef RESOLVE_NO_MAGICLINKS
#define RESOLVE_NO_MAGICLINKS 0x02
#endif
#ifndef RESOLVE_IN_ROOT
#define RESOLVE_IN_ROOT 0x10
#endif

/* struct open_how of openat2(2), declared here so older headers build */
struct pp_open_how {
  uint64_t flags, mode, resolve;
};

static void say(char *reason, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(char *reason, size_t cap, const char *fmt, ...) {
  if (!reason || !cap) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reason, cap, fmt, ap);
  va_end(ap);
}

/* -1: not known yet, 0: the kernel has no openat2, 1: it has */
static int have_openat2 = -1;

/* An O_PATH descriptor of `path` resolved inside the root `rootfd`, links
 * resolved in that root (openat2), or -ENOSYS where the kernel lacks it. */
static int resolve_in_root(int rootfd, const char *path) {
  if (have_openat2 == 0) return -ENOSYS;
  struct pp_open_how how = {.flags = O_PATH | O_CLOEXEC,
                            .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
  long fd = syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
  if (fd < 0) {
    int e = errno;
    if (e == ENOSYS || (e == EINVAL && have_openat2 < 0)) {
      have_openat2 = 0; /* seccomp or an old kernel: walk instead */
      return -ENOSYS;
    }
    return -e;
  }
  have_openat2 = 1;
  return (int)fd;
}

/* The walk for kernels without openat2: no link may be followed, which is
 * stricter (a link in a container's /usr/lib is refused), never looser.
 * Every directory is opened O_PATH | O_NOFOLLOW | O_DIRECTORY; the last
 * component O_PATH | O_NOFOLLOW, whatever it is (the caller checks its
 * kind: a socket, a directory or a regular file), except a link. */
static int walk_in_root(int rootfd, const char *path) {
  int cur = rootfd;
  const char *p = path;
  for (;;) {
    while (*p == '/')
      p++;
    if (!*p) return cur == rootfd ? fcntl(rootfd, F_DUPFD_CLOEXEC, 0) : cur;
    size_t n = strcspn(p, "/");
    const char *rest = p + n;
    while (*rest == '/')
      rest++;
    bool last = !*rest;
    char comp[NAME_MAX + 1];
    int rc = 0;
    if (n > NAME_MAX)
      rc = -ENAMETOOLONG;
    else if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
      rc = -EACCES;
    int fd = -1;
    if (rc == 0) {
      memcpy(comp, p, n);
      comp[n] = '\0';
      fd = openat(cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC | (last ? 0 : O_DIRECTORY));
      if (fd < 0) rc = -errno;
    }
    if (cur != rootfd) close(cur);
    if (rc < 0) return rc;
    if (last) {
      struct stat st;
      if (fstat(fd, &st) == 0 && S_ISLNK(st.st_mode)) {
        close(fd);
        return -ELOOP;
      }
      return fd;
    }
    cur = fd;
    p = rest;
  }
}

static int open_root(uint32_t pid) {
  char root[48];
  snprintf(root, sizeof(root), "/proc/%u/root", pid);
  /* the root link itself is followed on purpose: it is the target's root */
  int fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? -ESRCH : -errno;
  return fd;
}

/* O_PATH handle of path in pid's root, or -errno */
static int lookup(uint32_t pid, const char *path) {
  if (!path || path[0] != '/') return -EINVAL;
  if (strlen(path) >= PATH_MAX) return -ENAMETOOLONG;
  int rootfd = open_root(pid);
  if (rootfd < 0) return rootfd;
  int fd = resolve_in_root(rootfd, path);
  if (fd == -ENOSYS) fd = walk_in_root(rootfd, path);
  close(rootfd);
  return fd;
}

int pp_target_ids(uint32_t pid, uid_t *uid, gid_t *gid) {
  char path[48], buf[4096];
  snprintf(path, sizeof(path), "/proc/%u/status", pid);
  int rc = pp_read_file(path, buf, sizeof(buf), NULL);
  if (rc < 0) return rc == -ENOENT ? -ESRCH : rc;
  /* "Uid:\treal\teffective\tsaved\tfs" */
  const char *u = pp_proc_status_field(buf, "Uid:");
  const char *g = pp_proc_status_field(buf, "Gid:");
  unsigned long ru, eu, rg, eg;
  if (!u || !g || sscanf(u, "%lu %lu", &ru, &eu) != 2 || sscanf(g, "%lu %lu", &rg, &eg) != 2)
    return -EINVAL;
  if (uid) *uid = (uid_t)eu;
  if (gid) *gid = (gid_t)eg;
  return 0;
}

static const char *kind_name(mode_t m) {
  return S_ISFIFO(m)   ? "a FIFO"
         : S_ISCHR(m)  ? "a character device"
         : S_ISBLK(m)  ? "a block device"
         : S_ISSOCK(m) ? "a socket"
         : S_ISDIR(m)  ? "a directory"
         : S_ISLNK(m)  ? "a symbolic link"
         : S_ISREG(m)  ? "a regular file"
                       : "of an unknown kind";
}

/* Checks an O_PATH handle against what the caller expects; 0 or -errno */
static int check(uint32_t pid, int pfd, const char *path, unsigned flags,
                 const struct pp_file_id *id, struct stat *st, char *reason, size_t cap) {
  if (fstat(pfd, st) < 0) return -errno;
  bool want_dir = flags & PP_TF_DIR;
  if (want_dir ? !S_ISDIR(st->st_mode) : !S_ISREG(st->st_mode)) {
    say(reason, cap, "%.200s in the process's root is %s", path,
        want_dir && !S_ISDIR(st->st_mode) ? "not a directory" : kind_name(st->st_mode));
    return -EINVAL;
  }
  if (id && (major(st->st_dev) != id->dev_major || minor(st->st_dev) != id->dev_minor ||
             st->st_ino != id->inode)) {
    say(reason, cap, "%.200s in the process's root is not the file it maps (inode %llu, maps %llu)",
        path, (unsigned long long)st->st_ino, (unsigned long long)id->inode);
    return -EXDEV;
  }
  if (flags & PP_TF_READABLE) {
    uid_t uid;
    gid_t gid;
    int rc = pp_target_ids(pid, &uid, &gid);
    if (rc < 0) return rc;
    bool can = uid == 0 || (st->st_mode & S_IROTH) ||
               (st->st_uid == uid && (st->st_mode & S_IRUSR)) ||
               (st->st_gid == gid && (st->st_mode & S_IRGRP));
    if (!can) {
      say(reason, cap, "%.200s (uid %u, mode %03o) is not readable by the process (uid %u)", path,
          (unsigned)st->st_uid, (unsigned)(st->st_mode & 0777), (unsigned)uid);
      return -EACCES;
    }
  }
  bool owned =
      (flags & PP_TF_OWNED) || (!want_dir && !id && !(flags & (PP_TF_ANY_OWNER | PP_TF_READABLE)));
  if (owned) {
    uid_t uid;
    int rc = pp_target_ids(pid, &uid, NULL);
    if (rc < 0) return rc;
    if (st->st_uid != uid) {
      say(reason, cap, "%.200s is owned by uid %u, not by the process's uid %u", path,
          (unsigned)st->st_uid, (unsigned)uid);
      return -EPERM;
    }
  }
  return 0;
}

static int reopen(int pfd, bool dir) {
  char self[48];
  snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
  int fd = open(self, O_RDONLY | O_NONBLOCK | O_CLOEXEC | (dir ? O_DIRECTORY : 0));
  return fd < 0 ? -errno : fd;
}

int pp_open_beneath(int dirfd, const char *path) {
  if (!path || !path[0]) return -ENOENT;
  if (strlen(path) >= PATH_MAX) return -ENAMETOOLONG;
  int pfd = walk_in_root(dirfd, path);
  if (pfd < 0) return pfd;
  struct stat st;
  int rc = fstat(pfd, &st) < 0 ? -errno : !S_ISREG(st.st_mode) ? -EINVAL : reopen(pfd, false);
  close(pfd);
  return rc;
}

int pp_open_host_file(const char *path, const struct stat *same, struct stat *st) {
  int pfd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (pfd < 0) return -errno;
  struct stat sb, *s = st ? st : &sb;
  int rc;
  if (fstat(pfd, s) < 0)
    rc = -errno;
  else if (!S_ISREG(s->st_mode))
    rc = -EINVAL;
  else if (same && (s->st_dev != same->st_dev || s->st_ino != same->st_ino))
    rc = -ESTALE;
  else
    rc = reopen(pfd, false);
  close(pfd);
  return rc;
}

int pp_target_open(uint32_t pid, const char *path, unsigned flags, const struct pp_file_id *id,
                   struct stat *st, char *reason, size_t cap) {
  bool dir = flags & PP_TF_DIR;
  int pfd = lookup(pid, path);
  if (pfd < 0) {
    if (pfd == -ELOOP || pfd == -EXDEV || pfd == -EACCES || pfd == -ENOTDIR)
      say(reason, cap, "%.200s leaves the process's root or crosses a link: %s", path ? path : "",
          strerror(-pfd));
    else if (pfd == -EINVAL)
      say(reason, cap, "%.200s: a symbolic link at the end of the path", path ? path : "");
    else
      say(reason, cap, "cannot open %.200s in the process's root: %s", path ? path : "",
          strerror(-pfd));
    return pfd;
  }
  struct stat sb;
  int rc = check(pid, pfd, path, flags, id, st ? st : &sb, reason, cap);
  if (rc == 0) {
    rc = reopen(pfd, dir);
    if (rc < 0) say(reason, cap, "cannot open %.200s: %s", path, strerror(-rc));
  }
  close(pfd);
  return rc;
}

int pp_target_open_mapped(uint32_t pid, const char *path, const struct pp_file_id *id,
                          uint64_t start, uint64_t end, char *reason, size_t cap) {
  char clean[PATH_MAX];
  snprintf(clean, sizeof(clean), "%s", path ? path : "");
  static const char deleted[] = " (deleted)";
  size_t pl = strlen(clean), dl = sizeof(deleted) - 1;
  if (pl > dl && strcmp(clean + pl - dl, deleted) == 0) clean[pl - dl] = '\0';
  char why[256] = "";
  int fd = -ENOENT;
  if (clean[0] == '/') fd = pp_target_open(pid, clean, 0, id, NULL, why, sizeof(why));
  if (fd >= 0) return fd;
  /* the mapping's own file: exact by construction (needs CAP_SYS_ADMIN) */
  char mf[96];
  snprintf(mf, sizeof(mf), "/proc/%u/map_files/%llx-%llx", pid, (unsigned long long)start,
           (unsigned long long)end);
  int pfd = open(mf, O_PATH | O_CLOEXEC);
  if (pfd >= 0) {
    struct stat st;
    if (fstat(pfd, &st) == 0 && S_ISREG(st.st_mode)) {
      int rfd = reopen(pfd, false);
      close(pfd);
      if (rfd >= 0) return rfd;
    } else {
      close(pfd);
    }
  }
  if (why[0])
    say(reason, cap, "%s", why);
  else
    say(reason, cap, "cannot open %.200s: %s", clean, strerror(-fd));
  return fd;
}

int pp_target_socket(uint32_t pid, const char *path, char *reason, size_t cap) {
  int pfd = lookup(pid, path);
  if (pfd < 0) {
    say(reason, cap, "cannot find %.200s in the process's root: %s", path ? path : "",
        strerror(-pfd));
    return pfd;
  }
  struct stat st;
  int rc = 0;
  uid_t uid;
  if (fstat(pfd, &st) < 0) {
    rc = -errno;
  } else if (!S_ISSOCK(st.st_mode)) {
    say(reason, cap, "%.200s in the process's root is %s, not a socket", path,
        kind_name(st.st_mode));
    rc = -EINVAL;
  } else if ((rc = pp_target_ids(pid, &uid, NULL)) == 0 && st.st_uid != uid) {
    say(reason, cap, "socket %.200s is owned by uid %u, not by the process's uid %u", path,
        (unsigned)st.st_uid, (unsigned)uid);
    rc = -EPERM;
  }
  if (rc < 0) {
    close(pfd);
    return rc;
  }
  return pfd;
}

int pp_target_connect_unix(uint32_t pid, const char *path, char *reason, size_t cap) {
  int pfd = pp_target_socket(pid, path, reason, cap);
  if (pfd < 0) return pfd;
  /* connecting through the O_PATH handle reaches exactly the inode that
   * was checked, whatever the path names by now */
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d", pfd);
  int rc = 0;
  /* non-blocking: a target whose listen backlog is full (or that never
   * accepts) answers EAGAIN at once instead of holding the caller */
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
    rc = -errno;
    if (rc == -EAGAIN)
      say(reason, cap, "%.200s: the process accepts no connection now (listen queue full)", path);
    else
      say(reason, cap, "cannot connect to %.200s: %s", path, strerror(-rc));
    if (s >= 0) close(s);
    s = -1;
  } else {
    fcntl(s, F_SETFL, fcntl(s, F_GETFL) & ~O_NONBLOCK); /* the caller's own I/O blocks as usual */
  }
  close(pfd);
  return rc < 0 ? rc : s;
}
