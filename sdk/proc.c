/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bounded /proc readers. Contents come from processes we do not control (a
 * comm or cmdline is whatever the process wrote), so every read is capped and
 * every parse tolerates garbage.
 */
#include "polyprof/kit/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int pp_read_file(const char *path, char *buf, size_t cap, size_t *len) {
  if (cap == 0) return -EINVAL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  size_t got = 0;
  while (got + 1 < cap) {
    ssize_t r = read(fd, buf + got, cap - 1 - got);
    if (r < 0) {
      if (errno == EINTR) continue;
      int e = -errno;
      close(fd);
      return e;
    }
    if (r == 0) break;
    got += (size_t)r;
  }
  close(fd);
  buf[got] = '\0';
  if (len) *len = got;
  return 0;
}

static int proc_path(char *out, size_t cap, uint32_t pid, const char *what) {
  int n = snprintf(out, cap, "/proc/%u/%s", pid, what);
  return (n < 0 || (size_t)n >= cap) ? -ENAMETOOLONG : 0;
}

/* /proc read errors for a vanished process come back as ENOENT or ESRCH;
 * callers want one code for "gone". */
static int gone(int rc) {
  return rc == -ENOENT ? -ESRCH : rc;
}

int pp_proc_comm(uint32_t pid, char *buf, size_t len) {
  char path[64];
  proc_path(path, sizeof(path), pid, "comm");
  size_t n = 0;
  int rc = pp_read_file(path, buf, len, &n);
  if (rc < 0) return gone(rc);
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\0'))
    buf[--n] = '\0';
  return 0;
}

static int proc_readlink(uint32_t pid, const char *what, char *buf, size_t len) {
  char path[64];
  if (len == 0) return -EINVAL;
  proc_path(path, sizeof(path), pid, what);
  ssize_t n = readlink(path, buf, len - 1);
  if (n < 0) return gone(-errno);
  buf[n] = '\0';
  return 0;
}

int pp_proc_exe(uint32_t pid, char *buf, size_t len) {
  return proc_readlink(pid, "exe", buf, len);
}

int pp_proc_cwd(uint32_t pid, char *buf, size_t len) {
  return proc_readlink(pid, "cwd", buf, len);
}

int pp_proc_cmdline(uint32_t pid, char *buf, size_t cap, size_t *len) {
  char path[64];
  proc_path(path, sizeof(path), pid, "cmdline");
  int rc = pp_read_file(path, buf, cap, len);
  return rc < 0 ? gone(rc) : 0;
}

int pp_proc_root(uint32_t pid, char *buf, size_t len) {
  int n = snprintf(buf, len, "/proc/%u/root", pid);
  return (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
}

/* Finds "Key:" at a line start in /proc/PID/status and returns the rest. */
const char *pp_proc_status_field(const char *text, const char *key) {
  size_t kl = strlen(key);
  const char *p = text;
  while (p && *p) {
    if (strncmp(p, key, kl) == 0) return p + kl;
    p = strchr(p, '\n');
    if (p) p++;
  }
  return NULL;
}

int pp_proc_ns_pid(uint32_t pid, uint32_t *ns_pid) {
  char path[64], buf[4096];
  proc_path(path, sizeof(path), pid, "status");
  int rc = pp_read_file(path, buf, sizeof(buf), NULL);
  if (rc < 0) return gone(rc);
  const char *v = pp_proc_status_field(buf, "NSpid:");
  if (!v) {
    *ns_pid = pid; /* kernels before 4.1: no pid namespaces info */
    return 0;
  }
  /* the last number on the line is the pid in the innermost namespace */
  unsigned long last = pid;
  const char *end = strchr(v, '\n');
  if (!end) end = v + strlen(v);
  while (v < end) {
    char *next;
    unsigned long x = strtoul(v, &next, 10);
    if (next == v) {
      v++;
      continue;
    }
    last = x;
    v = next;
  }
  if (last == 0 || last > UINT32_MAX) return -EINVAL;
  *ns_pid = (uint32_t)last;
  return 0;
}

/* Fields after the comm in /proc/PID/stat. The comm is in parentheses and may
 * itself contain ") " so we search for the LAST ')'. */
static int stat_fields(const char *path, char *buf, size_t cap, const char **after) {
  int rc = pp_read_file(path, buf, cap, NULL);
  if (rc < 0) return gone(rc);
  const char *rp = strrchr(buf, ')');
  if (!rp || rp[1] != ' ') return -EINVAL;
  *after = rp + 2;
  return 0;
}

/* Returns field number `n` (1-based as in proc(5)); field 3 is state. */
static int stat_field_u64(const char *after, int n, uint64_t *out) {
  const char *p = after;
  for (int field = 3; field < n; field++) {
    p = strchr(p, ' ');
    if (!p) return -EINVAL;
    p++;
  }
  char *end;
  errno = 0;
  unsigned long long v = strtoull(p, &end, 10);
  if (end == p || errno) return -EINVAL;
  *out = v;
  return 0;
}

int pp_proc_start_time(uint32_t pid, uint64_t *start_time) {
  char path[64], buf[1024];
  const char *after;
  proc_path(path, sizeof(path), pid, "stat");
  int rc = stat_fields(path, buf, sizeof(buf), &after);
  if (rc < 0) return rc;
  return stat_field_u64(after, 22, start_time);
}

int pp_proc_start_state(uint32_t pid, uint64_t *start_time, char *state) {
  char path[64], buf[1024];
  const char *after;
  proc_path(path, sizeof(path), pid, "stat");
  int rc = stat_fields(path, buf, sizeof(buf), &after);
  if (rc < 0) return rc;
  *state = after[0];
  return stat_field_u64(after, 22, start_time);
}

bool pp_proc_file_predates(uint32_t pid, const struct stat *sb) {
  uint64_t ticks;
  long hz = sysconf(_SC_CLK_TCK);
  struct timespec real, boot;
  if (pp_proc_start_time(pid, &ticks) < 0 || hz <= 0 || clock_gettime(CLOCK_REALTIME, &real) < 0 ||
      clock_gettime(CLOCK_BOOTTIME, &boot) < 0)
    return false; /* cannot tell: keep the file */
  /* start ticks count from boot (CLOCK_BOOTTIME); mtime is wall-clock time */
  double started = (double)(real.tv_sec - boot.tv_sec) +
                   (double)(real.tv_nsec - boot.tv_nsec) / 1e9 + (double)ticks / (double)hz;
  double written = (double)sb->st_mtim.tv_sec + (double)sb->st_mtim.tv_nsec / 1e9;
  /* a second of slack for clock granularity and wall-clock steps */
  return written < started - 1.0;
}

uint64_t pp_proc_exe_id(uint32_t pid) {
  char path[64];
  struct stat st;
  proc_path(path, sizeof(path), pid, "exe");
  if (stat(path, &st) != 0) return 0;
  return ((uint64_t)st.st_dev << 40) ^ (uint64_t)st.st_ino;
}

int pp_proc_cpu_ticks(uint32_t pid, uint64_t *ticks) {
  char path[64], buf[1024];
  const char *after;
  proc_path(path, sizeof(path), pid, "stat");
  int rc = stat_fields(path, buf, sizeof(buf), &after);
  if (rc < 0) return rc;
  uint64_t ut, st;
  if (stat_field_u64(after, 14, &ut) < 0 || stat_field_u64(after, 15, &st) < 0) return -EINVAL;
  *ticks = ut + st;
  return 0;
}

int pp_proc_state(uint32_t pid, uint32_t tid, char *state) {
  char path[96], buf[1024];
  const char *after;
  if (tid)
    snprintf(path, sizeof(path), "/proc/%u/task/%u/stat", pid, tid);
  else
    proc_path(path, sizeof(path), pid, "stat");
  int rc = stat_fields(path, buf, sizeof(buf), &after);
  if (rc < 0) return rc;
  *state = after[0];
  return 0;
}

int pp_proc_rss_kb(uint32_t pid, uint64_t *kb) {
  char path[64], buf[4096];
  proc_path(path, sizeof(path), pid, "status");
  int rc = pp_read_file(path, buf, sizeof(buf), NULL);
  if (rc < 0) return gone(rc);
  const char *v = pp_proc_status_field(buf, "VmRSS:");
  if (!v) {
    *kb = 0; /* kernel threads and zombies have no VmRSS */
    return 0;
  }
  *kb = strtoull(v, NULL, 10);
  return 0;
}

int pp_proc_same_process(uint32_t pid, uint64_t start_time) {
  uint64_t st;
  if (pp_proc_start_time(pid, &st) < 0) return 0;
  return st == start_time;
}
