/* SPDX-License-Identifier: Apache-2.0 */
/* Safe creation of the agent's own files (see safe_file.h for the rules). */
#include "support/safe_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HINT_MAX 32

/* 16 hex digits from the kernel's generator; a counter and the clock if it
 * is unavailable, since O_EXCL (not the name) is what makes creation safe
 * and the name only needs to be hard to occupy in advance. */
static void random_hex(char out[17]) {
  uint64_t v = 0;
  if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
    static uint64_t counter;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    v = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40) ^
        ++counter * 0x9e3779b97f4a7c15ull;
  }
  snprintf(out, 17, "%016llx", (unsigned long long)v);
}

/* dir and base of path ("." for a bare name). -ENAMETOOLONG if they do not
 * fit. */
static int split_path(const char *path, char *dir, size_t dirlen, const char **base) {
  const char *slash = strrchr(path, '/');
  if (!slash) {
    *base = path;
    return snprintf(dir, dirlen, ".") >= (int)dirlen ? -ENAMETOOLONG : 0;
  }
  *base = slash + 1;
  size_t n = slash == path ? 1 : (size_t)(slash - path);
  if (n >= dirlen) return -ENAMETOOLONG;
  memcpy(dir, path, n);
  dir[n] = '\0';
  return 0;
}

static int temp_name(const char *dir, const char *hint, char *tmp, size_t tmplen) {
  char rnd[17];
  random_hex(rnd);
  /* the hint is cut so a long final name still leaves room for the suffix */
  int n = snprintf(tmp, tmplen, "%s/" PP_SAFE_TEMP_PREFIX "%.*s.%s", dir, HINT_MAX,
                   hint ? hint : "", rnd);
  return n < 0 || (size_t)n >= tmplen ? -ENAMETOOLONG : 0;
}

int pp_safe_create_temp(const char *dir, const char *hint, mode_t mode, char *tmp, size_t tmplen) {
  for (int attempt = 0; attempt < 16; attempt++) {
    int rc = temp_name(dir, hint, tmp, tmplen);
    if (rc < 0) return rc;
    int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd >= 0) return fd;
    if (errno != EEXIST) return -errno;
  }
  return -EEXIST;
}

int pp_safe_fsync_dir_of(const char *path, bool is_dir) {
  char dir[PATH_MAX];
  const char *base;
  if (is_dir) {
    if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir)) return -ENAMETOOLONG;
  } else if (split_path(path, dir, sizeof(dir), &base) < 0) {
    return -ENAMETOOLONG;
  }
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -errno;
  /* EINVAL: a filesystem that cannot sync directories (some FUSE, procfs
   * style mounts); the rename itself happened. */
  int rc = fsync(fd) < 0 && errno != EINVAL && errno != EROFS ? -errno : 0;
  close(fd);
  return rc;
}

int pp_safe_rename_into_place(const char *tmp, const char *final) {
  if (rename(tmp, final) < 0) {
    int rc = -errno;
    unlink(tmp);
    return rc;
  }
  return pp_safe_fsync_dir_of(final, false);
}

int pp_safe_write_file(const char *final, mode_t mode, pp_safe_write_fn fn, void *ctx) {
  char dir[PATH_MAX], tmp[PATH_MAX];
  const char *base;
  if (split_path(final, dir, sizeof(dir), &base) < 0 || !*base) return -ENAMETOOLONG;
  int fd = pp_safe_create_temp(dir, base, mode, tmp, sizeof(tmp));
  if (fd < 0) return fd;
  FILE *f = fdopen(fd, "w");
  if (!f) {
    int rc = -errno;
    close(fd);
    unlink(tmp);
    return rc;
  }
  setvbuf(f, NULL, _IOFBF, 1 << 16);
  errno = 0;
  int rc = fn(f, ctx);
  int e = errno;
  if (rc > 0) rc = -(e ? e : EIO); /* a writer that returned a positive code */
  if (rc == 0 && (fflush(f) != 0 || ferror(f))) rc = -(errno ? errno : EIO);
  if (fclose(f) != 0 && rc == 0) rc = -(errno ? errno : EIO);
  if (rc < 0) {
    unlink(tmp);
    return rc;
  }
  return pp_safe_rename_into_place(tmp, final);
}

int pp_safe_replace_symlink(const char *dir, const char *target, const char *link_name) {
  char tmp[PATH_MAX], link[PATH_MAX];
  if (snprintf(link, sizeof(link), "%s/%s", dir, link_name) >= (int)sizeof(link))
    return -ENAMETOOLONG;
  for (int attempt = 0; attempt < 16; attempt++) {
    int rc = temp_name(dir, link_name, tmp, sizeof(tmp));
    if (rc < 0) return rc;
    /* symlink() never follows an existing name: EEXIST is someone else's */
    if (symlink(target, tmp) == 0) return pp_safe_rename_into_place(tmp, link);
    if (errno != EEXIST) return -errno;
  }
  return -EEXIST;
}

bool pp_safe_is_temp_name(const char *name) {
  return strncmp(name, PP_SAFE_TEMP_PREFIX, strlen(PP_SAFE_TEMP_PREFIX)) == 0;
}

size_t pp_safe_sweep_temps(const char *dir, unsigned min_age_s) {
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) return 0;
  DIR *d = fdopendir(dfd);
  if (!d) {
    close(dfd);
    return 0;
  }
  time_t now = time(NULL);
  uid_t me = geteuid();
  size_t removed = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (!pp_safe_is_temp_name(de->d_name)) continue;
    struct stat st;
    if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) continue;
    if (st.st_uid != me || !(S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))) continue;
    if (now - st.st_mtime < (time_t)min_age_s) continue; /* maybe a live writer's */
    if (unlinkat(dfd, de->d_name, 0) == 0) removed++;
  }
  closedir(d);
  return removed;
}

int pp_safe_check_dir(const char *dir, char *err, size_t errlen) {
  struct stat st;
  if (lstat(dir, &st) < 0) {
    int e = errno;
    snprintf(err, errlen, "%s: %s", dir, strerror(e));
    return -e;
  }
  if (S_ISLNK(st.st_mode) && stat(dir, &st) < 0) {
    int e = errno;
    snprintf(err, errlen, "%s: %s", dir, strerror(e));
    return -e;
  }
  if (!S_ISDIR(st.st_mode)) {
    snprintf(err, errlen, "%s: not a directory", dir);
    return -ENOTDIR;
  }
  uid_t me = geteuid();
  if (st.st_uid != me && st.st_uid != 0) {
    snprintf(err, errlen, "%s is owned by uid %u, not by the agent's user (uid %u) or root", dir,
             (unsigned)st.st_uid, (unsigned)me);
    return -EPERM;
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    snprintf(err, errlen, "%s is writable by %s (mode %04o): others could replace its files", dir,
             (st.st_mode & S_IWOTH) ? "everyone" : "its group", (unsigned)(st.st_mode & 07777));
    return -EPERM;
  }
  return 0;
}

/* The existing file at path, if it is one we may write: regular, ours, one
 * link (a hard link to a host file would be written through). */
static int open_existing(const char *path, int flags) {
  int fd = open(path, O_RDWR | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC | flags);
  if (fd < 0) return errno == ELOOP ? -EPERM : -errno;
  struct stat st;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink != 1) {
    close(fd);
    return -EPERM;
  }
  /* O_NONBLOCK was only for opening safely (a FIFO must not block us) */
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  return fd;
}

int pp_safe_open_own(const char *path, bool append, mode_t mode) {
  int flags = append ? O_APPEND : 0;
  char dir[PATH_MAX], tmp[PATH_MAX];
  const char *base;
  if (split_path(path, dir, sizeof(dir), &base) < 0 || !*base) return -ENAMETOOLONG;
  for (int attempt = 0; attempt < 8; attempt++) {
    int fd = open_existing(path, flags);
    if (fd != -ENOENT) return fd;
    fd = pp_safe_create_temp(dir, base, mode, tmp, sizeof(tmp));
    if (fd < 0) return fd;
    /* link() fails if the name appeared meanwhile: then open that one */
    int rc = link(tmp, path) < 0 ? -errno : 0;
    unlink(tmp);
    if (rc == 0) {
      pp_safe_fsync_dir_of(path, false);
      if (append) {
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0) fcntl(fd, F_SETFL, fl | O_APPEND);
      }
      return fd;
    }
    close(fd);
    if (rc != -EEXIST) return rc;
  }
  return -EEXIST;
}

int pp_safe_read_exact(int fd, void *buf, size_t len) {
  unsigned char *p = buf;
  while (len) {
    ssize_t r = read(fd, p, len);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -errno;
    if (r == 0) return -EIO;
    p += r;
    len -= (size_t)r;
  }
  return 0;
}

int pp_safe_write_all(int fd, const void *buf, size_t len) {
  const unsigned char *p = buf;
  while (len) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return -errno;
    if (w == 0) return -EIO;
    p += w;
    len -= (size_t)w;
  }
  return 0;
}
