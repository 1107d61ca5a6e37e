/*
 * Starting a worker: a forked process (the default) or a thread (inline
 * mode), plus the fork-side hygiene shared with the registry's probes.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ipc.h"
#include "worker_loop.h"

const char *pp_signal_name(int sig) {
  static __thread char buf[32];
  const char *abbrev = sigabbrev_np(sig);
  if (abbrev)
    snprintf(buf, sizeof(buf), "SIG%s", abbrev);
  else
    snprintf(buf, sizeof(buf), "signal %d", sig);
  return buf;
}

bool pp_reap(pid_t pid, uint64_t deadline_ns, int *status) {
  /* Poll with short sleeps: a blocking waitpid() could wait forever on a
   * process stuck in uninterruptible sleep, and SIGCHLD belongs to the
   * agent's main loop, not to us. */
  long sleep_ns = 200000;
  for (;;) {
    int st = 0;
    pid_t r = waitpid(pid, &st, WNOHANG | __WALL);
    if (r == pid) {
      *status = st;
      return true;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) { /* ECHILD: somebody else reaped it */
      *status = 0;
      return true;
    }
    if (pp_ipc_now_ns() >= deadline_ns) return false;
    struct timespec ts = {0, sleep_ns};
    nanosleep(&ts, NULL);
    if (sleep_ns < 20000000) sleep_ns *= 2;
  }
}

static void close_fds_from(int lowfd) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, (unsigned)lowfd, ~0u, 0) == 0) return;
#endif
  long max = sysconf(_SC_OPEN_MAX);
  if (max < 0 || max > 65536) max = 65536;
  for (int fd = lowfd; fd < max; fd++)
    close(fd);
}

int pp_worker_child_setup(pid_t parent, int keep_fd, const char *comm) {
  /* Die with the agent; if it died between fork() and here, the signal was
   * never armed, so check. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);

  /* A Ctrl-C on the terminal goes to the foreground process group: keep
   * workers out of it, and ignore the usual stop signals as well (systemd
   * signals the whole cgroup), so the agent can still collect their last
   * snapshot and then tell them to exit. */
  setpgid(0, 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; sig++) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    sigaction(sig, &sa, NULL); /* handlers of the agent must not run here */
  }
  sa.sa_handler = SIG_IGN;
  int ignored[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGTTIN, SIGTTOU};
  for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
    sigaction(ignored[i], &sa, NULL);
  sigset_t all;
  sigemptyset(&all);
  sigprocmask(SIG_SETMASK, &all, NULL);

  prctl(PR_SET_NAME, comm);

  /* keep_fd may be any number (even 0 if the agent runs with stdin
   * closed): park it high, set up 0/1, then move it to 3. */
  int parked = fcntl(keep_fd, F_DUPFD_CLOEXEC, 10);
  if (parked < 0) _exit(1);
  int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull >= 0) {
    dup2(devnull, 0);
    dup2(devnull, 1);
    if (keep_fd == 2) dup2(devnull, 2); /* stderr was closed: never log into the socket */
  }
  if (dup2(parked, 3) < 0) _exit(1);
  /* Close-on-exec: a helper the plugin executes must not hold our end of
   * the socket, or the core would not see EOF when we die. */
  fcntl(3, F_SETFD, FD_CLOEXEC);
  close_fds_from(4);
  return 3;
}

struct pp_worker_ctx *pp_worker_ctx_new(const char *path, const char *name,
                                        const struct pp_host_config *cfg) {
  struct pp_worker_ctx *c = calloc(1, sizeof(*c));
  if (!c) return NULL;
  c->fd = -1;
  c->path = strdup(path);
  c->name = strdup(name);
  if (!c->path || !c->name || pp_host_config_copy(&c->cfg, cfg)) {
    pp_worker_ctx_free(c);
    return NULL;
  }
  return c;
}

void pp_worker_ctx_free(struct pp_worker_ctx *c) {
  if (!c) return;
  if (c->fd >= 0) close(c->fd);
  free(c->path);
  free(c->name);
  pp_host_config_free(&c->cfg);
  free(c);
}

static void *thread_main(void *arg) {
  struct pp_worker_ctx *ctx = arg;
  pp_worker_loop(ctx);
  pp_worker_ctx_free(ctx);
  return NULL;
}

int pp_worker_spawn(const char *path, const char *name, const struct pp_host_config *cfg,
                    bool inline_mode, struct pp_spawned *out, char *err, size_t errlen) {
  memset(out, 0, sizeof(*out));
  out->fd = -1;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0) {
    snprintf(err, errlen, "socketpair: %s", strerror(errno));
    return -errno;
  }
  if (inline_mode) {
    struct pp_worker_ctx *ctx = pp_worker_ctx_new(path, name, cfg);
    if (!ctx) {
      close(sv[0]);
      close(sv[1]);
      snprintf(err, errlen, "out of memory");
      return -ENOMEM;
    }
    ctx->fd = sv[1];
    ctx->inline_mode = true;
    /* Signals are the agent's main loop's business: the thread starts with
     * all but the synchronous ones blocked (set around pthread_create so
     * there is no window in which it could take one). */
    sigset_t set, old;
    sigfillset(&set);
    int sync_sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS};
    for (size_t i = 0; i < sizeof(sync_sigs) / sizeof(sync_sigs[0]); i++)
      sigdelset(&set, sync_sigs[i]);
    pthread_sigmask(SIG_SETMASK, &set, &old);
    int rc = pthread_create(&out->thread, NULL, thread_main, ctx);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!rc) {
      char comm[16];
      snprintf(comm, sizeof(comm), "pp-%s", name);
      pthread_setname_np(out->thread, comm);
    }
    if (rc) {
      pp_worker_ctx_free(ctx); /* closes sv[1] */
      close(sv[0]);
      snprintf(err, errlen, "pthread_create: %s", strerror(rc));
      return -rc;
    }
    out->has_thread = true;
    out->fd = sv[0];
    return 0;
  }

  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int rc = -errno;
    close(sv[0]);
    close(sv[1]);
    snprintf(err, errlen, "fork: %s", strerror(-rc));
    return rc;
  }
  if (pid == 0) {
    close(sv[0]);
    char comm[16];
    snprintf(comm, sizeof(comm), "pp-%s", name);
    int fd = pp_worker_child_setup(parent, sv[1], comm);
    struct pp_worker_ctx *ctx = pp_worker_ctx_new(path, name, cfg);
    if (!ctx) _exit(70);
    ctx->fd = fd;
    pp_worker_loop(ctx);
    /* _exit: the agent's atexit handlers and stdio buffers, inherited
     * through fork(), are not ours to run or flush. */
    _exit(0);
  }
  close(sv[1]);
  /* Also from this side, so the group exists before anyone signals it. */
  setpgid(pid, pid);
  out->pid = pid;
  out->group = pid;
  out->fd = sv[0];
  return 0;
}
