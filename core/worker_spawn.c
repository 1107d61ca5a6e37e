/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Starting a worker: fork and exec of polyprof-worker (the default) or a
 * thread (inline mode), plus the fork-side hygiene shared with the
 * registry's probes (which fork without exec: they live for milliseconds).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
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
#include "log.h"
#include "privileges.h"
#include "worker_fs_view.h"
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

void pp_worker_comm(const char *name, char out[16]) {
  snprintf(out, 16, "pp-%s", name);
}

/* Parent-death signal, own process group, default signal handlers with the
 * stop signals ignored, empty mask, comm. Async-signal-safe only: the agent
 * has threads, and this runs between fork() and exec(). */
static void child_hygiene(pid_t parent, const char *comm) {
  /* Die with the agent; if it died between fork() and here, the signal was
   * never armed, so check. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);

  /* A Ctrl-C on the terminal goes to the foreground process group: keep
   * workers out of it, and ignore the usual stop signals as well (systemd
   * signals the whole cgroup), so the agent can still collect their last
   * snapshot and then tell them to exit. Ignored dispositions and the mask
   * survive exec(). */
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
}

/* stdin/stdout on /dev/null (stderr too if it was closed: then one of our
 * descriptors took its number), `fd` moved to `to` (inheritable across
 * exec). */
static void child_fds(int fd, int to, bool stderr_closed) {
  /* fd may be any number (even 0 if the agent runs with stdin closed):
   * park it high, set up 0/1, then move it. */
  int parked = fcntl(fd, F_DUPFD_CLOEXEC, 10);
  if (parked < 0) _exit(1);
  int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull >= 0) {
    dup2(devnull, 0);
    dup2(devnull, 1);
    if (stderr_closed) dup2(devnull, 2); /* never log into the socket */
  }
  if (dup2(parked, to) < 0) _exit(1);
}

int pp_worker_child_setup(pid_t parent, int keep_fd, const char *comm) {
  child_hygiene(parent, comm);
  child_fds(keep_fd, 3, keep_fd == 2);
  /* Close-on-exec: a helper the plugin executes must not hold our end of
   * the socket, or the core would not see EOF when we die. */
  fcntl(3, F_SETFD, FD_CLOEXEC);
  close_fds_from(4);
  return 3;
}

/* The child between fork() and exec(): socket on fd 3 for the worker, an
 * error pipe on 4 (close-on-exec: end of file means exec() worked), nothing
 * else. Never returns. */
/* A note on the error pipe that is not a failure: the file system view
 * could not be made (the step and errno packed under this flag). */
#define VIEW_NOTE 0x100000
#define VIEW_NOTE_STEP_SHIFT 12

static void exec_child(pid_t parent, int sock, int errpipe, const char *exe, char *const argv[],
                       const char *comm, const struct pp_privs *privs,
                       const struct pp_fs_view *view) {
  child_hygiene(parent, comm);
  int err_parked = fcntl(errpipe, F_DUPFD_CLOEXEC, 10);
  if (err_parked < 0) _exit(1);
  child_fds(sock, 3, sock == 2 || errpipe == 2);
  if (dup2(err_parked, 4) < 0) _exit(1);
  fcntl(4, F_SETFD, FD_CLOEXEC);
  close_fds_from(5);
  /* The read-only view first: making it takes CAP_SYS_ADMIN, which most
   * workers are about to lose. A worker without it still runs (the agent
   * logs why): the view narrows writes, the sets below are the barrier. */
  int step = 0;
  int ve = -pp_fs_view_enter(view, &step);
  if (ve) {
    int note = VIEW_NOTE | (step << VIEW_NOTE_STEP_SHIFT) | (ve & 0xfff);
    ssize_t w = write(4, &note, sizeof(note));
    (void)w;
  }
  /* Exactly the plugin's capabilities, in every set, so the exec'd worker
   * (root or not) starts with them and nothing else. */
  int e = -pp_priv_child_apply(privs);
  if (e) {
    ssize_t w = write(4, &e, sizeof(e));
    (void)w;
    _exit(126);
  }
  extern char **environ;
  execve(exe, argv, environ);
  e = errno;
  ssize_t w = write(4, &e, sizeof(e));
  (void)w;
  _exit(127);
}

/* After fork: wait for the child's exec() (end of file on the error pipe)
 * or its errno. 0, or -errno of execve() / of the wait. A note that the
 * view could not be made lands in *view_note. */
static int wait_exec(int errfd, int *view_note) {
  struct pollfd pfd = {.fd = errfd, .events = POLLIN};
  int e = 0;
  for (;;) {
    /* Between fork and exec the child makes only a few syscalls; 10 s is
     * for a machine that is very busy, not a normal wait. */
    int n = poll(&pfd, 1, 10000);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n == 0 ? -ETIMEDOUT : -errno;
    ssize_t r = read(errfd, &e, sizeof(e));
    if (r < 0 && errno == EINTR) continue;
    if (r == (ssize_t)sizeof(e) && (e & VIEW_NOTE)) {
      *view_note = e;
      continue;
    }
    if (r == (ssize_t)sizeof(e)) return e > 0 ? -e : -EIO; /* errno or PP_PRIV_ESETPCAP */
    return r == 0 ? 0 : -EIO;
  }
}

static void *thread_main(void *arg) {
  struct pp_worker_ctx *ctx = arg;
  pp_worker_loop(ctx);
  pp_worker_ctx_free(ctx);
  return NULL;
}

int pp_worker_spawn(const char *exe, const char *name, bool inline_mode,
                    const struct pp_privs *privs, struct pp_spawned *out, char *err,
                    size_t errlen) {
  memset(out, 0, sizeof(*out));
  out->fd = -1;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0) {
    snprintf(err, errlen, "socketpair: %s", strerror(errno));
    return -errno;
  }
  char comm[16];
  pp_worker_comm(name, comm);
  if (inline_mode) {
    struct pp_worker_ctx *ctx = pp_worker_ctx_new(sv[1], true);
    if (!ctx) {
      close(sv[0]);
      close(sv[1]);
      snprintf(err, errlen, "out of memory");
      return -ENOMEM;
    }
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
    if (rc) {
      pp_worker_ctx_free(ctx); /* closes sv[1] */
      close(sv[0]);
      snprintf(err, errlen, "pthread_create: %s", strerror(rc));
      return -rc;
    }
    pthread_setname_np(out->thread, comm);
    out->has_thread = true;
    out->fd = sv[0];
    return 0;
  }

  /* Everything the child needs is prepared here: after fork() in a
   * threaded process it may only make async-signal-safe calls. */
  pid_t parent = getpid();
  char pidbuf[24];
  snprintf(pidbuf, sizeof(pidbuf), "%ld", (long)parent);
  char version[] = POLYPROF_VERSION;
  char stepbuf[24];
  snprintf(stepbuf, sizeof(stepbuf), "%llx", (unsigned long long)(privs ? privs->step : 0));
  char *const argv[] = {comm, comm, pidbuf, version, stepbuf, NULL}; /* worker_main.c */
  struct pp_fs_view view;
  pp_fs_view_prepare(name, &view);
  int ep[2];
  if (pipe2(ep, O_CLOEXEC) < 0) {
    int rc = -errno;
    close(sv[0]);
    close(sv[1]);
    snprintf(err, errlen, "pipe: %s", strerror(-rc));
    return rc;
  }
  pid_t pid = fork();
  if (pid < 0) {
    int rc = -errno;
    close(sv[0]);
    close(sv[1]);
    close(ep[0]);
    close(ep[1]);
    snprintf(err, errlen, "fork: %s", strerror(-rc));
    return rc;
  }
  if (pid == 0) exec_child(parent, sv[1], ep[1], exe, argv, comm, privs, &view);
  close(sv[1]);
  close(ep[1]);
  /* Also from this side, so the group exists before anyone signals it. */
  setpgid(pid, pid);
  int view_note = 0;
  int rc = wait_exec(ep[0], &view_note);
  close(ep[0]);
  if (!rc && view_note) {
    int step = (view_note >> VIEW_NOTE_STEP_SHIFT) & 0xff;
    pp_log(PP_LOG_WARNING, "polyprof", "plugin %s: %s: %s failed: %s", name,
           step == PP_FS_VIEW_WRITABLE_BIND
               ? "its worker sees the file system read-only, its runtime directory too"
               : "its worker shares the agent's writable file system view",
           pp_fs_view_step_name(step), strerror(view_note & 0xfff));
  }
  if (rc) {
    int st;
    kill(pid, SIGKILL);
    pp_reap(pid, pp_ipc_now_ns() + 2000000000ull, &st);
    close(sv[0]);
    if (rc == -PP_PRIV_ESETPCAP) {
      snprintf(err, errlen,
               "cannot cut the worker's capabilities to what the plugin declares: the agent "
               "runs as root without CAP_SETPCAP (add it to the service's capability set)");
      return -EPERM;
    }
    snprintf(err, errlen, "cannot run the plugin worker %s: %s", exe, strerror(-rc));
    return rc;
  }
  out->pid = pid;
  out->group = pid;
  out->fd = sv[0];
  return 0;
}
