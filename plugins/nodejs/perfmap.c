/*
 * attach-maps mode: make a running Node process write /tmp/perf-<pid>.map
 * so the perf plugin can name its JIT frames, and stop it again at exit.
 *
 * The map writer is the small nodejs-perfmap.node addon (perfmap_addon.c)
 * built next to this plugin. It is copied into the target's mount namespace
 * (through /proc/<pid>/root, into a root-owned directory we create, never
 * following links), loaded with process.dlopen from Runtime.evaluate, which
 * works for CommonJS and ES-module entry points alike, and kept alive on a
 * symbol-keyed global. The inspector is closed again right after (if we
 * opened it) and reopened briefly at stop.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nodejs.h"

#define TARGET_DIR "/tmp/polyprof-nodejs"
#define ADDON_NAME "nodejs-perfmap.node"

/* Node majors whose V8 (9..12) has the JitCodeEvent layout the addon uses. */
static int supported_version(const char *v) {
  int major = v[0] == 'v' ? atoi(v + 1) : 0;
  return major >= 16 && major <= 22;
}

/* Copies the addon into <root>/tmp/polyprof-nodejs/ without following any
 * link the target's users could have planted. */
static int install_addon(struct nodejs_state *st, uint32_t pid, char *err, size_t errlen) {
  char root[64];
  snprintf(root, sizeof(root), "/proc/%u/root/tmp", pid);
  int tmpfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (tmpfd < 0) {
    snprintf(err, errlen, "cannot open the target's /tmp: %s", strerror(errno));
    return -errno;
  }
  int rc = 0;
  if (mkdirat(tmpfd, "polyprof-nodejs", 0755) < 0 && errno != EEXIST) rc = -errno;
  int dfd =
      rc ? -1 : openat(tmpfd, "polyprof-nodejs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  close(tmpfd);
  struct stat sd;
  if (dfd < 0 || fstat(dfd, &sd) < 0 || sd.st_uid != geteuid() || (sd.st_mode & 022)) {
    snprintf(err, errlen, "%s in the target is not a private directory of ours", TARGET_DIR);
    if (dfd >= 0) close(dfd);
    return -EPERM;
  }
  int in = open(st->addon_path, O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    snprintf(err, errlen, "cannot open the addon %.160s: %s", st->addon_path, strerror(errno));
    close(dfd);
    return -ENOENT;
  }
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

int nodejs_perfmap_start(struct nodejs_state *st, struct nodejs_target *t, uint64_t deadline) {
  char err[256] = "";
  if (t->perf_prof) {
    NODEJS_LOG(st, PP_LOG_INFO, "pid %u: already writes a perf map (--perf-basic-prof)", t->pid);
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
    NODEJS_LOG(st, PP_LOG_WARNING,
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
    NODEJS_LOG(st, PP_LOG_WARNING, "pid %u: stopping the perf map: %s", t->pid, err);
    return rc;
  }
  t->maps_on = 0;
  /* as gProfiler: the map is removed once the writer is stopped */
  char path[96];
  snprintf(path, sizeof(path), "/proc/%u/root/tmp/perf-%u.map", t->pid, t->ns_pid);
  unlink(path);
  return 0;
}
