/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Files the plugin shares with a JVM: the agent library it loads, the
 * result files the agent writes, the perf map of perfmap mode. All of them
 * are in the JVM's /tmp, a directory the JVM (the target) controls, opened
 * as a directory inside its root through the kit; nothing below it is
 * reached by a path from the host.
 *
 * A JVM in another mount namespace (a container) cannot see our agent at
 * our path, so the library is copied once into the container's /tmp under
 * a versioned name, /tmp/polyprof-<version>/libpolyprof-jvmti.so, and that
 * path is what `load` gets: a later session passes the same path again and
 * dlopen in the JVM hands back the copy already loaded. An existing copy is
 * never rewritten while a JVM may have it mapped; one that differs from ours
 * (an older build) is replaced by a rename, which leaves mapped copies
 * intact. Root writes there, so: /tmp must be one the JVM could write
 * itself (sticky and world-writable, or its own); our directory is opened
 * from /tmp's descriptor without following a link (a link resolved in the
 * JVM's root could still name a root-owned directory such as /etc) and
 * must be a root-owned directory on /tmp's own mount (a bind mount of some
 * root-owned directory is not ours), and so must the library in it be a
 * root-owned regular file on that mount, checked before it is opened.
 *
 * Result files are written by the agent, that is by the JVM's user: they
 * are opened through pp_target_open, which requires a regular file owned
 * by the JVM's euid (a link or mount to any other user's file, a FIFO or a
 * device is refused before anything is opened). The same holds for the
 * JVM's perf map.
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
#include <sys/syscall.h>
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

/* Whether `dir` in the JVM's root is the very directory `dir` is here
 * (same device and inode): then the JVM and we see the same files there,
 * whatever the mount namespaces (the service's and each worker's are
 * copies of the host's, in which a host JVM sees the same /tmp). A link
 * the JVM's users planted at `dir` can only make us copy nothing. */
static int same_dir_as_ours(uint32_t pid, const char *dir) {
  char p[96];
  struct stat a, b;
  snprintf(p, sizeof(p), "/proc/%u/root%s", pid, dir);
  if (stat(p, &a) != 0 || stat(dir, &b) != 0) return 0;
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
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

#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x00001000U
#endif

/* Mount identity of an open file: the mount id where the kernel reports it
 * (5.8+), else the device, which still tells apart a bind mount from
 * another filesystem. */
static uint64_t mount_of(int fd) {
  struct statx sx;
  if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &sx) == 0 && (sx.stx_mask & STATX_MNT_ID))
    return sx.stx_mnt_id;
  struct stat st;
  return fstat(fd, &st) == 0 ? (uint64_t)st.st_dev | (1ull << 63) : 0;
}

/* A root-owned entry of `dir` on dir's own mount, checked through an
 * O_PATH handle (which opens nothing) and only then opened with `flags`:
 * the fd, or -errno with why. */
static int open_ours(int dir, const char *at, const char *name, int want_dir, int flags, char *why,
                     size_t cap) {
  int h = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (h < 0) {
    int e = errno;
    snprintf(why, cap, "cannot open %s/%s in the JVM's root: %s", at, name, strerror(e));
    return -e;
  }
  struct stat st;
  int rc = 0;
  if (fstat(h, &st) != 0) {
    rc = -errno;
    snprintf(why, cap, "cannot stat %s/%s in the JVM's root: %s", at, name, strerror(-rc));
  } else if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
    snprintf(why, cap, "%s/%s in the JVM's root is %s, not our %s", at, name,
             java_file_kind(st.st_mode), want_dir ? "directory" : "library");
    rc = -EINVAL;
  } else if (st.st_uid != 0 || (st.st_mode & 022)) {
    snprintf(why, cap, "%s/%s in the JVM's root is not root's alone (uid %u, mode %o)", at, name,
             (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
    rc = -EPERM;
  } else if (mount_of(h) != mount_of(dir)) {
    snprintf(why, cap, "%s/%s in the JVM's root is a mount point, not ours", at, name);
    rc = -EXDEV;
  }
  int fd = -1;
  if (rc == 0) {
    char self[48];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", h);
    fd = open(self, flags | O_CLOEXEC | (want_dir ? O_DIRECTORY : O_NONBLOCK));
    if (fd < 0) {
      rc = -errno;
      snprintf(why, cap, "cannot open %s/%s in the JVM's root: %s", at, name, strerror(-rc));
    }
  }
  close(h);
  return rc < 0 ? rc : fd;
}

/* The JVM's /tmp, if root may write into it on the JVM's behalf: a
 * directory anyone may write to (sticky, so nothing of ours can be
 * replaced), or the JVM's own. */
static int open_tmp_for_root(const struct java_target_info *ti, char *why, size_t cap) {
  int tmp = java_open_target_tmp(ti->pid, why, cap);
  if (tmp < 0) return tmp;
  struct stat st;
  if (fstat(tmp, &st) != 0 || ((st.st_mode & 01777) != 01777 && st.st_uid != ti->uid)) {
    snprintf(why, cap, "the JVM's /tmp is neither sticky and world-writable nor the JVM's own");
    close(tmp);
    return -EPERM;
  }
  return tmp;
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

int java_agent_target_path(const char *host_path, const struct java_target_info *ti, char *out,
                           size_t len, char *err, size_t errlen) {
  if (same_mount_ns(ti->pid)) {
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
  int rc = -EIO, dir = -1, fd = -1;
  char why[256];
  int tmp = open_tmp_for_root(ti, why, sizeof(why));
  if (tmp < 0) {
    snprintf(err, errlen, "agent copy: %s", why);
    free(lib);
    return tmp;
  }
  if (mkdirat(tmp, AGENT_DIR, 0755) != 0 && errno != EEXIST) {
    /* EOVERFLOW: a filesystem of the JVM's user namespace (a rootless
     * container's tmpfs), where host root cannot own a file */
    snprintf(err, errlen, "cannot create /tmp/" AGENT_DIR " in the JVM's root: %s%s",
             strerror(errno), errno == EOVERFLOW ? " (root owns nothing on this filesystem)" : "");
    goto out;
  }
  dir = open_ours(tmp, "/tmp", AGENT_DIR, 1, O_RDONLY, why, sizeof(why));
  if (dir < 0) {
    snprintf(err, errlen, "agent copy: %s", why);
    rc = dir;
    goto out;
  }
  struct stat st;
  if (fstatat(dir, AGENT_NAME, &st, AT_SYMLINK_NOFOLLOW) == 0) {
    int have = open_ours(dir, "/tmp/" AGENT_DIR, AGENT_NAME, 0, O_RDONLY, why, sizeof(why));
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
    /* anything else there is replaced by the rename below */
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

char *java_read_exit_dump(int dir, const char *name, uid_t uid, size_t max, size_t *len) {
  int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return NULL;
  struct stat sb;
  char *text = NULL;
  /* the agent creates it O_EXCL, mode 0600, as the JVM's user: anything
   * else at that name was planted */
  if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_uid == uid && sb.st_nlink == 1)
    text = slurp_fd(fd, max, len);
  close(fd);
  unlinkat(dir, name, 0);
  return text;
}

char *java_read_result(uint32_t pid, const char *name, size_t max, size_t *len, char *err,
                       size_t errlen) {
  char path[128];
  snprintf(path, sizeof(path), "/tmp/%s", name);
  int fd = pp_target_open(pid, path, 0, NULL, NULL, err, errlen);
  char *text = fd >= 0 ? slurp_fd(fd, max, len) : NULL;
  if (fd >= 0) {
    close(fd);
    if (!text) snprintf(err, errlen, "%s in the JVM's root is too large or unreadable", path);
  }
  int tmp = java_open_target_tmp(pid, NULL, 0);
  if (tmp >= 0) {
    unlinkat(tmp, name, 0);
    close(tmp);
  }
  return text;
}

int java_publish_perfmap(const char *dir, uint32_t pid, uint32_t nspid, size_t max_bytes, char *err,
                         size_t errlen) {
  if (same_dir_as_ours(pid, "/tmp") && pid == nspid)
    return 0; /* the JVM wrote it where perf looks */
  /* The perf plugin reads a live process's map in its own root. The copy
   * only serves a process of the host's pid namespace that is gone before
   * its samples are named (its root gone with it): perf then looks in this
   * plugin's runtime directory under its pid. A JVM in a pid namespace of
   * its own is never looked up by host pid, so nothing of it is copied. */
  /* the map is the target's text: its size is capped (perfmap_copy_max_mb,
   * by default perf's own load limit, perf.perfmap_max_mb) */
  if (pid != nspid || max_bytes == 0 || !dir) return 0;
  char name[64], why[256] = "";
  snprintf(name, sizeof(name), "/tmp/perf-%u.map", nspid);
  /* the JVM writes it: a regular file of the JVM's user */
  int fd = pp_target_open(pid, name, 0, NULL, NULL, why, sizeof(why));
  size_t len = 0;
  char *text = fd >= 0 ? slurp_fd(fd, max_bytes, &len) : NULL;
  if (fd >= 0) close(fd);
  if (!text) {
    snprintf(err, errlen, "perf map: %s",
             why[0] ? why : "larger than java.perfmap_copy_max_mb, or unreadable: not copied");
    return fd < 0 ? fd : -EIO;
  }
  /* the agent's own runtime directory (0700, the worker's only writable
   * place besides /tmp): nothing a target planted is in it, and the temp
   * name is still created O_EXCL|O_NOFOLLOW and renamed into place */
  int out_dir = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  char tmpname[96], final[64];
  snprintf(tmpname, sizeof(tmpname), ".pp-tmp-perf-%u.map.%016llx", pid,
           (unsigned long long)unpredictable_u64());
  snprintf(final, sizeof(final), "perf-%u.map", pid);
  int out = out_dir >= 0 ? openat(out_dir, tmpname,
                                  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)
                         : -1;
  int rc = 0;
  if (out < 0 || write(out, text, len) != (ssize_t)len ||
      renameat(out_dir, tmpname, out_dir, final)) {
    snprintf(err, errlen, "cannot write %s/%s: %s", dir, final, strerror(errno));
    rc = -EIO;
    if (out >= 0) unlinkat(out_dir, tmpname, 0);
  }
  if (out >= 0) close(out);
  if (out_dir >= 0) close(out_dir);
  free(text);
  return rc < 0 ? rc : 1;
}

void java_unpublish_perfmap(const char *dir, uint32_t pid) {
  char final[64];
  snprintf(final, sizeof(final), "perf-%u.map", pid);
  int d = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
  if (d < 0) return;
  struct stat st;
  if (fstatat(d, final, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
      st.st_uid == geteuid())
    unlinkat(d, final, 0);
  close(d);
}
