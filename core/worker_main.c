/* SPDX-License-Identifier: Apache-2.0 */
/*
 * polyprof-worker: the process that hosts one plugin for the agent.
 *
 * The agent fork()s, prepares the child (parent-death signal, own process
 * group, default signal handlers with the stop signals ignored, empty
 * signal mask, stdin/stdout on /dev/null, only the socket left open, on fd
 * 3) and exec()s this program. Why exec rather than run the worker loop in
 * the forked child: a fork carries the agent's heap and every library it
 * links (HTTP, TLS, YAML, protobuf...) into each worker's resident set; this
 * program links only what hosting a plugin needs. Which plugin to load and
 * its configuration arrive over the socket with INIT (ipc.h), as in inline
 * mode.
 *
 *   argv: <anything> <comm> <agent pid> <agent version> <step capabilities,
 *   hex>; fd 3: the socket.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "privileges.h"
#include "worker_loop.h"
#include "worker_sandbox.h"

#define SOCKET_FD 3

#ifdef POLYPROF_SANITIZE
/* In a sanitizer build ASan catches deadly signals and exits with status
 * 1 after its report. The supervisor says how a worker died, and a plugin
 * crash must read the same as in a release build ("crashed with SIGSEGV");
 * the memory errors ASan detects itself are still reported. (The forked
 * workers of old had the agent's handlers reset, to the same effect.) */
__attribute__((visibility("default"), used)) const char *__asan_default_options(void) {
  return "handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_sigill=0";
}
#endif

static int usage(void) {
  fprintf(stderr,
          "polyprof-worker: hosts one plugin for the polyprof agent, which starts it; it is "
          "not meant to be run by hand\n");
  return 2;
}

static bool valid_comm(const char *s) {
  size_t n = strnlen(s, 16);
  if (n == 0 || n > 15) return false;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e) return false;
  return true;
}

int main(int argc, char **argv) {
  if (argc != 5 || !valid_comm(argv[1])) return usage();
  char *end;
  errno = 0;
  long agent = strtol(argv[2], &end, 10);
  /* the agent is pid 1 when it is a container's entrypoint in the
   * container's own pid namespace (ECS Fargate) */
  if (errno || *end || agent < 1) return usage();
  struct stat st;
  if (fstat(SOCKET_FD, &st) < 0 || !S_ISSOCK(st.st_mode)) return usage();
  errno = 0;
  unsigned long long step = strtoull(argv[4], &end, 16);
  if (errno || *end || !argv[4][0]) return usage();

  /* Capabilities the plugin needs for single steps only: permitted, not
   * effective, from before anything else runs (docs/security.md). */
  if (pp_priv_worker_lower_steps((uint64_t)step) != 0) _exit(1);

  /* Kept across exec() (the binary is neither set-id nor file-capable), but
   * arm it again rather than rely on that, and check the agent did not go
   * away before it was armed. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != (pid_t)agent) _exit(1);
  prctl(PR_SET_NAME, argv[1]);

  /* An agent upgraded on disk while an old one runs: the two ends of the
   * protocol must be the same build. */
  if (strcmp(argv[3], POLYPROF_VERSION) != 0) {
    fprintf(stderr, "polyprof-worker %s: the running agent is version %.32s; restart it\n",
            POLYPROF_VERSION, argv[3]);
    _exit(3);
  }

  /* Close-on-exec: a helper the plugin executes must not hold our end of
   * the socket, or the agent would not see end of file when we die. The
   * agent made it non-blocking; say so again, the loop depends on it. */
  if (fcntl(SOCKET_FD, F_SETFD, FD_CLOEXEC) < 0) _exit(1);
  int fl = fcntl(SOCKET_FD, F_GETFL);
  if (fl < 0 || fcntl(SOCKET_FD, F_SETFL, fl | O_NONBLOCK) < 0) _exit(1);

  /* A runtime plugin keeps a descriptor or two per watched thread (its
   * state files, kept open so a look costs one pread): a host of a thousand
   * interpreters needs more than the usual soft limit of 1024. That limit
   * exists for select(), which no worker uses: raise it to the hard limit,
   * at most 65536 (the plugins' own caches bound what they keep). */
  struct rlimit nofile;
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
    rlim_t want = nofile.rlim_max > 65536 ? 65536 : nofile.rlim_max;
    if (nofile.rlim_cur < want) {
      nofile.rlim_cur = want;
      setrlimit(RLIMIT_NOFILE, &nofile);
    }
  }

  struct pp_worker_ctx *ctx = pp_worker_ctx_new(SOCKET_FD, false);
  if (!ctx) _exit(70);
  /* The agent gave this process exactly the plugin's capabilities; before
   * the plugin is loaded it also gets no_new_privs and its system call
   * allow-list (docs/security.md). */
  ctx->before_load = pp_sandbox_enter;
  int rc = pp_worker_loop(ctx);
  /* _exit: plugins' own atexit handlers and destructors may not expect to
   * run after fini() (the forked workers never ran them either). */
  _exit(rc == 0 || rc == -EPIPE ? 0 : 1);
}
