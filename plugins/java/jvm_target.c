/*
 * Deciding whether a process is a HotSpot JVM we may attach to.
 *
 * SIGQUIT's default action kills a process (with a core dump), so the
 * attach signal goes only to a process that positively is a running HotSpot
 * JVM able to take it: libjvm.so is mapped, no OpenJ9 library is, and a
 * "Signal Dispatcher" thread exists. That thread is HotSpot's SIGQUIT
 * consumer: it does not exist before the VM has installed its handlers, nor
 * under -Xrs / -XX:+ReduceSignalUsage, which makes it the safest evidence we
 * can get from outside. Everything read from /proc is bounded and treated as
 * hostile text.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "java.h"

static ssize_t read_file(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  size_t n = 0;
  while (n + 1 < cap) {
    ssize_t r = read(fd, buf + n, cap - 1 - n);
    if (r < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      close(fd);
      return -e;
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  close(fd);
  buf[n] = '\0';
  return (ssize_t)n;
}

static int start_time_of(uint32_t pid, uint64_t *st) {
  char path[64], buf[1024];
  snprintf(path, sizeof(path), "/proc/%u/stat", pid);
  if (read_file(path, buf, sizeof(buf)) <= 0) return -ESRCH;
  char *p = strrchr(buf, ')');
  if (!p) return -EINVAL;
  /* field 22 is the 20th after ") " (state is field 3) */
  p += 2;
  for (int f = 3; f < 22 && p; f++) {
    p = strchr(p, ' ');
    if (p) p++;
  }
  if (!p) return -EINVAL;
  *st = strtoull(p, NULL, 10);
  return 0;
}

int java_target_alive(uint32_t pid, uint64_t start_time) {
  uint64_t st;
  return start_time_of(pid, &st) == 0 && st == start_time;
}

static void scan_maps(uint32_t pid, struct java_target_info *ti) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/maps", pid);
  FILE *f = fopen(path, "re");
  if (!f) return;
  char line[1024];
  while (fgets(line, sizeof(line), f)) {
    char *slash = strrchr(line, '/');
    if (!slash) continue;
    char *base = slash + 1;
    base[strcspn(base, "\n")] = '\0';
    if (strcmp(base, "libjvm.so") == 0) {
      ti->has_libjvm = 1;
      char *start = strchr(line, '/');
      snprintf(ti->libjvm_path, sizeof(ti->libjvm_path), "%s", start);
      if (strstr(start, "/j9vm/") || strstr(start, "/openj9/")) ti->openj9 = 1;
    }
    if (strncmp(base, "libj9", 5) == 0 || strncmp(base, "libomrsig", 9) == 0) ti->openj9 = 1;
    if (strncmp(base, "ld-musl", 7) == 0) ti->musl = 1;
  }
  fclose(f);
}

static void scan_threads(uint32_t pid, struct java_target_info *ti) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/task", pid);
  DIR *d = opendir(path);
  if (!d) return;
  struct dirent *de;
  int n = 0;
  while ((de = readdir(d)) && n < 100000) {
    if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
    n++;
    char cpath[320], comm[32];
    snprintf(cpath, sizeof(cpath), "/proc/%u/task/%s/comm", pid, de->d_name);
    if (read_file(cpath, comm, sizeof(comm)) > 0 && strncmp(comm, "Signal Dispatch", 15) == 0) {
      ti->signal_dispatcher = 1;
      break;
    }
  }
  closedir(d);
}

static void scan_cmdline(uint32_t pid, struct java_target_info *ti) {
  char path[64];
  static char buf[256 * 1024];
  snprintf(path, sizeof(path), "/proc/%u/cmdline", pid);
  ssize_t n = read_file(path, buf, sizeof(buf));
  for (ssize_t i = 0; i < n;) {
    const char *a = buf + i;
    size_t l = strnlen(a, (size_t)(n - i));
    if (strcmp(a, "-Xrs") == 0 || strcmp(a, "-XX:+ReduceSignalUsage") == 0) ti->xrs = 1;
    if (strcmp(a, "-XX:+DisableAttachMechanism") == 0) ti->attach_disabled = 1;
    i += (ssize_t)l + 1;
  }
}

static void scan_status(uint32_t pid, struct java_target_info *ti) {
  char path[64], buf[4096];
  snprintf(path, sizeof(path), "/proc/%u/status", pid);
  ti->nspid = pid;
  if (read_file(path, buf, sizeof(buf)) <= 0) return;
  for (char *line = buf; line && *line;) {
    char *next = strchr(line, '\n');
    if (next) *next++ = '\0';
    unsigned long a, b;
    if (sscanf(line, "Uid: %lu %lu", &a, &b) == 2) ti->uid = (uid_t)b; /* effective */
    if (sscanf(line, "Gid: %lu %lu", &a, &b) == 2) ti->gid = (gid_t)b;
    if (strncmp(line, "NStgid:", 7) == 0) {
      /* the last value is the pid as the JVM sees itself */
      char *last = strrchr(line, '\t');
      char *p = last ? last + 1 : line + 7;
      unsigned long v = strtoul(p, NULL, 10);
      if (v > 0 && v < 0x7fffffff) ti->nspid = (uint32_t)v;
    }
    line = next;
  }
}

int java_target_inspect(uint32_t pid, uint64_t start_time, struct java_target_info *ti) {
  memset(ti, 0, sizeof(*ti));
  ti->pid = pid;
  ti->start_time = start_time;
  if (!java_target_alive(pid, start_time)) return -ESRCH;
  scan_status(pid, ti);
  scan_maps(pid, ti);
  scan_cmdline(pid, ti);
  scan_threads(pid, ti);
  /* checked last: everything above described the process we expect */
  return java_target_alive(pid, start_time) ? 0 : -ESRCH;
}

const char *java_target_refusal(const struct java_target_info *ti, int socket_exists) {
  if (!ti->has_libjvm) return "not a HotSpot JVM (libjvm.so not mapped)";
  if (ti->openj9) return "OpenJ9/J9 JVM is not supported";
  if (ti->attach_disabled) return "attach disabled (-XX:+DisableAttachMechanism)";
  if (socket_exists) return NULL; /* no signal needed */
  if (ti->xrs) return "JVM runs with -Xrs and has no attach socket: it cannot be signalled safely";
  if (!ti->signal_dispatcher) return "no Signal Dispatcher thread (not a running HotSpot JVM yet)";
  return NULL;
}

int java_open_target_tmp(uint32_t pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/root", pid);
  int root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return -errno;
  /* one component, not followed if it is a link planted by the target */
  int tmp = openat(root, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  int e = errno;
  close(root);
  return tmp < 0 ? -e : tmp;
}
