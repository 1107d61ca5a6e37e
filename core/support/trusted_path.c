/* SPDX-License-Identifier: Apache-2.0 */
/* Ownership and mode check of every component of a path (trusted_path.h). */
#include "support/trusted_path.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_LINKS 32

static bool trusted_owner(uid_t uid) {
  return uid == 0 || uid == geteuid();
}

static int refuse(char *err, size_t errlen, int rc, const char *path, const char *why,
                  const struct stat *st) {
  if (st)
    snprintf(err, errlen, "%s %s (owner uid %u, mode %04o)", path, why, (unsigned)st->st_uid,
             (unsigned)(st->st_mode & 07777));
  else
    snprintf(err, errlen, "%s: %s", path, why);
  return rc;
}

/* One object on the way: owner and write bits. final: the object asked
 * for (no sticky exception). */
static int check_one(const char *path, const struct stat *st, bool final, char *err,
                     size_t errlen) {
  if (!trusted_owner(st->st_uid))
    return refuse(
        err, errlen, -EPERM, path,
        geteuid() == 0 ? "is not owned by root" : "is owned by neither root nor the agent's user",
        st);
  if (S_ISLNK(st->st_mode)) return 0; /* a link's own mode means nothing */
  if (!(st->st_mode & (S_IWGRP | S_IWOTH))) return 0;
  if (!final && S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX) && st->st_uid == 0) return 0;
  return refuse(err, errlen, -EPERM, path,
                (st->st_mode & S_IWOTH) ? "is writable by everyone" : "is writable by its group",
                st);
}

int pp_trusted_path_check(const char *path, bool want_dir, char *err, size_t errlen) {
  if (!path || !*path) return refuse(err, errlen, -EINVAL, "(empty path)", "no path", NULL);
  /* todo: the part still to walk; done: the resolved prefix (no trailing /) */
  char todo[PATH_MAX * 2], done[PATH_MAX] = "";
  if (path[0] == '/') {
    if (snprintf(todo, sizeof(todo), "%s", path) >= (int)sizeof(todo))
      return refuse(err, errlen, -ENAMETOOLONG, path, strerror(ENAMETOOLONG), NULL);
  } else {
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof(cwd))) return refuse(err, errlen, -errno, path, strerror(errno), NULL);
    if (snprintf(todo, sizeof(todo), "%s/%s", cwd, path) >= (int)sizeof(todo))
      return refuse(err, errlen, -ENAMETOOLONG, path, strerror(ENAMETOOLONG), NULL);
  }
  struct stat st;
  if (lstat("/", &st) < 0) return refuse(err, errlen, -errno, "/", strerror(errno), NULL);
  int rc = check_one("/", &st, false, err, errlen);
  if (rc < 0) return rc;
  int links = 0;
  char *p = todo;
  for (;;) {
    while (*p == '/')
      p++;
    if (!*p) break;
    char *end = strchr(p, '/');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    bool last = !end || !end[strspn(end, "/")];
    if (n == 1 && p[0] == '.') {
      p += n;
      continue;
    }
    if (n == 2 && p[0] == '.' && p[1] == '.') {
      char *slash = strrchr(done, '/');
      if (slash) *slash = '\0';
      p += n;
      continue;
    }
    size_t dl = strlen(done);
    if (dl + 1 + n >= sizeof(done))
      return refuse(err, errlen, -ENAMETOOLONG, path, strerror(ENAMETOOLONG), NULL);
    done[dl] = '/';
    memcpy(done + dl + 1, p, n);
    done[dl + 1 + n] = '\0';
    p += n;
    if (lstat(done, &st) < 0) return refuse(err, errlen, -errno, done, strerror(errno), NULL);
    rc = check_one(done, &st, last, err, errlen);
    if (rc < 0) return rc;
    if (S_ISLNK(st.st_mode)) {
      if (++links > MAX_LINKS) return refuse(err, errlen, -ELOOP, path, strerror(ELOOP), NULL);
      char target[PATH_MAX];
      ssize_t tl = readlink(done, target, sizeof(target) - 1);
      if (tl < 0) return refuse(err, errlen, -errno, done, strerror(errno), NULL);
      target[tl] = '\0';
      /* the rest becomes "<target>/<rest>"; an absolute target restarts */
      char rest[PATH_MAX * 2];
      if (snprintf(rest, sizeof(rest), "%s/%s", target, p) >= (int)sizeof(rest))
        return refuse(err, errlen, -ENAMETOOLONG, path, strerror(ENAMETOOLONG), NULL);
      memcpy(todo, rest, strlen(rest) + 1);
      p = todo;
      if (target[0] == '/') {
        done[0] = '\0';
      } else {
        char *slash = strrchr(done, '/');
        if (slash) *slash = '\0';
      }
      continue;
    }
    if (!last && !S_ISDIR(st.st_mode))
      return refuse(err, errlen, -ENOTDIR, done, strerror(ENOTDIR), NULL);
  }
  /* the final object: after links, what done names */
  const char *final = done[0] ? done : "/";
  if (stat(final, &st) < 0) return refuse(err, errlen, -errno, final, strerror(errno), NULL);
  if (want_dir && !S_ISDIR(st.st_mode))
    return refuse(err, errlen, -ENOTDIR, final, "is not a directory", NULL);
  if (!want_dir && !S_ISREG(st.st_mode))
    return refuse(err, errlen, -EACCES, final, "is not a regular file", NULL);
  return check_one(final, &st, true, err, errlen);
}
