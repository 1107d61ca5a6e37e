/* SPDX-License-Identifier: Apache-2.0 */
/* Finding polyprof-worker (worker_exe.h). */
#include "worker_exe.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/trusted_path.h"

/* Set by the build: the install path, and the worker's directory relative
 * to the agent's (sbin). */
#ifndef POLYPROF_WORKER_PATH
#define POLYPROF_WORKER_PATH "/usr/lib/polyprof/" PP_WORKER_EXE_NAME
#endif
#ifndef POLYPROF_WORKER_RELDIR
#define POLYPROF_WORKER_RELDIR "../lib/polyprof"
#endif

/* 0 if path is a regular file we may execute, else -errno. The worker
 * runs every plugin with the agent's privileges: the file and each
 * directory above it must be beyond other users' reach (why says how not). */
static int runnable(const char *path, char *why, size_t whylen) {
  struct stat st;
  if (stat(path, &st) < 0) return -errno;
  if (!S_ISREG(st.st_mode)) return -EACCES;
  if (access(path, X_OK) < 0) return -errno;
  return pp_trusted_path_check(path, false, why, whylen);
}

/* An untrusted candidate is remembered in untrusted (the first one) so the
 * final error says why it was passed over instead of calling it missing. */
static int take(const char *path, char *out, size_t cap, char *untrusted, size_t ulen) {
  char why[PP_WORKER_EXE_MAX + 160] = "";
  int rc = runnable(path, why, sizeof(why));
  if (rc == -EPERM && !untrusted[0]) snprintf(untrusted, ulen, "%s", why);
  if (rc) return -1;
  if ((size_t)snprintf(out, cap, "%s", path) >= cap) return -1;
  return 0;
}

int pp_worker_exe_find(const char *configured, char *out, size_t cap, char *err, size_t errlen) {
  char untrusted[PP_WORKER_EXE_MAX + 160] = "";
  if (configured && configured[0]) {
    char why[PP_WORKER_EXE_MAX + 160] = "";
    int rc = configured[0] == '/' ? runnable(configured, why, sizeof(why)) : -EINVAL;
    if (!rc && (size_t)snprintf(out, cap, "%s", configured) < cap) return 0;
    snprintf(err, errlen, "plugins.worker_path %s: %s", configured,
             rc == -EINVAL  ? "not an absolute path"
             : rc == -EPERM ? why
                            : strerror(rc ? -rc : ENAMETOOLONG));
    return rc ? rc : -ENAMETOOLONG;
  }
  char self[PP_WORKER_EXE_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  char beside[PP_WORKER_EXE_MAX + 64] = "", relative[PP_WORKER_EXE_MAX + 128] = "";
  if (n > 0 && (size_t)n < sizeof(self) - 1) {
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (slash) {
      *slash = 0;
      snprintf(beside, sizeof(beside), "%s/%s", self, PP_WORKER_EXE_NAME);
      snprintf(relative, sizeof(relative), "%s/%s/%s", self, POLYPROF_WORKER_RELDIR,
               PP_WORKER_EXE_NAME);
      if (!take(beside, out, cap, untrusted, sizeof(untrusted)) ||
          !take(relative, out, cap, untrusted, sizeof(untrusted)))
        return 0;
    }
  }
  if (!take(POLYPROF_WORKER_PATH, out, cap, untrusted, sizeof(untrusted))) return 0;
  if (untrusted[0]) {
    snprintf(err, errlen, "the plugin worker executable is refused: %s", untrusted);
    return -EPERM;
  }
  snprintf(err, errlen,
           "the plugin worker executable %s is missing (also looked for %s%s%s); reinstall "
           "polyprof or set plugins.worker_path",
           POLYPROF_WORKER_PATH, beside[0] ? beside : "(agent path unknown)",
           relative[0] ? " and " : "", relative);
  return -ENOENT;
}
