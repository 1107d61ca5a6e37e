/* SPDX-License-Identifier: Apache-2.0 */
/*
 * attach-maps mode: make a running Node process write /tmp/perf-<pid>.map
 * so the perf plugin can name its JIT frames, and stop it again at exit.
 *
 * The map writer is the small nodejs-perfmap.node addon (perfmap_addon.c)
 * built next to this plugin. It is copied into the target's mount namespace
 * (its /tmp opened through the kit's target-root access, into a root-owned
 * directory we create there, never following links or mounts) and loaded
 * by the helper's install expression (helper.h), whose helper thread stops
 * it again when the agent says so or goes away. Nothing here reopens the
 * inspector.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nodejs.h"
#include "polyprof/kit/cap_step.h"
#include "polyprof/kit/target_files.h"

#define ADDON_DIR "polyprof-nodejs"
#define TARGET_DIR "/tmp/" ADDON_DIR
#define ADDON_NAME "nodejs-perfmap.node"

/* The mount a descriptor is on (statx), or 0 when the kernel cannot say. */
static uint64_t mount_id(int fd) {
#ifdef STATX_MNT_ID
  struct statx sx;
  if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &sx) == 0 && (sx.stx_mask & STATX_MNT_ID))
    return sx.stx_mnt_id;
#else
  (void)fd;
#endif
  return 0;
}

/* The target's /tmp, opened inside its root, and only if the target could
 * create in it itself (world-writable and sticky, or its own): a /tmp that
 * is a bind mount of a host directory of root's is not written into. */
static int open_target_tmp(uint32_t pid, char *err, size_t errlen) {
  struct stat st;
  char why[256] = "";
  int fd = pp_target_open(pid, "/tmp", PP_TF_DIR, NULL, &st, why, sizeof(why));
  if (fd < 0) {
    snprintf(err, errlen, "the target's /tmp: %s", why);
    return fd;
  }
  uid_t uid;
  if (pp_target_ids(pid, &uid, NULL) < 0 ||
      !(((st.st_mode & (S_ISVTX | S_IWOTH)) == (S_ISVTX | S_IWOTH)) || st.st_uid == uid)) {
    snprintf(err, errlen, "the target's /tmp is not a directory it may write to (mode %o, uid %u)",
             (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid);
    close(fd);
    return -EPERM;
  }
  return fd;
}

/* <root>/tmp/polyprof-nodejs, a directory of ours (root's, not writable by
 * others) made right in the target's /tmp: not a link (to a host
 * directory), not a FIFO or device, not a mount over the name. An O_PATH
 * handle, enough to create in it: nothing planted there is ever opened. */
static int open_addon_dir(int tmpfd, char *err, size_t errlen) {
  if (mkdirat(tmpfd, ADDON_DIR, 0755) < 0 && errno != EEXIST) {
    int e = errno;
    snprintf(err, errlen, "cannot create %s in the target: %s", TARGET_DIR, strerror(e));
    return -e;
  }
  int dfd = openat(tmpfd, ADDON_DIR, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) {
    int e = errno;
    snprintf(err, errlen, "%s in the target is not a directory: %s", TARGET_DIR, strerror(e));
    return -e;
  }
  struct stat sd;
  uint64_t mnt = mount_id(dfd);
  if (fstat(dfd, &sd) < 0 || !S_ISDIR(sd.st_mode) || sd.st_uid != geteuid() || (sd.st_mode & 022) ||
      mnt != mount_id(tmpfd)) {
    snprintf(err, errlen,
             "%s in the target is not a private directory of ours (a mount, or "
             "not root's)",
             TARGET_DIR);
    close(dfd);
    return -EPERM;
  }
  return dfd;
}

/* Copies the addon into <root>/tmp/polyprof-nodejs/ through the kit's
 * target-root access, without following any link the target's users could
 * have planted. */
static int install_addon(struct nodejs_state *st, uint32_t pid, char *err, size_t errlen) {
  int tmpfd = open_target_tmp(pid, err, errlen);
  if (tmpfd < 0) return tmpfd;
  int dfd = open_addon_dir(tmpfd, err, errlen);
  close(tmpfd);
  if (dfd < 0) return dfd;
  int in = open(st->addon_path, O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    snprintf(err, errlen, "cannot open the addon %.160s: %s", st->addon_path, strerror(errno));
    close(dfd);
    return -ENOENT;
  }
  int rc = 0;
  char tmpname[64];
  snprintf(tmpname, sizeof(tmpname), ".%s.%d", ADDON_NAME, (int)getpid());
  unlinkat(dfd, tmpname, 0);
  int out = openat(dfd, tmpname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (out < 0) rc = -errno;
  char buf[65536];
  ssize_t n;
  while (rc == 0 && (n = read(in, buf, sizeof(buf))) > 0)
    if (write(out, buf, (size_t)n) != n) rc = -EIO;
  if (out >= 0 && (fchmod(out, 0644) < 0 || close(out) < 0) && rc == 0) rc = -EIO;
  if (rc == 0 && renameat(dfd, tmpname, dfd, ADDON_NAME) < 0) rc = -errno;
  if (rc < 0) {
    unlinkat(dfd, tmpname, 0);
    snprintf(err, errlen, "copying the addon into the target: %s", strerror(-rc));
  }
  close(in);
  close(dfd);
  return rc;
}

/* Removes the target's /tmp/perf-<nspid>.map once the writer is stopped,
 * as gProfiler does: only the regular file of the target's user right in
 * its /tmp (a link, FIFO, device or a mount over the name is left alone,
 * and nothing is opened). */
static void remove_perf_map(struct nodejs_state *st, const struct nodejs_target *t) {
  char err[256] = "", name[48];
  int tmpfd = open_target_tmp(t->pid, err, sizeof(err));
  if (tmpfd < 0) {
    PP_DEBUG(st->host, "pid %u: perf map left: %s", t->pid, err);
    return;
  }
  snprintf(name, sizeof(name), "perf-%u.map", t->ns_pid);
  struct stat sm;
  uid_t uid;
  int fd = openat(tmpfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0 && fstat(fd, &sm) == 0 && S_ISREG(sm.st_mode) &&
      pp_target_ids(t->pid, &uid, NULL) == 0 && sm.st_uid == uid && mount_id(fd) == mount_id(tmpfd))
    unlinkat(tmpfd, name, 0);
  else
    PP_DEBUG(st->host, "pid %u: /tmp/%s left: not the process's own regular file", t->pid, name);
  if (fd >= 0) close(fd);
  close(tmpfd);
}

int nodejs_perfmap_prepare(struct nodejs_state *st, struct nodejs_target *t, char *path,
                           size_t cap) {
  char err[256] = "";
  /* writing into a /tmp that only the target's user may write is the step
   * that needs CAP_DAC_OVERRIDE */
  struct pp_cap_step dac;
  pp_cap_step_begin(&dac, PP_CAP_NEEDS_FILE_OVERRIDE);
  int rc = install_addon(st, t->pid, err, sizeof(err));
  pp_cap_step_end(&dac);
  if (rc < 0) {
    snprintf(t->reason, sizeof(t->reason), "%s", err);
    return rc;
  }
  snprintf(path, cap, "%s/%s", TARGET_DIR, ADDON_NAME);
  return 0;
}

void nodejs_perfmap_remove(struct nodejs_state *st, const struct nodejs_target *t) {
  remove_perf_map(st, t);
}
