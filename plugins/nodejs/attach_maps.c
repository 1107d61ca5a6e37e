/*
 * attach-maps mode: make a running Node process write /tmp/perf-<pid>.map
 * so the perf plugin can name its JIT frames, and stop it again at exit.
 *
 * The map writer is the small nodejs-perfmap.node addon (perfmap_addon.c)
 * built next to this plugin. It is copied into the target's mount namespace
 * (its /tmp opened through the kit's target-root access, into a root-owned
 * directory we create there, never following links or mounts), loaded
 * with process.dlopen from Runtime.evaluate, which works for CommonJS and
 * ES-module entry points alike, and kept alive on a symbol-keyed global. The inspector is closed
 * again right after (if we opened it) and reopened briefly at stop.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nodejs.h"
#include "polyprof/kit/target_files.h"

#define ADDON_DIR "polyprof-nodejs"
#define TARGET_DIR "/tmp/" ADDON_DIR
#define ADDON_NAME "nodejs-perfmap.node"

/* Node majors whose V8 (9..12) has the JitCodeEvent layout the addon uses. */
static int supported_version(const char *v) {
  int major = v[0] == 'v' ? atoi(v + 1) : 0;
  return major >= 16 && major <= 22;
}

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

int nodejs_perfmap_start(struct nodejs_state *st, struct nodejs_target *t, uint64_t deadline) {
  char err[256] = "";
  if (t->perf_prof) {
    PP_LOG(st->host, PP_LOG_INFO, "pid %u: already writes a perf map (--perf-basic-prof)", t->pid);
    nodejs_close_session(st, t, deadline);
    return 0;
  }
  if (!supported_version(t->version)) {
    snprintf(t->reason, sizeof(t->reason), "attach-maps supports Node.js 16 to 22, not %s",
             t->version);
    return -ENOTSUP;
  }
  int rc = install_addon(st, t->pid, err, sizeof(err));
  if (rc < 0) {
    snprintf(t->reason, sizeof(t->reason), "%s", err);
    return rc;
  }
  static const char expr[] =
      "(() => { const k = Symbol.for('polyprof.perfmap'); if (globalThis[k]) return 'ok';"
      " const m = { exports: {} }; process.dlopen(m, '" TARGET_DIR "/" ADDON_NAME
      "');"
      " const r = m.exports.start(); if (r !== 'ok') return r;"
      " const iv = setInterval(() => m.exports.flush(), 1000); iv.unref();"
      " Object.defineProperty(globalThis, k, { value: { m: m.exports, iv }, configurable: true });"
      " return 'ok'; })()";
  json_t *v = NULL;
  rc = nodejs_cdp_evaluate(&t->cdp, expr, &v, err, sizeof(err), deadline);
  const char *r = json_string_value(v);
  if (rc == 0 && (!r || strcmp(r, "ok") != 0)) {
    snprintf(err, sizeof(err), "%s", r ? r : "unexpected reply");
    rc = -EPROTO;
  }
  json_decref(v);
  if (rc < 0) {
    snprintf(t->reason, sizeof(t->reason), "loading the perf-map addon: %.200s",
             err[0] ? err : strerror(-rc));
    return rc;
  }
  t->maps_on = 1;
  /* the map keeps being written without the inspector: close it */
  nodejs_close_session(st, t, deadline);
  return 0;
}

int nodejs_perfmap_stop(struct nodejs_state *st, struct nodejs_target *t, uint64_t deadline) {
  if (!t->maps_on || !nodejs_alive(st, t)) return 0;
  deadline += (uint64_t)st->attach_timeout_s * 1000000000ull;
  int rc = nodejs_open_sync(st, t, deadline);
  if (rc < 0) {
    PP_LOG(st->host, PP_LOG_WARNING,
           "pid %u: cannot reopen the inspector to stop the perf map: %s (it keeps "
           "writing /tmp/perf-%u.map)",
           t->pid, strerror(-rc), t->ns_pid);
    return rc;
  }
  static const char expr[] =
      "(() => { const k = Symbol.for('polyprof.perfmap'); const s = globalThis[k];"
      " if (!s) return 'not started'; clearInterval(s.iv); const r = s.m.stop();"
      " delete globalThis[k]; return r; })()";
  json_t *v = NULL;
  char err[256] = "";
  rc = nodejs_cdp_evaluate(&t->cdp, expr, &v, err, sizeof(err), deadline);
  json_decref(v);
  nodejs_close_session(st, t, deadline);
  if (rc < 0) {
    PP_LOG(st->host, PP_LOG_WARNING, "pid %u: stopping the perf map: %s", t->pid, err);
    return rc;
  }
  t->maps_on = 0;
  remove_perf_map(st, t);
  return 0;
}
