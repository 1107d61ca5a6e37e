/* SPDX-License-Identifier: Apache-2.0 */
/* The worker's read-only view of the file system (worker_fs_view.h). */
#include "worker_fs_view.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "privileges.h"

#define RUNTIME_BASE "/run/polyprof"
#define CAP_SYS_ADMIN_BIT (1ull << 21)

#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442 /* the same on every architecture */
#endif

/* A directory of ours: made, or an existing one that is no link and ours. */
static int own_dir(const char *path, mode_t mode) {
  if (mkdir(path, mode) == 0) return 0;
  if (errno != EEXIST) return -errno;
  struct stat st;
  if (lstat(path, &st) < 0) return -errno;
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid()) return -EPERM;
  return 0;
}

static bool can_make(char *why, size_t len) {
  if (geteuid() != 0) {
    snprintf(why, len, "the agent does not run as root");
    return false;
  }
  if (!(pp_priv_agent_caps() & CAP_SYS_ADMIN_BIT)) {
    snprintf(why, len, "the agent lacks CAP_SYS_ADMIN, which a mount namespace needs");
    return false;
  }
  return true;
}

void pp_fs_view_prepare(const char *plugin, struct pp_fs_view *v) {
  memset(v, 0, sizeof(*v));
  if (!can_make(v->why, sizeof(v->why))) return;
  /* The worker makes its runtime directory on first use (host.c): here it
   * must exist before the view is made, or there is nothing to bind. */
  char dir[PP_FS_VIEW_MAX_PATH];
  if ((size_t)snprintf(dir, sizeof(dir), "%s/%s", RUNTIME_BASE, plugin) >= sizeof(dir) ||
      strchr(plugin, '/') || own_dir(RUNTIME_BASE, 0755) < 0 || own_dir(dir, 0700) < 0)
    dir[0] = 0; /* then the worker has no runtime directory, as when /run is not ours */
  snprintf(v->writable[0], sizeof(v->writable[0]), "%s", dir);
  /* A directory the host mounted read-only stays so: the view never
   * makes writable what the agent's own view is not. */
  for (int i = 0; i < PP_FS_VIEW_WRITABLE; i++) {
    struct statvfs sv;
    if (v->writable[i][0] && statvfs(v->writable[i], &sv) == 0 && (sv.f_flag & ST_RDONLY))
      v->writable[i][0] = 0;
  }
  v->on = true;
}

static int set_read_only(const char *path, unsigned flags, bool on) {
  struct mount_attr a;
  memset(&a, 0, sizeof(a));
  if (on)
    a.attr_set = MOUNT_ATTR_RDONLY;
  else
    a.attr_clr = MOUNT_ATTR_RDONLY;
  return syscall(SYS_mount_setattr, AT_FDCWD, path, flags, &a, sizeof(a)) == 0 ? 0 : -errno;
}

int pp_fs_view_enter(const struct pp_fs_view *v, int *step) {
  if (!v || !v->on) return 0;
  *step = PP_FS_VIEW_UNSHARE;
  if (unshare(CLONE_NEWNS) != 0) return -errno;
  /* Slave: mounts and unmounts of the host still reach the view (a
   * private copy would keep an unmounted file system busy), nothing made
   * in it reaches the host. */
  *step = PP_FS_VIEW_PROPAGATION;
  if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) != 0) return -errno;
  *step = PP_FS_VIEW_READ_ONLY;
  int rc = set_read_only("/", AT_RECURSIVE, true);
  if (rc) return rc;
  /* Each writable directory: a bind mount of itself (a mount of its own,
   * read-only as a copy of the one it lies on), then made writable alone.
   * A missing one is skipped: the worker then cannot write there. */
  *step = PP_FS_VIEW_WRITABLE_BIND;
  for (int i = 0; i < PP_FS_VIEW_WRITABLE; i++) {
    const char *w = v->writable[i];
    if (!w[0]) continue;
    if (mount(w, w, NULL, MS_BIND, NULL) != 0) {
      if (errno == ENOENT) continue;
      rc = -errno;
    } else {
      rc = set_read_only(w, 0, false);
    }
    /* Left read-only: clearing the flag on every mount again would also
     * clear it where the host had set it (a container's read-only
     * binds). The agent says the view is incomplete. */
    if (rc) return rc;
  }
  return 0;
}

const char *pp_fs_view_step_name(int step) {
  switch (step) {
    case PP_FS_VIEW_UNSHARE:
      return "creating its mount namespace";
    case PP_FS_VIEW_PROPAGATION:
      return "making its mounts slaves of the host's";
    case PP_FS_VIEW_READ_ONLY:
      return "making its mounts read-only";
    case PP_FS_VIEW_WRITABLE_BIND:
      return "binding its writable directories";
    default:
      return "preparing its file system view";
  }
}

void pp_fs_view_describe(const char *plugin, char *buf, size_t len) {
  char why[160];
  if (!can_make(why, sizeof(why))) {
    snprintf(buf, len, "the agent's (%s)", why);
    return;
  }
  snprintf(buf, len,
           "a mount namespace of its own, every mount read-only but %s/%s "
           "(paths through /proc/PID/root reach other namespaces: docs/security.md)",
           RUNTIME_BASE, plugin);
}
