/*
 * Files the plugin shares with a JVM: the agent library it loads and the
 * result files the agent writes.
 *
 * A JVM in another mount namespace (a container) cannot see our agent at
 * our path, so the library is copied once into the container's /tmp under
 * a versioned name, /tmp/polyprof-<version>/libpolyprof-jvmti.so, and that
 * path is what `load` gets: a later session passes the same path again and
 * dlopen in the JVM hands back the copy already loaded. An existing copy is
 * never rewritten while a JVM may have it mapped; one that differs from ours
 * (an older build) is replaced by a rename, which leaves mapped copies
 * intact. The target's /tmp is hostile ground for root: everything is done
 * relative to a directory fd, with O_NOFOLLOW / O_EXCL, and our directory
 * must be owned by root and not writable by others.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "java.h"

#define AGENT_NAME "libpolyprof-jvmti.so"
#define AGENT_DIR "polyprof-" POLYPROF_VERSION

int java_agent_host_path(const char *configured, char *out, size_t len) {
  if (configured && *configured) {
    snprintf(out, len, "%s", configured);
  } else {
    Dl_info info;
    if (!dladdr((void *)java_agent_host_path, &info) || !info.dli_fname) return -ENOENT;
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s", info.dli_fname);
    char real[4096];
    const char *dir = dirname(realpath(tmp, real) ? real : tmp);
    snprintf(out, len, "%s/java-agent/" AGENT_NAME, dir);
  }
  return access(out, R_OK) == 0 ? 0 : -errno;
}

static int same_mount_ns(uint32_t pid) {
  char a[64], b[64], p[64];
  snprintf(p, sizeof(p), "/proc/%u/ns/mnt", pid);
  ssize_t n1 = readlink("/proc/self/ns/mnt", a, sizeof(a) - 1);
  ssize_t n2 = readlink(p, b, sizeof(b) - 1);
  if (n1 <= 0 || n2 <= 0) return 0;
  a[n1] = b[n2] = '\0';
  return strcmp(a, b) == 0;
}

static char *slurp_fd(int fd, size_t max, size_t *len) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > max) return NULL;
  char *buf = malloc((size_t)st.st_size + 1);
  if (!buf) return NULL;
  size_t n = 0;
  while (n < (size_t)st.st_size) {
    ssize_t r = read(fd, buf + n, (size_t)st.st_size - n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    n += (size_t)r;
  }
  buf[n] = '\0';
  *len = n;
  return buf;
}

/* Names in the target's /tmp must not be guessable by its other users (they
 * could pre-create them). getrandom() of a few bytes does not fail once the
 * pool is initialised, but if it ever does, fall back to the clock mixed with
 * our pid rather than a constant name; O_EXCL|O_NOFOLLOW still refuse a
 * planted file, so the worst case is a failed attach, not a hijack. */
static uint64_t unpredictable_u64(void) {
  uint64_t r = 0;
  if (getrandom(&r, sizeof(r), GRND_NONBLOCK) == (ssize_t)sizeof(r)) return r;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  r = ((uint64_t)ts.tv_nsec << 32) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 16);
  r ^= r >> 29;
  r *= 0xbf58476d1ce4e5b9ull;
  return r ^ (r >> 32);
}

int java_agent_target_path(const char *host_path, uint32_t pid, char *out, size_t len, char *err,
                           size_t errlen) {
  if (same_mount_ns(pid)) {
    snprintf(out, len, "%s", host_path);
    return 0;
  }
  int src = open(host_path, O_RDONLY | O_CLOEXEC);
  size_t src_len = 0;
  char *lib = src >= 0 ? slurp_fd(src, 64u << 20, &src_len) : NULL;
  if (src >= 0) close(src);
  if (!lib) {
    snprintf(err, errlen, "cannot read %s", host_path);
    return -EIO;
  }
  int rc = -EIO;
  int tmp = java_open_target_tmp(pid), dir = -1, fd = -1;
  if (tmp < 0) {
    snprintf(err, errlen, "cannot open the JVM's /tmp: %s", strerror(-tmp));
    free(lib);
    return tmp;
  }
  if (mkdirat(tmp, AGENT_DIR, 0755) != 0 && errno != EEXIST) {
    snprintf(err, errlen, "cannot create /tmp/" AGENT_DIR " in the JVM's root: %s",
             strerror(errno));
    goto out;
  }
  dir = openat(tmp, AGENT_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (dir < 0 || fstat(dir, &st) != 0 || st.st_uid != 0 || (st.st_mode & 022)) {
    snprintf(err, errlen, "/tmp/" AGENT_DIR " in the JVM's root is not a root-owned directory");
    goto out;
  }
  fchmod(dir, 0755);
  int have = openat(dir, AGENT_NAME, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (have >= 0) {
    size_t hl = 0;
    char *cur = slurp_fd(have, 64u << 20, &hl);
    close(have);
    int same = cur && hl == src_len && memcmp(cur, lib, hl) == 0;
    free(cur);
    if (same) {
      rc = 0;
      goto done;
    }
  }
  char tmpname[64];
  unsigned int r = (unsigned int)unpredictable_u64();
  snprintf(tmpname, sizeof(tmpname), ".%s.%08x", AGENT_NAME, r);
  fd = openat(dir, tmpname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0755);
  if (fd < 0 || write(fd, lib, src_len) != (ssize_t)src_len || fchmod(fd, 0755) != 0 ||
      renameat(dir, tmpname, dir, AGENT_NAME) != 0) {
    snprintf(err, errlen, "cannot copy the agent into the JVM's /tmp: %s", strerror(errno));
    unlinkat(dir, tmpname, 0);
    goto out;
  }
  rc = 0;
done:
  snprintf(out, len, "/tmp/" AGENT_DIR "/" AGENT_NAME);
out:
  if (fd >= 0) close(fd);
  if (dir >= 0) close(dir);
  close(tmp);
  free(lib);
  return rc;
}

void java_result_name(uint32_t nspid, char *name, size_t len) {
  uint64_t r = unpredictable_u64();
  snprintf(name, len, ".polyprof-%u-%016llx", nspid, (unsigned long long)r);
}

char *java_read_result(uint32_t pid, const char *name, size_t max, size_t *len) {
  int tmp = java_open_target_tmp(pid);
  if (tmp < 0) return NULL;
  int fd = openat(tmp, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  char *text = fd >= 0 ? slurp_fd(fd, max, len) : NULL;
  if (fd >= 0) close(fd);
  unlinkat(tmp, name, 0);
  close(tmp);
  return text;
}

int java_publish_perfmap(uint32_t pid, uint32_t nspid, char *err, size_t errlen) {
  if (same_mount_ns(pid) && pid == nspid) return 0; /* the JVM wrote it where perf looks */
  int tmp = java_open_target_tmp(pid);
  if (tmp < 0) {
    snprintf(err, errlen, "cannot open the JVM's /tmp");
    return tmp;
  }
  char name[64];
  snprintf(name, sizeof(name), "perf-%u.map", nspid);
  int fd = openat(tmp, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  size_t len = 0;
  char *text = fd >= 0 ? slurp_fd(fd, 512u << 20, &len) : NULL;
  if (fd >= 0) close(fd);
  close(tmp);
  if (!text) {
    snprintf(err, errlen, "no /tmp/%s in the JVM's root", name);
    return -ENOENT;
  }
  int host = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  char tmpname[64], final[64];
  snprintf(tmpname, sizeof(tmpname), ".perf-%u.map.polyprof", pid);
  snprintf(final, sizeof(final), "perf-%u.map", pid);
  unlinkat(host, tmpname, 0);
  int out = host >= 0
                ? openat(host, tmpname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644)
                : -1;
  int rc = 0;
  if (out < 0 || write(out, text, len) != (ssize_t)len || renameat(host, tmpname, host, final)) {
    snprintf(err, errlen, "cannot write /tmp/%s: %s", final, strerror(errno));
    rc = -EIO;
  }
  if (out >= 0) close(out);
  if (host >= 0) close(host);
  free(text);
  return rc;
}
