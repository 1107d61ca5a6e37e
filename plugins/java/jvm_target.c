/* SPDX-License-Identifier: Apache-2.0 */
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "java.h"

int java_target_alive(uint32_t pid, uint64_t start_time) {
  return pp_proc_same_process(pid, start_time);
}

double java_target_age_ms(uint64_t start_time) {
  long hz = sysconf(_SC_CLK_TCK);
  struct timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return ((double)ts.tv_sec + ts.tv_nsec / 1e9 - (double)start_time / (double)(hz > 0 ? hz : 100)) *
         1e3;
}

static void scan_maps(uint32_t pid, struct java_target_info *ti) {
  struct pp_map *maps = NULL;
  size_t n = 0;
  if (pp_maps_read(pid, 0, 0, &maps, &n) != 0) return;
  for (size_t i = 0; i < n; i++) {
    const char *path = maps[i].path;
    const char *slash = path ? strrchr(path, '/') : NULL;
    if (!slash) continue;
    const char *base = slash + 1;
    if (strcmp(base, "libjvm.so") == 0) {
      ti->has_libjvm = 1;
      snprintf(ti->libjvm_path, sizeof(ti->libjvm_path), "%s", path);
      if (strstr(path, "/j9vm/") || strstr(path, "/openj9/")) ti->openj9 = 1;
    }
    if (strncmp(base, "libj9", 5) == 0 || strncmp(base, "libomrsig", 9) == 0) ti->openj9 = 1;
    if (strncmp(base, "ld-musl", 7) == 0) ti->musl = 1;
  }
  pp_maps_free(maps, n);
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
    if (pp_read_file(cpath, comm, sizeof(comm), NULL) == 0 &&
        strncmp(comm, "Signal Dispatch", 15) == 0) {
      ti->signal_dispatcher = 1;
      break;
    }
  }
  closedir(d);
}

static void scan_cmdline(uint32_t pid, struct java_target_info *ti) {
  static char buf[256 * 1024];
  size_t n = 0;
  if (pp_proc_cmdline(pid, buf, sizeof(buf), &n) != 0) return;
  for (size_t i = 0; i < n;) {
    const char *a = buf + i;
    size_t l = strnlen(a, n - i);
    if (strcmp(a, "-Xrs") == 0 || strcmp(a, "-XX:+ReduceSignalUsage") == 0) ti->xrs = 1;
    if (strcmp(a, "-XX:+DisableAttachMechanism") == 0) ti->attach_disabled = 1;
    i += l + 1;
  }
}

int java_target_inspect(uint32_t pid, uint64_t start_time, struct java_target_info *ti) {
  memset(ti, 0, sizeof(*ti));
  ti->pid = pid;
  ti->start_time = start_time;
  if (!java_target_alive(pid, start_time)) return -ESRCH;
  ti->nspid = pid;
  pp_proc_ns_pid(pid, &ti->nspid);
  if (pp_target_ids(pid, &ti->uid, &ti->gid) != 0) return -ESRCH;
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

const char *java_file_kind(mode_t mode) {
  return S_ISLNK(mode)    ? "a symbolic link"
         : S_ISFIFO(mode) ? "a FIFO"
         : S_ISCHR(mode)  ? "a character device"
         : S_ISBLK(mode)  ? "a block device"
         : S_ISSOCK(mode) ? "a socket"
         : S_ISDIR(mode)  ? "a directory"
                          : "a regular file";
}

int java_open_target_tmp(uint32_t pid, char *reason, size_t cap) {
  /* /tmp itself may be a link inside the JVM's root (HotSpot follows it
   * too); resolved in that root, never outside it */
  return pp_target_open(pid, "/tmp", PP_TF_DIR, NULL, NULL, reason, cap);
}
