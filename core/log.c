/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Agent log: stderr + size-rotated file, gProfiler's line format. One mutex
 * keeps lines whole when inline plugin threads log concurrently.
 */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "support/safe_file.h"

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int stderr_level = PP_LOG_INFO;
static FILE *log_file;
static char *log_path;
static size_t log_max_bytes;
static int log_backups;
static pp_log_forward_fn forward_fn;
static void *forward_ctx;
static pp_log_tap_fn tap_fn;
static void *tap_ctx;
static __thread int in_tap;

/* A worker forked while another thread holds the lock would inherit it
 * locked; take it around fork so the child starts with a usable logger. */
static void before_fork(void) {
  pthread_mutex_lock(&log_lock);
}
static void after_fork(void) {
  pthread_mutex_unlock(&log_lock);
}
__attribute__((constructor)) static void log_register_atfork(void) {
  pthread_atfork(before_fork, after_fork, after_fork);
}

static const char *const level_names[] = {"DEBUG", "INFO", "WARNING", "ERROR"};

const char *pp_log_level_name(int level) {
  if (level < PP_LOG_DEBUG) level = PP_LOG_DEBUG;
  if (level > PP_LOG_ERROR) level = PP_LOG_ERROR;
  return level_names[level];
}

void pp_log_set_forward(pp_log_forward_fn fn, void *ctx) {
  pthread_mutex_lock(&log_lock);
  forward_fn = fn;
  forward_ctx = ctx;
  pthread_mutex_unlock(&log_lock);
}

void pp_log_set_stderr_level(int level) {
  stderr_level = level;
}

static int mkdir_parents(const char *path) {
  char tmp[4096];
  size_t n = strlen(path);
  if (n >= sizeof(tmp)) return -ENAMETOOLONG;
  memcpy(tmp, path, n + 1);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(tmp, 0755) < 0 && errno != EEXIST) return -errno;
    *p = '/';
  }
  return 0;
}

int pp_log_open_file(const char *path, size_t max_bytes, int backups) {
  pp_log_close_file();
  if (!path || !*path) return 0;
  int rc = mkdir_parents(path);
  if (rc < 0) return rc;
  /* the log directory may be shared: no planted symlink or foreign file is
   * ever appended to */
  int fd = pp_safe_open_own(path, true, 0640);
  if (fd < 0) return fd;
  FILE *f = fdopen(fd, "a");
  if (!f) {
    rc = -errno;
    close(fd);
    return rc;
  }
  setvbuf(f, NULL, _IOLBF, 0);
  pthread_mutex_lock(&log_lock);
  log_file = f;
  log_path = strdup(path);
  log_max_bytes = max_bytes;
  log_backups = backups < 0 ? 0 : backups;
  pthread_mutex_unlock(&log_lock);
  return 0;
}

void pp_log_close_file(void) {
  pthread_mutex_lock(&log_lock);
  if (log_file) fclose(log_file);
  log_file = NULL;
  free(log_path);
  log_path = NULL;
  pthread_mutex_unlock(&log_lock);
}

/* Called with log_lock held: path -> path.1 -> ... -> path.N, then reopen. */
static void rotate_locked(void) {
  if (!log_file || !log_path || log_max_bytes == 0) return;
  long pos = ftell(log_file);
  if (pos < 0 || (size_t)pos < log_max_bytes) return;
  char from[4200], to[4200];
  for (int i = log_backups; i >= 1; i--) {
    if (i == 1)
      snprintf(from, sizeof(from), "%s", log_path);
    else
      snprintf(from, sizeof(from), "%s.%d", log_path, i - 1);
    snprintf(to, sizeof(to), "%s.%d", log_path, i);
    rename(from, to);
  }
  fclose(log_file);
  if (log_backups == 0) unlink(log_path);
  int fd = pp_safe_open_own(log_path, true, 0640);
  log_file = fd >= 0 ? fdopen(fd, "a") : NULL;
  if (log_file) setvbuf(log_file, NULL, _IOLBF, 0);
}

void pp_log_msg(int level, const char *tag, const char *msg) {
  pthread_mutex_lock(&log_lock);
  if (forward_fn) {
    pp_log_forward_fn fn = forward_fn;
    void *ctx = forward_ctx;
    pthread_mutex_unlock(&log_lock);
    fn(level, tag, msg, ctx);
    return;
  }
  struct timeval tv;
  gettimeofday(&tv, NULL);
  struct tm tm;
  gmtime_r(&tv.tv_sec, &tm);
  char ts[64];
  size_t n = strftime(ts, sizeof(ts), "%Y-%m-%d %H:%M:%S", &tm);
  snprintf(ts + n, sizeof(ts) - n, ",%03ld", (long)(tv.tv_usec / 1000));
  const char *lv = pp_log_level_name(level);
  if (level >= stderr_level) fprintf(stderr, "[%s] %s: %s: %s\n", ts, lv, tag, msg);
  if (log_file) {
    fprintf(log_file, "[%s] %s: %s: %s\n", ts, lv, tag, msg);
    rotate_locked();
  }
  pp_log_tap_fn tap = tap_fn;
  void *tctx = tap_ctx;
  pthread_mutex_unlock(&log_lock);
  if (tap && !in_tap) {
    in_tap = 1;
    tap(level, tag, msg, tctx);
    in_tap = 0;
  }
}

void pp_log_set_tap(pp_log_tap_fn fn, void *ctx) {
  pthread_mutex_lock(&log_lock);
  tap_fn = fn;
  tap_ctx = ctx;
  pthread_mutex_unlock(&log_lock);
}

void pp_vlog(int level, const char *tag, const char *fmt, va_list ap) {
  char msg[4096];
  vsnprintf(msg, sizeof(msg), fmt, ap);
  pp_log_msg(level, tag, msg);
}

void pp_log(int level, const char *tag, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pp_vlog(level, tag, fmt, ap);
  va_end(ap);
}
