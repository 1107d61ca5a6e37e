/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Output files (docs/formats.md): <dir>/profile_<UTC end>.<ext>,
 * a "last_*" symlink to the newest one, and --rotating-output.
 *
 * Crash safety and hostile neighbours: every file and the symlink are made
 * by support/safe_file (a fresh temp name created with O_EXCL|O_NOFOLLOW,
 * renamed into place, the directory fsynced), so readers only ever see
 * complete files and nothing planted in the directory is written through.
 * The directory itself must be the agent's (or root's) and not writable by
 * group or others, else someone could swap files between our steps.
 *
 * The data file itself is not fsynced. A profile is telemetry that the next
 * session replaces within a minute; an fsync per file on a busy ext4 host
 * waits for a journal commit carrying everybody's dirty data, which the
 * session loop and the profiled workload would pay for. The directory fsync
 * after the rename is cheap (metadata only) and makes the new name durable.
 * Write errors are still caught: fflush/fclose results are checked (ENOSPC
 * and EDQUOT at write time with delayed allocation, NFS at close), and a
 * failed file is removed, never renamed into place.
 */
#include "output/files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "output/formats.h"
#include "polyprof/plugin.h" /* PP_PRINTF */
#include "support/safe_file.h"

static int set_err(char *err, size_t errlen, int rc, const char *fmt, ...) PP_PRINTF(4, 5);
static int set_err(char *err, size_t errlen, int rc, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return rc;
}

/* mkdir -p: each missing component with 0755; existing non-directories are
 * an error (ENOTDIR from mkdir/stat says which). */
static int mkdir_p(const char *dir, char *err, size_t errlen) {
  char path[PATH_MAX];
  size_t n = strlen(dir);
  if (n == 0) return set_err(err, errlen, -EINVAL, "output directory: empty path");
  if (n >= sizeof(path))
    return set_err(err, errlen, -ENAMETOOLONG, "output directory %.64s...: %s", dir,
                   strerror(ENAMETOOLONG));
  memcpy(path, dir, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (path[i] != '/' && path[i] != '\0') continue;
    char saved = path[i];
    path[i] = '\0';
    if (mkdir(path, 0755) < 0 && errno != EEXIST) {
      int e = errno;
      return set_err(err, errlen, -e, "output directory %s: cannot create %s: %s", dir, path,
                     strerror(e));
    }
    path[i] = saved;
  }
  struct stat st;
  if (stat(dir, &st) < 0) {
    int e = errno;
    return set_err(err, errlen, -e, "output directory %s: %s", dir, strerror(e));
  }
  if (!S_ISDIR(st.st_mode))
    return set_err(err, errlen, -ENOTDIR, "output directory %s: %s", dir, strerror(ENOTDIR));
  return 0;
}

/* Leftover temp files younger than this may belong to a `polyprof convert`
 * writing into the same directory right now. */
#define SWEEP_MIN_AGE_S 60

int pp_output_check_dir(const char *dir, char *err, size_t errlen) {
  if (!dir) return set_err(err, errlen, -EINVAL, "output directory: not set");
  int rc = mkdir_p(dir, err, errlen);
  if (rc < 0) return rc;
  char why[PATH_MAX + 160];
  rc = pp_safe_check_dir(dir, why, sizeof(why));
  if (rc < 0) return set_err(err, errlen, rc, "output directory %s", why);
  /* access(W_OK) would say yes to root on a read-only mount and no in ACL
   * cases; creating a file is the only real proof. */
  char probe[PATH_MAX];
  int fd = pp_safe_create_temp(dir, "probe", 0600, probe, sizeof(probe));
  if (fd < 0)
    return set_err(err, errlen, fd, "output directory %s is not writable: %s", dir, strerror(-fd));
  close(fd);
  unlink(probe);
  size_t swept = pp_safe_sweep_temps(dir, SWEEP_MIN_AGE_S);
  if (swept && err && errlen)
    snprintf(err, errlen, "output directory %s: removed %zu temporary file(s) left by a crash", dir,
             swept);
  return 0;
}

void pp_output_stem(time_t end, char *buf, size_t len) {
  struct tm tm;
  if (!buf || !len) return;
  if (!gmtime_r(&end, &tm) || strftime(buf, len, "profile_%Y-%m-%dT%H:%M:%S", &tm) == 0)
    buf[0] = '\0';
}

static bool stem_taken(const char *dir, const char *stem) {
  char path[4096];
  for (size_t i = 0; i < PP_OUTPUT_FORMAT_COUNT; i++) {
    snprintf(path, sizeof(path), "%s/%s%s", dir, stem, pp_output_formats[i].ext);
    if (access(path, F_OK) == 0) return true;
  }
  return false;
}

void pp_output_session_stem(const char *dir, time_t end, char *buf, size_t len) {
  pp_output_stem(end, buf, len);
  if (!dir || !buf[0]) return;
  char base[64];
  snprintf(base, sizeof(base), "%s", buf);
  /* bounded: sessions are at least a second long, so a handful at most */
  for (int n = 2; n < 100 && stem_taken(dir, buf); n++)
    snprintf(buf, len, "%s_%d", base, n);
}

static int write_file(const char *final, pp_output_write_fn fn, void *ctx, char *err,
                      size_t errlen) {
  int rc = pp_safe_write_file(final, 0644, fn, ctx);
  if (rc < 0) return set_err(err, errlen, rc, "writing %s failed: %s", final, strerror(-rc));
  return 0;
}

/* Point dir/link_name at `base` (a name in the same directory). *prev gets
 * the old target as read before (empty if none). */
static int repoint_link(const char *dir, const char *link_name, const char *base, char *prev,
                        size_t prevlen, char *err, size_t errlen) {
  char link[PATH_MAX];
  if (snprintf(link, sizeof(link), "%s/%s", dir, link_name) >= (int)sizeof(link))
    return set_err(err, errlen, -ENAMETOOLONG, "%s/%s: %s", dir, link_name, strerror(ENAMETOOLONG));
  ssize_t n = readlink(link, prev, prevlen - 1);
  prev[n > 0 ? n : 0] = '\0';
  if (n >= (ssize_t)prevlen - 1) prev[0] = '\0'; /* truncated: not a name we wrote */
  int rc = pp_safe_replace_symlink(dir, base, link_name);
  if (rc < 0) return set_err(err, errlen, rc, "cannot replace %s: %s", link, strerror(-rc));
  return 0;
}

/* --rotating-output: remove the file the link pointed to before, but only
 * a regular file of this directory named by a plain basename (what we and
 * gProfiler write), never the new file; anything else someone pointed the
 * link at is left alone. */
static void remove_previous(const char *dir, const char *prev, const char *base) {
  if (!prev[0] || strchr(prev, '/') || strcmp(prev, base) == 0 || prev[0] == '.') return;
  char path[PATH_MAX];
  struct stat st;
  if (snprintf(path, sizeof(path), "%s/%s", dir, prev) >= (int)sizeof(path)) return;
  if (lstat(path, &st) == 0 && S_ISREG(st.st_mode)) unlink(path);
}

int pp_output_publish(const char *dir, const char *stem, const char *ext, const char *link_name,
                      bool rotating, pp_output_write_fn fn, void *ctx, char *err, size_t errlen) {
  if (err && errlen) err[0] = '\0';
  if (!dir || !stem || !*stem || !fn || strchr(stem, '/') || (ext && strchr(ext, '/')) ||
      (link_name && (!*link_name || strchr(link_name, '/'))))
    return set_err(err, errlen, -EINVAL, "output: invalid file name");
  char base[NAME_MAX + 1], final[PATH_MAX];
  if (snprintf(base, sizeof(base), "%s%s", stem, ext ? ext : "") >= (int)sizeof(base) ||
      snprintf(final, sizeof(final), "%s/%s", dir, base) >= (int)sizeof(final))
    return set_err(err, errlen, -ENAMETOOLONG, "%s/%s%s: %s", dir, stem, ext ? ext : "",
                   strerror(ENAMETOOLONG));
  int rc = write_file(final, fn, ctx, err, errlen);
  if (rc < 0 || !link_name) return rc;
  char prev[PATH_MAX];
  /* If re-pointing fails, the new file is complete and stays (it is data
   * collected, and the caller logs the error); the old link is untouched. */
  rc = repoint_link(dir, link_name, base, prev, sizeof(prev), err, errlen);
  if (rc < 0) return rc;
  if (rotating) remove_previous(dir, prev, base);
  return 0;
}
