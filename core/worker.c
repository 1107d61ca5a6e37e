/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Supervisor side of a plugin worker (API in supervisor.h).
 *
 * Requests are pipelined: each one sent is queued, and the worker answers
 * them in order (REPLY, or PROFILE for SNAPSHOT). Only the request at the
 * front of the queue is being worked on, so the hang deadline is "front
 * became front + timeout". A restart simply sends INIT, START and
 * ADD_TARGETS back to back without waiting, so pp_worker_service() never
 * blocks on a slow init; their answers are checked as they arrive.
 *
 * Message handling (on_msg) never tears the worker down itself, because it
 * runs inside the receiver: it records the failure and returns non-zero,
 * and the caller of the receiver calls fail().
 *
 * Inline mode runs the same worker loop in a thread of the agent over its
 * own socketpair, so this file does not care which it is, except that:
 * there is no crash isolation (a plugin crash is the agent's crash), the
 * memory limit is not enforced (one address space), and a hang can only be
 * abandoned: a stuck thread cannot be killed safely, so the supervisor
 * closes its end, detaches the thread (which frees its own context if the
 * plugin ever returns) and never restarts that worker, because dlopen()
 * would hand a new instance the same library and globals as the stuck one.
 *
 * Process hygiene relied on here: workers are forked from a long-lived
 * thread (PR_SET_PDEATHSIG follows the forking thread) and exec the
 * polyprof-worker executable (worker_spawn.c, worker_main.c), and the agent
 * does not set SIGCHLD to SIG_IGN (exit statuses would be lost). Without
 * that executable no process-isolated plugin can run: the worker stays off
 * with a permanent error naming where it was looked for.
 *
 * A plugin whose init() or start() returns PP_PERMANENT(errno) (plugin.h)
 * is not restarted: restarting cannot change the kernel's or the host's
 * answer, it would only repeat the message at every backoff. The worker
 * ends, the verdict is logged once, and the worker stays off (W_OFF) until
 * it is freed; a configuration reload builds a new worker, which tries again.
 *
 * Error codes: -ECHILD the worker died, -ETIMEDOUT it hung, -ENOMEM it grew
 * past its memory limit, -EPROTO it broke the protocol, -EAGAIN it is
 * waiting for a restart, -ENOTCONN not started, -EIO never again (inline
 * worker abandoned), a PP_PERMANENT() code: off until reload; anything else
 * is the plugin's own return code.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ipc.h"
#include "log.h"
#include "polyprof/kit/proc.h"
#include "privileges.h"
#include "profile_codec.h"
#include "profile_mode.h"
#include "supervisor.h"
#include "worker_exe.h"
#include "worker_loop.h"
#include "worker_sandbox.h"

#define NS 1000000000ull
#define MAXQ 32
#define HEALTHY_NS (60 * NS)     /* up this long: the next failure starts at 1 s again */
#define CHECK_EVERY_NS (NS / 10) /* RSS and liveness polling while waiting */
#define LOG_LINES_PER_SEC 200    /* beyond that a worker's lines are counted, not logged */
#define MAX_ZOMBIES 16

enum wstate {
  W_IDLE,    /* not started (or stopped) */
  W_UP,      /* process/thread running */
  W_BACKOFF, /* failed, restart due at next_restart */
  W_DEAD,    /* inline worker abandoned: cannot be restarted */
  W_OFF,     /* init/start failed permanently: not restarted */
};

struct pp_worker {
  char *name, *path;
  char tag[48]; /* "polyprof.<plugin>" */
  struct pp_host_config cfg;
  struct pp_wbuf init;         /* INIT payload: path, name, cfg */
  char exe[PP_WORKER_EXE_MAX]; /* worker executable; "" inline or not found */
  char exe_err[768];           /* why it was not found */
  struct pp_privs privs;       /* what its process holds (privileges.h) */
  char denied[64];             /* system call its allow-list refused ("" none) */
  bool inline_mode;
  int memory_limit_mb, timeout_s, backoff_max_s;
  uint64_t timeout_ns;

  enum wstate state;
  bool wanted; /* between start and stop: restart after failures */
  struct pp_spawned sp;
  struct pp_ipc_rx rx;

  /* replayed on restart */
  bool have_session;
  uint32_t s_freq, s_dur, s_flags;
  uint64_t s_tick;
  char *s_mode;
  struct pp_target *targets;
  size_t ntargets, tcap;

  /* outstanding requests */
  uint32_t q[MAXQ];
  unsigned qhead, qlen;
  uint64_t front_since, last_io;
  int last_rc;
  char last_msg[512];

  /* snapshot in flight */
  bool snap_pending, snap_ready, snap_failed;
  uint8_t *snap;
  size_t snap_len;

  /* failures */
  bool fail_pending;
  bool exit_acked; /* EXIT answered: the worker is ending by itself */
  int fail_rc;
  char pending_reason[512];
  char reason[512];
  unsigned failures, backoff_s;
  uint64_t next_restart, up_since, next_check;

  uint64_t log_window;
  unsigned log_count, log_dropped;
  pid_t zombies[MAX_ZOMBIES];
  unsigned nzombies;
};

static uint64_t now_ns(void) {
  return pp_ipc_now_ns();
}

/* ---- failure handling ---- */

static void add_zombie(struct pp_worker *w, pid_t pid) {
  if (w->nzombies < MAX_ZOMBIES) w->zombies[w->nzombies++] = pid;
}

static void reap_zombies(struct pp_worker *w, uint64_t deadline) {
  for (unsigned i = 0; i < w->nzombies;) {
    int st;
    if (pp_reap(w->zombies[i], deadline, &st)) {
      w->zombies[i] = w->zombies[--w->nzombies];
    } else {
      i++;
    }
  }
}

static bool join_until(pthread_t t, uint64_t deadline_mono) {
  /* pthread_timedjoin_np takes a CLOCK_REALTIME deadline. */
  uint64_t now = now_ns();
  uint64_t wait = deadline_mono > now ? deadline_mono - now : 0;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t abs = (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec + wait;
  ts.tv_sec = (time_t)(abs / NS);
  ts.tv_nsec = (long)(abs % NS);
  return pthread_timedjoin_np(t, NULL, &ts) == 0;
}

static void kill_group(pid_t pid) {
  kill(-pid, SIGKILL); /* the worker leads its own process group */
  kill(pid, SIGKILL);  /* in case it died before it could set that up */
}

/* End the process (SIGKILL first if kill_proc) or the thread (joined, or
 * left behind if abandon_thread or if it does not return in time) and drop
 * the connection. Returns true if an inline thread was abandoned. */
static bool teardown(struct pp_worker *w, bool kill_proc, bool abandon_thread) {
  bool abandoned = false;
  if (w->sp.pid > 0) {
    int st;
    if (kill_proc) kill_group(w->sp.pid);
    if (!pp_reap(w->sp.pid, now_ns() + 2 * NS, &st)) {
      kill_group(w->sp.pid);
      add_zombie(w, w->sp.pid);
    }
  }
  /* Helpers the plugin forked stay in the worker's process group (and have
   * no parent-death signal): take them along. Not yet reaped, or reaped
   * with the group still alive, the number cannot belong to anyone else. */
  if (w->sp.group > 0) kill(-w->sp.group, SIGKILL);
  if (w->sp.fd >= 0) close(w->sp.fd);
  if (w->sp.has_thread) {
    /* Closing our end makes the loop's next read or write fail, so a
     * thread that is merely between requests exits at once. One stuck in
     * the plugin cannot be stopped safely: leave it behind. */
    if (abandon_thread || !join_until(w->sp.thread, now_ns() + w->timeout_ns)) {
      pthread_detach(w->sp.thread);
      abandoned = true;
    }
  }
  memset(&w->sp, 0, sizeof(w->sp));
  w->sp.fd = -1;
  pp_ipc_rx_free(&w->rx);
  pp_ipc_rx_init(&w->rx);
  w->qlen = 0;
  w->fail_pending = false;
  return abandoned;
}

static void fail(struct pp_worker *w, int rc, const char *fmt, ...) PP_PRINTF(3, 4);
static void fail(struct pp_worker *w, int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(w->reason, sizeof(w->reason), fmt, ap);
  va_end(ap);
  /* An inline thread that is stuck, or that we could not join, shares the
   * plugin's globals with any new instance we would load (dlopen returns
   * the same handle): it is not restarted. */
  bool abandoned = teardown(w, true, rc == -ETIMEDOUT);
  if (w->snap_pending) w->snap_failed = true;
  w->failures++;
  w->fail_rc = rc;
  if (PP_IS_PERMANENT(rc) && !abandoned) {
    w->state = W_OFF;
    pp_log(PP_LOG_WARNING, "polyprof",
           "plugin %s: %s; not restarted: it stays off until the configuration is reloaded",
           w->name, w->reason);
  } else if (abandoned) {
    w->state = W_DEAD;
    pp_log(PP_LOG_WARNING, "polyprof",
           "plugin %s: %s; inline mode cannot restart it (its thread is abandoned)", w->name,
           w->reason);
  } else if (w->wanted) {
    w->state = W_BACKOFF;
    w->next_restart = now_ns() + (uint64_t)w->backoff_s * NS;
    pp_log(PP_LOG_WARNING, "polyprof", "plugin %s: worker %s; restarting in %u s", w->name,
           w->reason, w->backoff_s);
    w->backoff_s = w->backoff_s * 2 > (unsigned)w->backoff_max_s ? (unsigned)w->backoff_max_s
                                                                 : w->backoff_s * 2;
  } else {
    w->state = W_IDLE;
    pp_log(PP_LOG_WARNING, "polyprof", "plugin %s: worker %s", w->name, w->reason);
  }
}

static void describe_status(const struct pp_worker *w, int st, char *buf, size_t len) {
  /* The worker said which call its allow-list refused just before it
   * exited (worker_sandbox.c); a SIGSYS death without that word is the
   * same verdict with the kernel's default action. */
  if (w->denied[0])
    snprintf(buf, len, "stopped: system call %s not in its allow-list", w->denied);
  else if ((WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS) ||
           (WIFEXITED(st) && WEXITSTATUS(st) == PP_WORKER_EXIT_DENIED))
    snprintf(buf, len, "stopped: a system call not in its allow-list");
  else if (WIFSIGNALED(st))
    snprintf(buf, len, "crashed with %s%s", pp_signal_name(WTERMSIG(st)),
             WCOREDUMP(st) ? " (core dumped)" : "");
  else if (WIFEXITED(st))
    snprintf(buf, len, "exited with status %d", WEXITSTATUS(st));
  else
    snprintf(buf, len, "ended");
}

/* The connection ended (or the process was seen gone): say why. */
static void died(struct pp_worker *w) {
  char why[256];
  if (w->sp.pid > 0) {
    int st;
    if (pp_reap(w->sp.pid, now_ns() + NS, &st)) {
      w->sp.pid = 0; /* reaped: never signal the pid itself again */
      describe_status(w, st, why, sizeof(why));
    } else {
      snprintf(why, sizeof(why), "closed its connection");
    }
  } else {
    snprintf(why, sizeof(why), "worker thread ended unexpectedly");
  }
  fail(w, -ECHILD, "%s", why);
}

/* Map an error of the receiver or of a send to a failure. */
static void io_failed(struct pp_worker *w, int rc) {
  if (rc == 1 && w->fail_pending) {
    char reason[sizeof(w->pending_reason)];
    memcpy(reason, w->pending_reason, sizeof(reason));
    fail(w, w->fail_rc, "%s", reason);
  } else if (rc == -EPIPE) {
    died(w);
  } else if (rc == -ETIMEDOUT) {
    fail(w, -ETIMEDOUT, "did not read its requests within %d s", w->timeout_s);
  } else if (rc == -EPROTO && !w->pending_reason[0]) {
    fail(w, -EPROTO, "broke the protocol: announced a message over %u bytes", PP_IPC_MAX_MSG);
  } else if (rc == -EPROTO || rc == -EINVAL || (rc == 1 && !w->fail_pending)) {
    fail(w, -EPROTO, "broke the protocol%s%s", w->pending_reason[0] ? ": " : "", w->pending_reason);
  } else {
    fail(w, rc < 0 ? rc : -EIO, "connection error: %s", strerror(rc < 0 ? -rc : EIO));
  }
}

/* ---- incoming messages ---- */

static int protocol_error(struct pp_worker *w, const char *what) {
  snprintf(w->pending_reason, sizeof(w->pending_reason), "%s", what);
  return -EPROTO;
}

static void relog(struct pp_worker *w, uint32_t level, const char *s, size_t n) {
  uint64_t window = now_ns() / NS;
  if (window != w->log_window) {
    if (w->log_dropped)
      pp_log(PP_LOG_WARNING, w->tag, "%u log lines suppressed (more than %d per second)",
             w->log_dropped, LOG_LINES_PER_SEC);
    w->log_window = window;
    w->log_count = 0;
    w->log_dropped = 0;
  }
  if (++w->log_count > LOG_LINES_PER_SEC) {
    w->log_dropped++;
    return;
  }
  char buf[PP_HOST_MAX_LOG + 1];
  if (n > PP_HOST_MAX_LOG) n = PP_HOST_MAX_LOG;
  for (size_t i = 0; i < n; i++)
    buf[i] = (unsigned char)s[i] < 0x20 ? ' ' : s[i];
  buf[n] = 0;
  pp_log_msg(level > PP_LOG_ERROR ? PP_LOG_ERROR : (int)level, w->tag, buf);
}

static void pop(struct pp_worker *w) {
  w->qhead = (w->qhead + 1) % MAXQ;
  w->qlen--;
  w->front_since = now_ns();
}

static int on_msg(void *arg, uint32_t type, const uint8_t *p, uint32_t len) {
  struct pp_worker *w = arg;
  struct pp_rbuf r;
  pp_rbuf_init(&r, p, len);
  w->last_io = now_ns();
  uint32_t front = w->qlen ? w->q[w->qhead] : 0;
  switch (type) {
    case PP_MSG_LOG: {
      uint32_t level = pp_rbuf_u32(&r);
      const char *s;
      size_t n;
      if (pp_rbuf_str(&r, 65536, &s, &n) || !s) return protocol_error(w, "malformed LOG");
      relog(w, level, s, n);
      return 0;
    }
    case PP_MSG_DENIED: {
      uint32_t nr = pp_rbuf_u32(&r);
      const char *s;
      size_t n;
      if (pp_rbuf_str(&r, 64, &s, &n) || !s) return protocol_error(w, "malformed DENIED");
      size_t k = 0;
      for (; k < n && k + 1 < sizeof(w->denied); k++) {
        char c = s[k];
        bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
        w->denied[k] = ok ? c : '?';
      }
      w->denied[k] = 0;
      pp_log(PP_LOG_ERROR, "polyprof",
             "worker %s stopped: system call %s (number %u) not in its allow-list", w->name,
             w->denied[0] ? w->denied : "?", nr);
      return 0;
    }
    case PP_MSG_REPLY: {
      if (!w->qlen || front == PP_MSG_SNAPSHOT || front == PP_MSG_DUMP)
        return protocol_error(w, "unexpected REPLY");
      int rc = (int)pp_rbuf_u32(&r);
      const char *s;
      size_t n;
      if (pp_rbuf_str(&r, 65536, &s, &n) || pp_rbuf_left(&r))
        return protocol_error(w, "malformed REPLY");
      pop(w);
      w->last_rc = rc;
      snprintf(w->last_msg, sizeof(w->last_msg), "%.*s", (int)n, s ? s : "");
      if (rc && (front == PP_MSG_INIT || front == PP_MSG_START)) {
        /* Without init/start the worker is useless: treat like a crash
         * (restart with backoff), the message says why. */
        w->fail_pending = true;
        w->fail_rc = rc < 0 ? rc : -EIO; /* a PP_PERMANENT() code is kept as is */
        snprintf(w->pending_reason, sizeof(w->pending_reason), "%s",
                 w->last_msg[0] ? w->last_msg : "init failed");
        return 1;
      }
      /* nobody waits for this answer (pp_worker_add_targets) */
      if (rc && front == PP_MSG_ADD_TARGETS)
        pp_log(PP_LOG_WARNING, "polyprof", "%s: add_targets failed: %s", w->name,
               w->last_msg[0] ? w->last_msg : strerror(rc < 0 ? -rc : rc));
      if (front == PP_MSG_EXIT) {
        /* From here on, end of file is the expected goodbye. */
        w->exit_acked = true;
        return 2;
      }
      return 0;
    }
    case PP_MSG_PROFILE: {
      if (!w->qlen || (front != PP_MSG_SNAPSHOT && front != PP_MSG_DUMP))
        return protocol_error(w, "unexpected PROFILE");
      pop(w);
      free(w->snap);
      w->snap = pp_ipc_rx_steal(&w->rx); /* no copy of a big profile */
      w->snap_len = w->snap ? len : 0;
      w->snap_ready = true;
      return 0;
    }
    default:
      return protocol_error(w, "unknown message type");
  }
}

/* ---- liveness ---- */

/* A worker's RSS from /proc/PID/statm: a few counters, where
 * /proc/PID/status (pp_proc_rss_kb) makes the kernel format dozens of
 * fields -- it showed in the agent's own profile, once per worker and
 * check. 0 or -1. */
static int worker_rss_kb(pid_t pid, uint64_t *kb) {
  char path[64], buf[160];
  snprintf(path, sizeof(path), "/proc/%d/statm", (int)pid);
  if (pp_read_file(path, buf, sizeof(buf), NULL) < 0) return -1;
  unsigned long long size, resident;
  if (sscanf(buf, "%llu %llu", &size, &resident) != 2) return -1;
  long page = sysconf(_SC_PAGESIZE);
  *kb = (uint64_t)resident * (uint64_t)(page > 0 ? page / 1024 : 4);
  return 0;
}

/* Periodic checks while up: hang deadline, death without EOF, RSS cap. */
static void check(struct pp_worker *w) {
  if (w->state != W_UP) return;
  uint64_t now = now_ns();
  if (w->qlen && now >= w->front_since + w->timeout_ns) {
    fail(w, -ETIMEDOUT, "did not answer %s within %d s", pp_ipc_type_name(w->q[w->qhead]),
         w->timeout_s);
    return;
  }
  if (now - w->up_since >= HEALTHY_NS) w->backoff_s = 1;
  if (now < w->next_check) return;
  w->next_check = now + CHECK_EVERY_NS;
  if (w->sp.pid <= 0) return;
  int st;
  if (pp_reap(w->sp.pid, 0, &st)) {
    /* Gone while its socket stays open (a child of it holds it?). */
    w->sp.pid = 0;
    char why[256];
    describe_status(w, st, why, sizeof(why));
    fail(w, -ECHILD, "%s", why);
    return;
  }
  uint64_t kb;
  if (w->memory_limit_mb > 0 && worker_rss_kb(w->sp.pid, &kb) == 0 &&
      kb > (uint64_t)w->memory_limit_mb * 1024) {
    fail(w, -ENOMEM, "exceeded its memory limit of %d MiB (RSS %llu MiB)", w->memory_limit_mb,
         (unsigned long long)(kb / 1024));
  }
}

static bool answer_in_flight(const struct pp_ipc_rx *rx) {
  return rx->hdr_got == PP_IPC_HDR_SIZE && (rx->type == PP_MSG_REPLY || rx->type == PP_MSG_PROFILE);
}

/* Read what is there, then run the checks. Never blocks. */
static void pump(struct pp_worker *w) {
  if (w->state != W_UP) return;
  w->pending_reason[0] = 0;
  if (w->exit_acked) return;
  bool was = answer_in_flight(&w->rx);
  size_t before = w->rx.body_got;
  int rc = pp_ipc_rx_read(&w->rx, w->sp.fd, on_msg, w, 256);
  /* Once an answer is being sent the plugin call has returned; what is
   * left is our own code copying bytes, so the deadline becomes "no
   * progress for timeout" (a big profile read late must not count as a
   * hang). */
  if (!rc && answer_in_flight(&w->rx) && (!was || w->rx.body_got != before))
    w->front_since = now_ns();
  if (rc == 2) return; /* EXIT acknowledged */
  if (rc) {
    io_failed(w, rc);
    return;
  }
  check(w);
}

enum wait_for { UNTIL_IDLE, UNTIL_SNAPSHOT };

static bool queued(const struct pp_worker *w, uint32_t type) {
  for (unsigned i = 0; i < w->qlen; i++)
    if (w->q[(w->qhead + i) % MAXQ] == type) return true;
  return false;
}

/* Block until the condition holds or the worker fails; bounded by the hang
 * deadline of whatever is outstanding. 0 or the failure code. */
static int wait_for(struct pp_worker *w, enum wait_for what) {
  while (w->state == W_UP) {
    if (what == UNTIL_IDLE ? w->qlen == 0 : w->snap_ready) return 0;
    if (what == UNTIL_SNAPSHOT && !queued(w, PP_MSG_SNAPSHOT) && !queued(w, PP_MSG_DUMP))
      return -EINVAL; /* never forever */
    uint64_t deadline = w->next_check;
    if (w->qlen && w->front_since + w->timeout_ns < deadline)
      deadline = w->front_since + w->timeout_ns;
    if (deadline <= now_ns()) deadline = now_ns() + 1000000;
    pp_ipc_wait_readable(w->sp.fd, deadline);
    pump(w);
  }
  if (what == UNTIL_SNAPSHOT && w->snap_ready) return 0;
  return w->fail_rc ? w->fail_rc : -ECHILD;
}

static int send_req(struct pp_worker *w, uint32_t type, const void *p, size_t len) {
  if (w->state != W_UP) return w->fail_rc ? w->fail_rc : -ENOTCONN;
  if (w->qlen == MAXQ) return -EBUSY;
  w->pending_reason[0] = 0;
  int rc = pp_ipc_send(w->sp.fd, type, p, len, now_ns() + w->timeout_ns, &w->rx, on_msg, w);
  if (rc) {
    if (w->state == W_UP) io_failed(w, rc);
    return w->fail_rc ? w->fail_rc : -EIO;
  }
  if (w->qlen == 0) w->front_since = now_ns();
  w->q[(w->qhead + w->qlen) % MAXQ] = type;
  w->qlen++;
  w->last_io = now_ns();
  return 0;
}

/* ---- requests ---- */

static int send_start(struct pp_worker *w) {
  struct pp_wbuf b;
  pp_wbuf_init(&b);
  pp_wbuf_u32(&b, w->s_freq);
  pp_wbuf_u32(&b, w->s_dur);
  pp_wbuf_u32(&b, w->s_flags);
  pp_wbuf_u64(&b, w->s_tick);
  pp_wbuf_str(&b, w->s_mode);
  int rc = b.err ? b.err : send_req(w, PP_MSG_START, b.data, b.len);
  pp_wbuf_free(&b);
  return rc;
}

static int send_targets(struct pp_worker *w, const struct pp_target *t, size_t n) {
  struct pp_wbuf b;
  pp_wbuf_init(&b);
  pp_wbuf_u32(&b, (uint32_t)n);
  pp_wbuf_put(&b, t, n * sizeof(*t));
  int rc = b.err ? b.err : send_req(w, PP_MSG_ADD_TARGETS, b.data, b.len);
  pp_wbuf_free(&b);
  return rc;
}

static bool target_alive(const struct pp_target *t) {
  uint64_t st;
  if (pp_proc_start_time(t->pid, &st) < 0) return false;
  return t->start_time == 0 || st == t->start_time;
}

/* Forget processes that are gone, so a long continuous run does not grow
 * the replay list. */
static void prune_targets(struct pp_worker *w) {
  size_t k = 0;
  for (size_t i = 0; i < w->ntargets; i++)
    if (target_alive(&w->targets[i])) w->targets[k++] = w->targets[i];
  w->ntargets = k;
}

static int remember_targets(struct pp_worker *w, const struct pp_target *t, size_t n) {
  for (size_t i = 0; i < n; i++) {
    size_t j = 0;
    while (j < w->ntargets && w->targets[j].pid != t[i].pid)
      j++;
    if (j < w->ntargets) {
      w->targets[j] = t[i]; /* same pid, maybe a new process: latest wins */
      continue;
    }
    if (w->ntargets == w->tcap) {
      prune_targets(w);
      if (w->ntargets == w->tcap) {
        size_t cap = w->tcap ? w->tcap * 2 : 64;
        struct pp_target *nt = realloc(w->targets, cap * sizeof(*nt));
        if (!nt) return -ENOMEM;
        w->targets = nt;
        w->tcap = cap;
      }
    }
    w->targets[w->ntargets++] = t[i];
  }
  return 0;
}

/* Start a process/thread and queue INIT, START and the targets. */
static int spawn(struct pp_worker *w) {
  char err[PP_WORKER_EXE_MAX + 128];
  int rc;
  if (!w->inline_mode && !w->exe[0]) {
    /* A broken installation: retrying cannot help until it is fixed and
     * the configuration reloaded (which looks for the executable again). */
    w->sp.fd = -1;
    w->state = W_UP;
    fail(w, PP_PERMANENT(ENOENT), "could not be started: %s", w->exe_err);
    return w->fail_rc;
  }
  w->denied[0] = 0;
  rc = pp_worker_spawn(w->inline_mode ? NULL : w->exe, w->name, w->inline_mode, &w->privs, &w->sp,
                       err, sizeof(err));
  if (rc) {
    w->sp.fd = -1;
    w->state = W_UP; /* so fail() books it like any other failure */
    fail(w, rc, "could not be started: %s", err);
    return rc;
  }
  uint64_t now = now_ns();
  w->state = W_UP;
  w->exit_acked = false;
  w->up_since = w->last_io = now;
  w->next_check = now;
  w->qlen = 0;
  if (w->init.err) {
    fail(w, w->init.err, "could not be started: out of memory");
    return w->fail_rc;
  }
  if ((rc = send_req(w, PP_MSG_INIT, w->init.data, w->init.len))) return rc;
  if (w->have_session && (rc = send_start(w))) return rc;
  if (w->ntargets) {
    prune_targets(w);
    if (w->ntargets && (rc = send_targets(w, w->targets, w->ntargets))) return rc;
  }
  return 0;
}

/* Why a worker that is not up cannot serve a request. */
static int not_up(struct pp_worker *w, char *err, size_t errlen) {
  switch (w->state) {
    case W_BACKOFF: {
      uint64_t now = now_ns();
      unsigned s = w->next_restart > now ? (unsigned)((w->next_restart - now + NS - 1) / NS) : 0;
      snprintf(err, errlen, "%s; restarting in %u s", w->reason, s);
      return -EAGAIN;
    }
    case W_DEAD:
      snprintf(err, errlen, "%s", w->reason);
      return -EIO;
    case W_OFF:
      snprintf(err, errlen, "%s", w->reason);
      return w->fail_rc;
    default:
      snprintf(err, errlen, "plugin %s is not started", w->name);
      return -ENOTCONN;
  }
}

static void set_err(char *err, size_t errlen, const char *s) {
  if (err && errlen) snprintf(err, errlen, "%s", s);
}

/* ---- API ---- */

struct pp_worker *pp_worker_new(const struct pp_plugin_info *info,
                                const struct pp_plugin_config *pcfg,
                                const struct pp_worker_opts *opts) {
  if (!info || info->error || !info->desc.name || !info->path) return NULL;
  struct pp_worker *w = calloc(1, sizeof(*w));
  if (!w) return NULL;
  w->name = strdup(info->desc.name);
  w->path = strdup(info->path);
  if (!w->name || !w->path || pp_host_config_build(&w->cfg, &info->desc, pcfg)) {
    free(w->name);
    free(w->path);
    free(w);
    return NULL;
  }
  snprintf(w->tag, sizeof(w->tag), "polyprof.%s", w->name);
  w->inline_mode = opts && opts->inline_mode;
  w->privs = pp_priv_for_plugin(info->desc.capabilities | pp_profile_types_step_caps(pcfg));
  pp_wbuf_init(&w->init);
  pp_worker_init_encode(&w->init, w->path, w->name, &w->cfg);
  if (!w->inline_mode && pp_worker_exe_find(opts ? opts->worker_path : NULL, w->exe, sizeof(w->exe),
                                            w->exe_err, sizeof(w->exe_err)) < 0) {
    w->exe[0] = 0;
    pp_log(PP_LOG_ERROR, "polyprof", "plugin %s: %s", w->name, w->exe_err);
  }
  w->memory_limit_mb = opts ? opts->memory_limit_mb : 0;
  w->timeout_s = opts && opts->timeout_s > 0 ? opts->timeout_s : 10;
  w->backoff_max_s = opts && opts->backoff_max_s > 0 ? opts->backoff_max_s : 1;
  w->timeout_ns = (uint64_t)w->timeout_s * NS;
  w->backoff_s = 1;
  w->sp.fd = -1;
  pp_ipc_rx_init(&w->rx);
  if (w->inline_mode && w->memory_limit_mb > 0)
    pp_log(PP_LOG_INFO, "polyprof",
           "plugin %s runs inline: its memory limit (%d MiB) is not enforced and a crash "
           "takes the agent down",
           w->name, w->memory_limit_mb);
  return w;
}

const char *pp_worker_name(const struct pp_worker *w) {
  return w->name;
}

bool pp_worker_running(const struct pp_worker *w) {
  return w->state == W_UP;
}

pid_t pp_worker_pid(const struct pp_worker *w) {
  return w->state == W_UP ? w->sp.pid : 0;
}

int pp_worker_fd(const struct pp_worker *w) {
  return w->state == W_UP ? w->sp.fd : -1;
}

unsigned pp_worker_restarts(const struct pp_worker *w) {
  return w->failures;
}

bool pp_worker_off(const struct pp_worker *w) {
  return w->state == W_OFF;
}

int pp_worker_start(struct pp_worker *w, const struct pp_session *session, char *err,
                    size_t errlen) {
  char *mode = session->mode ? strdup(session->mode) : NULL;
  if (session->mode && !mode) return set_err(err, errlen, "out of memory"), -ENOMEM;
  free(w->s_mode);
  w->s_mode = mode;
  w->s_freq = session->frequency_hz;
  w->s_dur = session->duration_s;
  w->s_flags = session->flags;
  w->s_tick = session->tick_interval_ns;
  w->have_session = true;
  w->wanted = true;
  w->ntargets = 0; /* a new session: the core adds the current set next */
  int rc;
  if (w->state == W_IDLE)
    rc = spawn(w);
  else if (w->state == W_UP)
    rc = send_start(w);
  else
    return not_up(w, err, errlen);
  if (!rc) rc = wait_for(w, UNTIL_IDLE);
  if (rc && err) snprintf(err, errlen, "%s", w->reason);
  return rc;
}

int pp_worker_add_targets(struct pp_worker *w, const struct pp_target *t, size_t n, char *err,
                          size_t errlen) {
  if (n && !t) return -EINVAL;
  if (remember_targets(w, t, n)) return set_err(err, errlen, "out of memory"), -ENOMEM;
  if (w->state != W_UP) return not_up(w, err, errlen);
  if (n == 0) return 0;
  if (n > (PP_IPC_MAX_MSG - 4) / sizeof(*t))
    return set_err(err, errlen, "too many targets"), -E2BIG;
  int rc = send_targets(w, t, n);
  if (rc == -EBUSY) { /* the queue is full: let the worker catch up first */
    rc = wait_for(w, UNTIL_IDLE);
    if (!rc) rc = send_targets(w, t, n);
  }
  if (rc) set_err(err, errlen, w->reason);
  return rc;
}

/* A snapshot or a dump: the reply is a PROFILE either way, collected by
 * pp_worker_snapshot_end(). */
static int collect_begin(struct pp_worker *w, uint32_t type, char *err, size_t errlen) {
  if (w->snap_pending) return set_err(err, errlen, "a snapshot is already in flight"), -EBUSY;
  if (w->state != W_UP) return not_up(w, err, errlen);
  free(w->snap);
  w->snap = NULL;
  w->snap_ready = w->snap_failed = false;
  int rc = send_req(w, type, NULL, 0);
  if (rc) {
    set_err(err, errlen, w->reason);
    return rc;
  }
  w->snap_pending = true;
  return 0;
}

int pp_worker_snapshot_begin(struct pp_worker *w, char *err, size_t errlen) {
  return collect_begin(w, PP_MSG_SNAPSHOT, err, errlen);
}

int pp_worker_dump_begin(struct pp_worker *w, char *err, size_t errlen) {
  return collect_begin(w, PP_MSG_DUMP, err, errlen);
}

int pp_worker_snapshot_end(struct pp_worker *w, struct pp_profile *out, char *err, size_t errlen) {
  pp_profile_clear(out);
  if (!w->snap_pending) return set_err(err, errlen, "no snapshot requested"), -EINVAL;
  if (!w->snap_ready && !w->snap_failed) wait_for(w, UNTIL_SNAPSHOT);
  w->snap_pending = false;
  if (!w->snap_ready) {
    set_err(err, errlen, w->reason);
    return w->fail_rc ? w->fail_rc : -ECHILD;
  }
  struct pp_rbuf r;
  pp_rbuf_init(&r, w->snap, w->snap_len);
  int rc = (int)pp_rbuf_u32(&r);
  const char *msg;
  size_t n;
  int drc = pp_rbuf_str(&r, 65536, &msg, &n);
  if (!drc) drc = pp_profile_decode(out, w->snap + r.off, pp_rbuf_left(&r));
  free(w->snap);
  w->snap = NULL;
  w->snap_ready = false;
  if (drc) {
    pp_profile_clear(out);
    if (w->state == W_UP) fail(w, -EPROTO, "sent a corrupt profile");
    set_err(err, errlen, "sent a corrupt profile");
    return -EPROTO;
  }
  if (rc && err) snprintf(err, errlen, "%.*s", (int)n, msg ? msg : "");
  return rc;
}

int pp_worker_stop(struct pp_worker *w) {
  w->wanted = false;
  w->have_session = false;
  w->ntargets = 0;
  if (w->state == W_BACKOFF) w->state = W_IDLE;
  if (w->state != W_UP) return 0;
  int rc = send_req(w, PP_MSG_STOP, NULL, 0);
  if (!rc) rc = send_req(w, PP_MSG_EXIT, NULL, 0);
  if (!rc) rc = wait_for(w, UNTIL_IDLE);
  if (w->state != W_UP) return rc ? rc : w->fail_rc;
  /* EXIT answered: the process ends by itself, the thread returns. */
  bool gone = true;
  if (w->sp.pid > 0) {
    int st;
    gone = pp_reap(w->sp.pid, now_ns() + w->timeout_ns, &st);
    if (gone) w->sp.pid = 0;
  }
  bool abandoned = teardown(w, !gone, false);
  w->state = abandoned ? W_DEAD : W_IDLE;
  if (abandoned) snprintf(w->reason, sizeof(w->reason), "did not exit after EXIT");
  return rc;
}

void pp_worker_service(struct pp_worker *w) {
  if (w->nzombies) reap_zombies(w, 0);
  uint64_t now = now_ns();
  if (w->state == W_UP) {
    pump(w);
    /* Idle for a while: make sure the loop is not stuck in tick(). pump()
     * may have read a message after `now` was taken (last_io > now): the
     * unsigned difference would wrap and ping on every call. */
    now = now_ns();
    if (w->state == W_UP && w->qlen == 0 && now > w->last_io && now - w->last_io >= w->timeout_ns)
      send_req(w, PP_MSG_PING, NULL, 0);
  } else if (w->state == W_BACKOFF && w->wanted && now >= w->next_restart) {
    pp_log(PP_LOG_INFO, "polyprof", "plugin %s: restarting worker (last failure: %s)", w->name,
           w->reason);
    spawn(w);
  }
}

void pp_worker_free(struct pp_worker *w) {
  if (!w) return;
  if (w->state == W_UP) pp_worker_stop(w);
  if (w->state == W_UP) teardown(w, true, true);
  reap_zombies(w, now_ns() + NS / 10);
  pp_ipc_rx_free(&w->rx);
  pp_host_config_free(&w->cfg);
  pp_wbuf_free(&w->init);
  free(w->snap);
  free(w->targets);
  free(w->s_mode);
  free(w->name);
  free(w->path);
  free(w);
}
