/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Attach to one Node.js process and drive its helper (helper.h).
 *
 * Attach is a small state machine driven from tick() so that a slow target
 * never holds up the worker for long: identify the process (never signal
 * anything we have not positively identified as Node), note the loopback
 * sockets it already listens on, SIGUSR1 it through a pidfd, watch closely
 * for the new listening socket, ask it for /json/list, open the WebSocket
 * and send exactly one request: the install expression, which checks the
 * process is the one we mean, starts the helper and closes the inspector
 * we opened. The TCP inspector is thus open only for the moment of the
 * attach; a local user who reaches it then could run code in the process
 * (Node's SIGUSR1 inspector has no authentication), so the window is kept
 * to a few milliseconds and nothing is left listening after it.
 *
 * From then on the helper's unix socket (in a 0700 directory of the
 * process's user) is the only channel: snapshots, the profile of a process
 * that exits, and the stop. When the agent dies its end closes and the
 * helper undoes everything by itself.
 *
 * An inspector that was already open (--inspect, an IDE) serves the install
 * too and is left as it was. A marker file in the scratch directory
 * remembers an inspector we opened until it is closed, so a restarted
 * worker still closes one a crashed worker opened.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "helper.h"
#include "inspector_list.h"
#include "nodejs.h"
#include "polyprof/kit/cap_step.h"
#include "polyprof/kit/target_files.h"

#define MS 1000000ull
/* where Node's SIGUSR1 inspector listens unless told otherwise */
#define INSPECTOR_PORT 9229

int nodejs_alive(struct nodejs_state *st, const struct nodejs_target *t) {
  uint64_t start = 0;
  return st->host->proc_start_time(st->host, t->pid, &start) == 0 && start == t->start_time;
}

static void marker_path(struct nodejs_state *st, const struct nodejs_target *t, char *buf,
                        size_t len) {
  const char *dir = st->host->scratch_dir(st->host);
  snprintf(buf, len, "%s/inspector-%u-%llu", dir ? dir : "/nonexistent", t->pid,
           (unsigned long long)t->start_time);
}

static void marker_set(struct nodejs_state *st, const struct nodejs_target *t, int on) {
  char p[4200];
  marker_path(st, t, p, sizeof(p));
  if (on) {
    int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) close(fd);
  } else {
    unlink(p);
  }
}

static int marker_exists(struct nodejs_state *st, const struct nodejs_target *t) {
  char p[4200];
  marker_path(st, t, p, sizeof(p));
  return access(p, F_OK) == 0;
}

/* Inspector sessions other than ours on the inspector we are connected to
 * (0, a count, or negative errno when it cannot be told). Closing the
 * inspector makes Node's main thread join the inspector I/O thread, which
 * only ends once every session socket is gone: a client that does not read
 * its socket holds the target until it does. An inspector we opened is
 * closed all the same (left open, it runs anyone's code); this only tells
 * the log why a target may pause. */
static int other_sessions(const struct nodejs_target *t) {
  struct sockaddr_storage ss;
  socklen_t sl = sizeof(ss);
  if (t->cdp.ws.fd < 0 || getpeername(t->cdp.ws.fd, (struct sockaddr *)&ss, &sl) < 0)
    return -ENOTCONN;
  uint16_t port = 0;
  if (ss.ss_family == AF_INET)
    port = ntohs(((const struct sockaddr_in *)&ss)->sin_port);
  else if (ss.ss_family == AF_INET6)
    port = ntohs(((const struct sockaddr_in6 *)&ss)->sin6_port);
  int n = nodejs_port_connections(t->pid, port);
  if (n < 0) return n;
  return n >= 1 ? n - 1 : -EIO; /* not even ours seen: cannot tell */
}

static void close_inspector(struct nodejs_state *st, struct nodejs_target *t, uint64_t deadline);

/* Ends a session still open on the inspector. An inspector we opened is
 * closed through it: left listening, it runs anyone's code and holds the
 * port every other Node of the network namespace needs for its own. Either
 * way Node's close frame is waited for: dropping the connection while Node
 * still writes it crashes Node 20. */
static void end_session(struct nodejs_state *st, struct nodejs_target *t) {
  if (t->cdp.ws.fd < 0) return;
  uint64_t deadline = pp_clock_ns() + (uint64_t)st->command_timeout_ms * MS;
  if (t->we_opened && nodejs_alive(st, t))
    close_inspector(st, t, deadline);
  else
    nodejs_ws_finish(&t->cdp.ws, deadline);
}

void nodejs_guard_release(struct nodejs_state *st, struct nodejs_target *t) {
  if (!t->guarded) return;
  t->guarded = 0;
  nodejs_guard_disarm(st->guard, t->netns_cookie);
}

/* Arms the attach guard for the port t's SIGUSR1 inspector will listen on,
 * loading it the first time. Until released (the helper reports that the
 * target's event loop turned after the install, or the target is let go),
 * no process but this worker may connect to that port in t's network
 * namespace. 0, or -errno with t->reason set: then t must not be signalled. */
static int guard_target(struct nodejs_state *st, struct nodejs_target *t) {
  if (t->inspect_port < 0) {
    snprintf(t->reason, sizeof(t->reason),
             "its inspector port is set by an --inspect-port this plugin cannot read (a "
             "separate argument, 0 or a range): its attach window cannot be guarded");
    return -ENOTSUP;
  }
  if (!st->guard) {
    char why[160] = "";
    st->guard = nodejs_guard_new(why, sizeof(why));
    if (!st->guard) {
      snprintf(t->reason, sizeof(t->reason),
               "the attach guard (a cgroup connect hook refusing other users' connections to the "
               "inspector) cannot be set up: %.120s",
               why);
      return -EPERM;
    }
  }
  int rc = nodejs_guard_netns_cookie(t->pid, &t->netns_cookie);
  if (rc == 0)
    rc = nodejs_guard_arm(st->guard, t->netns_cookie,
                          (uint16_t)(t->inspect_port ? t->inspect_port : INSPECTOR_PORT));
  if (rc < 0) {
    snprintf(t->reason, sizeof(t->reason), "arming the attach guard in its network namespace: %s",
             rc == -EBUSY ? "armed for another port by another target" : strerror(-rc));
    return rc;
  }
  t->guarded = 1;
  return 0;
}

static void fail_target(struct nodejs_state *st, struct nodejs_target *t, int level,
                        const char *fmt, ...) PP_PRINTF(4, 5);
static void fail_target(struct nodejs_state *st, struct nodejs_target *t, int level,
                        const char *fmt, ...) {
  char why[sizeof(t->reason)];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof(why), fmt, ap); /* fmt's arguments may be t->reason itself */
  va_end(ap);
  memcpy(t->reason, why, sizeof(why));
  end_session(st, t);
  nodejs_chan_close(&t->chan);
  nodejs_guard_release(st, t);
  if (!nodejs_alive(st, t)) {
    t->state = T_GONE;
    return;
  }
  PP_LOG(st->host, t->quiet ? PP_LOG_DEBUG : level, "pid %u: %s", t->pid, t->reason);
  st->attach_failures++;
  t->state = T_FAILED; /* retried after retry_s (settle() in nodejs_targets.c) */
}

/* Sends SIGUSR1 only to the process identified by pid + start time, through
 * a pidfd so a pid reused in between cannot receive it. */
static int signal_node(struct nodejs_state *st, struct nodejs_target *t) {
  int pfd = (int)syscall(SYS_pidfd_open, (pid_t)t->pid, 0);
  if (pfd < 0 && errno != ENOSYS) return -errno;
  int rc = 0;
  if (!nodejs_alive(st, t))
    rc = -ESRCH;
  else if (nodejs_catches_sigusr1(t->pid) != 1)
    rc = -ENOTSUP; /* its handler went away: the signal would kill it */
  else {
    /* the one step that needs CAP_KILL (a target of another user) */
    struct pp_cap_step k;
    pp_cap_step_begin(&k, PP_CAP_NEEDS_KILL);
    if (pfd >= 0)
      rc = syscall(SYS_pidfd_send_signal, pfd, SIGUSR1, NULL, 0) < 0 ? -errno : 0;
    else
      rc = kill((pid_t)t->pid, SIGUSR1) < 0 ? -errno : 0;
    pp_cap_step_end(&k);
  }
  if (pfd >= 0) close(pfd);
  return rc;
}

/* GET /json/list on port; on success path gets the WebSocket path. */
static int probe_inspector(struct nodejs_state *st, struct nodejs_target *t, uint16_t port,
                           char *path, size_t plen, uint64_t deadline) {
  char *body = NULL;
  int status = nodejs_http_get(t->pid, port, "/json/list", 64 * 1024, &body, deadline);
  if (status != 200) {
    free(body);
    return status < 0 ? status : -EPROTO;
  }
  int rc = nodejs_inspector_ws_path(body, path, plen);
  free(body);
  return rc;
}

/* Closes the inspector we opened through our session: inspector.close()
 * ends our session too, so EOF is the expected answer. */
static void close_inspector(struct nodejs_state *st, struct nodejs_target *t, uint64_t deadline) {
  static const char expr[] =
      "(typeof process.getBuiltinModule === 'function' ? process.getBuiltinModule('inspector') "
      ": require('inspector')).close()";
  json_t *v = NULL;
  int rc = nodejs_cdp_evaluate(&t->cdp, expr, &v, NULL, 0, deadline);
  json_decref(v);
  if (rc == 0 || rc == -ECONNRESET) {
    marker_set(st, t, 0);
    t->we_opened = 0;
  } else {
    PP_LOG(st->host, PP_LOG_WARNING, "pid %u: could not close the inspector: %s", t->pid,
           strerror(-rc));
  }
  nodejs_ws_finish(&t->cdp.ws, deadline);
}

/* A fresh directory name for the helper: its socket lives there, so the
 * name must not be guessable ahead (the helper refuses one that exists). */
static int helper_dir(struct nodejs_target *t) {
  uint8_t r[8];
  if (getrandom(r, sizeof(r), 0) != sizeof(r)) return -EIO;
  snprintf(t->dir, sizeof(t->dir), "/tmp/polyprof-nodejs-%u-%02x%02x%02x%02x%02x%02x%02x%02x",
           t->ns_pid, r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
  return 0;
}

/* Sends the install expression over the session just opened on port, then
 * ends the session (closing the inspector if we opened it). 0 with the
 * target in T_HELLO, -ESRCH for an inspector of another process, or
 * another negative errno with t->reason set. */
/* The install expression for t (malloc'd into *out), or -errno with
 * t->reason set. */
static int build_install(struct nodejs_state *st, struct nodejs_target *t, char **out) {
  char pidns[64] = "", path[64];
  snprintf(path, sizeof(path), "/proc/%u/ns/pid", t->pid);
  ssize_t hl = readlink(path, pidns, sizeof(pidns) - 1);
  if (hl <= 0) {
    snprintf(t->reason, sizeof(t->reason), "cannot read its pid namespace");
    return -EIO;
  }
  pidns[hl] = '\0';
  if (helper_dir(t) < 0) {
    snprintf(t->reason, sizeof(t->reason), "no random bytes for the helper's directory");
    return -EIO;
  }
  struct nodejs_helper_params hp = {
      .dir = t->dir,
      .addon = st->mode == NODEJS_ATTACH_MAPS ? t->addon : NULL,
      .ns_pid = t->ns_pid,
      .pid_ns = pidns,
      .interval_us = st->interval_us,
      .wait_ms = (uint32_t)st->attach_timeout_s * 1000 + (uint32_t)st->command_timeout_ms,
      .close_inspector = t->we_opened,
  };
  char *expr = malloc(16384);
  int n = expr ? nodejs_helper_install_expr(expr, 16384, &hp) : -ENOMEM;
  if (n < 0) {
    free(expr);
    snprintf(t->reason, sizeof(t->reason), "building the helper: %s", strerror(-n));
    return n;
  }
  *out = expr;
  return 0;
}

static int install_helper(struct nodejs_state *st, struct nodejs_target *t, uint16_t port) {
  uint64_t deadline = pp_clock_ns() + (uint64_t)st->command_timeout_ms * MS;
  char *expr = NULL;
  int rc = build_install(st, t, &expr);
  if (rc < 0) {
    end_session(st, t); /* nothing was asked of it: an inspector we opened is closed */
    return rc;
  }
  if (t->we_opened) {
    int others = other_sessions(t);
    if (others != 0)
      PP_LOG(st->host, PP_LOG_WARNING,
             "pid %u: %s other client(s) on the inspector we opened (port %u): closing it "
             "anyway, they are disconnected and the process may pause until they read",
             t->pid, others > 0 ? "there are" : "cannot rule out", port);
  }
  json_t *v = NULL;
  char err[200] = "";
  rc = nodejs_cdp_evaluate(&t->cdp, expr, &v, err, sizeof(err), deadline);
  free(expr);
  const char *r = json_string_value(v);
  if (rc == -ECONNRESET && t->we_opened) {
    /* the install closed the inspector, and our session with it, before
     * its reply: success if it made the helper's directory (it does so
     * before closing); otherwise something else ended our session first
     * (another client closing the inspector) and nothing of ours runs */
    char why[256] = "";
    int dfd = pp_target_open(t->pid, t->dir, PP_TF_DIR | PP_TF_OWNED, NULL, NULL, why, sizeof(why));
    if (dfd >= 0) {
      close(dfd);
      rc = 0;
    } else {
      snprintf(t->reason, sizeof(t->reason),
               "the inspector ended our session before the install ran (another client closed "
               "it?): %.150s",
               why);
      rc = -EIO;
    }
  } else if (rc == 0 && r && strcmp(r, "not the process") == 0) {
    snprintf(t->reason, sizeof(t->reason),
             "the inspector reached belongs to another process (port collision)");
    rc = -ESRCH;
  } else if (rc == 0 && (!r || strcmp(r, "ok") != 0)) {
    snprintf(t->reason, sizeof(t->reason), "%s%.200s",
             st->mode == NODEJS_ATTACH_MAPS ? "attach-maps: " : "", r ? r : "unexpected reply");
    rc = -EPROTO;
  } else if (rc < 0) {
    snprintf(t->reason, sizeof(t->reason), "installing the helper: %s",
             err[0] ? err : strerror(-rc));
  }
  json_decref(v);
  if (rc < 0 && rc != -ESRCH && t->we_opened && t->cdp.ws.fd >= 0 && nodejs_alive(st, t)) {
    close_inspector(st, t, deadline); /* ours, and the helper did not take over */
  } else {
    if (rc == 0 && t->we_opened) {
      marker_set(st, t, 0);
      t->we_opened = 0;
    }
    nodejs_ws_finish(&t->cdp.ws, deadline);
  }
  if (rc < 0) return rc;
  t->state = T_HELLO;
  t->deadline_ns = pp_clock_ns() + (uint64_t)st->attach_timeout_s * 1000 * MS;
  return 0;
}

/* Opens the session on port and installs the helper through it. */
static int connect_port(struct nodejs_state *st, struct nodejs_target *t, uint16_t port,
                        const char *wspath) {
  uint64_t deadline = pp_clock_ns() + (uint64_t)st->command_timeout_ms * MS;
  uint64_t max_msg = (uint64_t)st->max_profile_mb << 20;
  int rc = nodejs_ws_open(&t->cdp.ws, t->pid, port, wspath, max_msg, deadline);
  if (rc < 0) {
    snprintf(t->reason, sizeof(t->reason), "WebSocket to the inspector on port %u: %s", port,
             strerror(-rc));
    return rc;
  }
  int opened = t->we_opened;
  rc = install_helper(st, t, port);
  if (rc < 0 && rc != -ESRCH) t->start_failed = 1;
  if (rc == 0)
    PP_LOG(st->host, PP_LOG_INFO, "pid %u: inspector on port %u%s: helper installed", t->pid, port,
           opened ? " (opened by us, closed again)" : " (already open, left open)");
  return rc;
}

static int listener_known(const struct nodejs_target *t, uint64_t inode) {
  for (int i = 0; i < t->npre; i++)
    if (t->pre[i].inode == inode) return 1;
  return 0;
}

/* Tries the given listeners as inspectors. 0 once the helper is installed. */
static int try_listeners(struct nodejs_state *st, struct nodejs_target *t,
                         const struct nodejs_listener *l, int n, int only_new) {
  int rc = -ENOENT;
  for (int i = 0; i < n; i++) {
    if (only_new && listener_known(t, l[i].inode)) continue;
    char path[160];
    uint64_t deadline = pp_clock_ns() + (uint64_t)st->command_timeout_ms * MS;
    if (probe_inspector(st, t, l[i].port, path, sizeof(path), deadline) != 0) continue;
    rc = connect_port(st, t, l[i].port, path);
    if (rc == 0 || rc != -ESRCH) return rc;
  }
  return rc;
}

/* One SIGUSR1 attach at a time per network namespace: two inspectors
 * starting together would race for port 9229. */
static int netns_busy(struct nodejs_state *st, const struct nodejs_target *t) {
  struct pp_target_entry *oe;
  PP_TARGETS_FOREACH(st->tt, oe, PP_TARGET_ATTACHED) {
    const struct nodejs_target *o = oe->data;
    if (o && o != t && o->state == T_WAIT && o->netns == t->netns) return 1;
  }
  return 0;
}

/* The other target of ours in t's network namespace whose socket `inode`
 * is (an inspector it is opening or closing), or 0. */
static uint32_t netns_holder(struct nodejs_state *st, const struct nodejs_target *t,
                             uint64_t inode) {
  struct pp_target_entry *oe;
  PP_TARGETS_FOREACH(st->tt, oe, PP_TARGET_ATTACHED) {
    const struct nodejs_target *o = oe->data;
    if (!o || o == t || o->netns != t->netns) continue;
    struct nodejs_listener l[NODEJS_MAX_PRE];
    int n = nodejs_listeners(o->pid, l, NODEJS_MAX_PRE);
    for (int i = 0; i < n; i++)
      if (l[i].inode == inode) return o->pid;
  }
  return 0;
}

/* Waits in T_QUEUED, at most attach_timeout_s in a row. 0 while it may
 * wait, -ETIMEDOUT once that is over. */
static int queue_target(struct nodejs_state *st, struct nodejs_target *t) {
  uint64_t now = pp_clock_ns();
  if (t->state != T_QUEUED) {
    t->state = T_QUEUED;
    t->deadline_ns = now + (uint64_t)st->attach_timeout_s * 1000 * MS;
  }
  return now < t->deadline_ns ? 0 : -ETIMEDOUT;
}

static void poll_listen(struct nodejs_state *st, struct nodejs_target *t);

/* Joins an open inspector, or opens one with SIGUSR1. 0 (T_WAIT, T_HELLO),
 * or negative with the target failed (T_FAILED or T_GONE). */
static int open_inspector(struct nodejs_state *st, struct nodejs_target *t) {
  if (st->mode == NODEJS_ATTACH_MAPS && !t->addon[0]) {
    /* before any signal: a target whose /tmp we cannot put the addon in
     * is not made to open its inspector for nothing */
    if (nodejs_perfmap_prepare(st, t, t->addon, sizeof(t->addon)) < 0) {
      fail_target(st, t, PP_LOG_WARNING, "%s", t->reason);
      return t->state == T_GONE ? -ESRCH : -EPERM;
    }
  }
  t->we_opened = marker_exists(st, t);
  int n = nodejs_listeners(t->pid, t->pre, NODEJS_MAX_PRE);
  t->npre = n > 0 ? n : 0;
  /* Open already: ours from a crashed worker, or the user's (--inspect).
   * Only then are existing sockets probed, so the app's own servers see no
   * stray requests otherwise. */
  if ((t->inspect_flag || t->we_opened) && t->npre && try_listeners(st, t, t->pre, t->npre, 0) == 0)
    return 0;
  if (t->inspect_flag && !t->we_opened) {
    char why[200];
    snprintf(why, sizeof(why), "%.199s", t->reason[0] ? t->reason : "no listening socket");
    fail_target(st, t, PP_LOG_WARNING, "started with --inspect but no inspector answered: %s", why);
    return t->state == T_GONE ? -ESRCH : -ECONNREFUSED;
  }
  /* SIGUSR1 makes Node listen on 127.0.0.1:9229 of its network namespace:
   * taken by another process, the inspector cannot start there */
  int sigport = t->inspect_port > 0 ? t->inspect_port : INSPECTOR_PORT;
  uint64_t held = nodejs_port_listener(t->pid, (uint16_t)sigport);
  if (held && !listener_known(t, held)) {
    uint32_t holder = netns_holder(st, t, held);
    if (holder && queue_target(st, t) == 0) return 0; /* its inspector is on its way out */
    char who[64];
    if (holder)
      snprintf(who, sizeof(who), "Node.js process %u, whose inspector did not close", holder);
    else
      snprintf(who, sizeof(who), "another process");
    fail_target(st, t, PP_LOG_WARNING,
                "port %d of its network namespace is held by %s: Node's SIGUSR1 inspector "
                "could not listen; not signalled",
                sigport, who);
    return t->state == T_GONE ? -ESRCH : -EADDRINUSE;
  }
  /* nobody but us may reach the inspector while it can listen */
  int rc = guard_target(st, t);
  if (rc < 0) {
    char why[sizeof(t->reason)];
    memcpy(why, t->reason, sizeof(why));
    fail_target(st, t, PP_LOG_WARNING, "%s; not signalled", why);
    return t->state == T_GONE ? -ESRCH : rc;
  }
  marker_set(st, t, 1); /* before the signal: a crash right after still knows */
  rc = signal_node(st, t);
  if (rc < 0) {
    marker_set(st, t, 0);
    nodejs_guard_release(st, t);
    if (rc == -ESRCH) {
      t->state = T_GONE;
      return rc;
    }
    fail_target(st, t, PP_LOG_WARNING, "cannot send SIGUSR1: %s", strerror(-rc));
    return t->state == T_GONE ? -ESRCH : rc;
  }
  t->we_opened = 1;
  t->state = T_WAIT;
  t->deadline_ns = pp_clock_ns() + (uint64_t)st->attach_timeout_s * 1000 * MS;
  /* the inspector usually listens within milliseconds: catch it now, so
   * the window in which anyone could reach it stays that short */
  poll_listen(st, t);
  return t->state == T_FAILED || t->state == T_GONE ? -EIO : 0;
}

int nodejs_begin_attach(struct nodejs_state *st, struct pp_target_entry *e,
                        struct nodejs_target *t) {
  struct nodejs_facts f;
  char why[256] = "";
  int rc = nodejs_identify(t->pid, &f, why, sizeof(why));
  if (rc == -ESRCH || !nodejs_alive(st, t)) return -ESRCH;
  if (rc == -EAGAIN && e->attempts < NODEJS_ATTACH_ATTEMPTS)
    return -EAGAIN; /* quietly: probably still starting */
  if (rc < 0) {
    PP_INFO(st->host, "pid %u: not profiled: %s", t->pid, why);
    snprintf(e->reason, sizeof(e->reason), "%.*s", (int)sizeof(e->reason) - 1, why);
    /* perf mode only reads what the runtime writes: nothing to report */
    return st->mode == NODEJS_PERF ? PP_ATTACH_IGNORE : PP_ATTACH_SKIP;
  }
  t->perf_prof = f.perf_prof;
  t->inspect_flag = f.inspect_flag;
  t->inspect_port = f.inspect_port;
  if (st->mode == NODEJS_PERF) {
    if (!f.perf_prof)
      PP_INFO(st->host,
              "pid %u: started without --perf-basic-prof/--perf-prof: perf cannot name its "
              "JS frames",
              t->pid);
    return PP_ATTACH_IGNORE;
  }
  if (st->mode == NODEJS_ATTACH_MAPS && f.perf_prof) {
    PP_INFO(st->host, "pid %u: already writes a perf map (--perf-basic-prof): left alone", t->pid);
    return PP_ATTACH_IGNORE;
  }
  if (st->host->proc_ns_pid(st->host, t->pid, &t->ns_pid) < 0) t->ns_pid = t->pid;
  char nsp[64];
  struct stat ns;
  snprintf(nsp, sizeof(nsp), "/proc/%u/ns/net", t->pid);
  t->netns = stat(nsp, &ns) == 0 ? (uint64_t)ns.st_ino : 0;
  if (netns_busy(st, t)) {
    queue_target(st, t); /* a tick opens it when the namespace is free */
    return 0;
  }
  return open_inspector(st, t);
}

/* T_WAIT: looks for the inspector's new listening socket, closely for a
 * short while (each millisecond it listens, anyone could use it), then
 * once per tick until attach_timeout_s. */
static void poll_listen(struct nodejs_state *st, struct nodejs_target *t) {
  uint64_t close_watch = pp_clock_ns() + 300 * MS;
  for (;;) {
    struct nodejs_listener now[NODEJS_MAX_PRE];
    int n = nodejs_listeners(t->pid, now, NODEJS_MAX_PRE);
    if (n < 0 && !nodejs_alive(st, t)) {
      t->state = T_GONE;
      return;
    }
    t->start_failed = 0;
    if (n > 0 && try_listeners(st, t, now, n, 1) == 0) return;
    if (t->start_failed || t->state == T_GONE) {
      char why[sizeof(t->reason)];
      memcpy(why, t->reason, sizeof(why));
      if (t->state != T_GONE) fail_target(st, t, PP_LOG_WARNING, "%s", why);
      return;
    }
    if (pp_clock_ns() >= close_watch) break;
    usleep(2000);
  }
  if (pp_clock_ns() < t->deadline_ns) return;
  /* No new socket: the app (or another client's SIGUSR1) had opened the
   * inspector earlier, which SIGUSR1 leaves alone. Then it is not ours, and
   * must be marked so before connecting: we never close it. */
  marker_set(st, t, 0);
  t->we_opened = 0;
  if (t->npre && try_listeners(st, t, t->pre, t->npre, 0) == 0) return;
  fail_target(st, t, PP_LOG_WARNING,
              "the inspector did not start listening within %llds of SIGUSR1 (port 9229 in use "
              "in its network namespace, or a SIGUSR1 listener in the app?)",
              (long long)st->attach_timeout_s);
}

/* T_HELLO: connects to the helper's socket once it listens. */
static void poll_hello(struct nodejs_state *st, struct nodejs_target *t) {
  char sock[128], why[256] = "";
  snprintf(sock, sizeof(sock), "%s/%s", t->dir, NODEJS_HELPER_SOCKET);
  nodejs_chan_init(&t->chan, (size_t)st->max_profile_mb << 20);
  int rc = nodejs_chan_connect(&t->chan, t->pid, sock, why, sizeof(why));
  if (rc == -ENOENT || rc == -ECONNREFUSED) {
    if (!nodejs_alive(st, t)) {
      t->state = T_GONE;
    } else if (pp_clock_ns() >= t->deadline_ns) {
      fail_target(st, t, PP_LOG_WARNING, "the helper did not start within %llds (%s)",
                  (long long)st->attach_timeout_s, why);
    }
    return;
  }
  if (rc < 0) {
    fail_target(st, t, PP_LOG_WARNING, "the helper's socket: %s", why);
    return;
  }
  json_t *m = NULL;
  rc = nodejs_chan_recv(&t->chan, &m, pp_clock_ns() + (uint64_t)st->command_timeout_ms * MS);
  const char *type = json_string_value(json_object_get(m, "t"));
  json_t *jpid = json_object_get(m, "pid");
  const char *ver = json_string_value(json_object_get(m, "node"));
  if (rc == 0 && type && strcmp(type, "hello") == 0 && json_is_integer(jpid) &&
      json_integer_value(jpid) == (json_int_t)t->ns_pid) {
    snprintf(t->version, sizeof(t->version), "%s", ver ? ver : "");
    t->state = st->mode == NODEJS_ATTACH_MAPS ? T_MAPS : T_LIVE;
    t->maps_on = st->mode == NODEJS_ATTACH_MAPS;
    t->reason[0] = '\0';
    PP_LOG(st->host, PP_LOG_INFO, "pid %u: Node.js %s, %s", t->pid, t->version,
           t->maps_on ? "perf map enabled" : "profiling");
  } else if (rc == 0 && type && strcmp(type, "error") == 0) {
    const char *e = json_string_value(json_object_get(m, "error"));
    fail_target(st, t, PP_LOG_WARNING, "the helper could not start: %.200s", e ? e : "?");
  } else if (!nodejs_alive(st, t)) {
    t->state = T_GONE;
  } else {
    fail_target(st, t, PP_LOG_WARNING, "the helper did not greet: %s",
                rc < 0 ? strerror(-rc) : "unexpected message");
  }
  json_decref(m);
}

/* Handles what the helper sends unasked: the last profile of a process
 * that exits, or its end. 1 if m was one of these. */
static int helper_event(struct nodejs_state *st, struct nodejs_target *t, json_t *m) {
  const char *type = json_string_value(json_object_get(m, "t"));
  if (type && strcmp(type, "settled") == 0) {
    /* the loop turned after the install: Node has no request for the
     * inspector pending any more */
    if (t->guarded)
      PP_LOG(st->host, PP_LOG_DEBUG, "pid %u: its event loop turned: attach guard lifted", t->pid);
    nodejs_guard_release(st, t);
    return 2;
  }
  if (type && strcmp(type, "exit") == 0) {
    nodejs_collect(st, t, json_object_get(m, "profile"));
    nodejs_chan_close(&t->chan);
    t->state = T_ENDED;
    PP_LOG(st->host, PP_LOG_INFO, "pid %u: exiting; its last profile is kept", t->pid);
    return 1;
  }
  if (type && strcmp(type, "bye") == 0) {
    const char *why = json_string_value(json_object_get(m, "why"));
    fail_target(st, t, PP_LOG_WARNING, "the helper ended: %.200s; profiling resumes later",
                why ? why : "?");
    return 1;
  }
  return 0;
}

/* The channel broke: the process exited (fine) or the helper died. */
static void channel_lost(struct nodejs_state *st, struct nodejs_target *t, int rc) {
  nodejs_chan_close(&t->chan);
  if (!nodejs_alive(st, t)) {
    t->state = T_GONE;
    return;
  }
  fail_target(st, t, PP_LOG_WARNING, "the helper's channel: %s; profiling resumes later",
              rc == -ECONNRESET ? "closed" : strerror(-rc));
}

/* T_LIVE / T_MAPS: reads what the helper sent unasked, without waiting
 * (a message already begun is read to its end, bounded). */
static void watch_helper(struct nodejs_state *st, struct nodejs_target *t) {
  for (int i = 0; i < 4 && t->chan.fd >= 0; i++) {
    json_t *m = NULL;
    uint64_t dl = t->chan.len ? pp_clock_ns() + 500 * MS : 0;
    int rc = nodejs_chan_recv(&t->chan, &m, dl);
    if (rc == -ETIMEDOUT) return;
    if (rc < 0) {
      channel_lost(st, t, rc);
      return;
    }
    int done = helper_event(st, t, m);
    json_decref(m);
    if (done == 1) return;
  }
}

void nodejs_step(struct nodejs_state *st, struct nodejs_target *t) {
  switch (t->state) {
    case T_QUEUED:
      if (!netns_busy(st, t)) open_inspector(st, t);
      break;
    case T_WAIT:
      poll_listen(st, t);
      break;
    case T_HELLO:
      poll_hello(st, t);
      break;
    case T_LIVE:
    case T_MAPS:
      watch_helper(st, t);
      break;
    default:
      break;
  }
}

/* Asks the helper for the profile so far (it starts the next one back to
 * back) and turns it into stacks. */
int nodejs_snapshot_target(struct nodejs_state *st, struct nodejs_target *t, uint64_t deadline) {
  int rc = nodejs_chan_send(&t->chan, "snap", deadline);
  while (rc == 0) {
    json_t *m = NULL;
    rc = nodejs_chan_recv(&t->chan, &m, deadline);
    if (rc < 0) break;
    const char *type = json_string_value(json_object_get(m, "t"));
    if (type && strcmp(type, "profile") == 0) {
      nodejs_collect(st, t, json_object_get(m, "profile"));
      json_decref(m);
      return 0;
    }
    if (type && strcmp(type, "error") == 0) {
      const char *e = json_string_value(json_object_get(m, "error"));
      fail_target(st, t, PP_LOG_WARNING, "taking the profile: %.200s", e ? e : "?");
      json_decref(m);
      return -EREMOTEIO;
    }
    int done = helper_event(st, t, m);
    json_decref(m);
    if (done == 1) return t->state == T_ENDED ? 0 : -EIO;
  }
  if (rc == -ETIMEDOUT && nodejs_alive(st, t)) {
    /* a reply may still come: one late reply would be taken for the next
     * snapshot's, so the channel is dropped (the helper then undoes its
     * work) and the target retried */
    fail_target(st, t, PP_LOG_WARNING,
                "the helper did not hand its profile over in time (the process's main "
                "thread may be stuck in native code)");
    return rc;
  }
  channel_lost(st, t, rc);
  return rc;
}

void nodejs_forget_inspector(struct nodejs_state *st, struct nodejs_target *t) {
  nodejs_ws_close(&t->cdp.ws, 0);
  nodejs_chan_close(&t->chan);
  marker_set(st, t, 0);
  t->we_opened = 0;
  nodejs_guard_release(st, t);
}

/* Tells the helper to undo everything and waits (bounded) for it to say so. */
static void stop_helper(struct nodejs_state *st, struct nodejs_target *t, uint64_t deadline) {
  if (t->chan.fd < 0) return;
  int rc = nodejs_chan_send(&t->chan, "stop", deadline);
  while (rc == 0) {
    json_t *m = NULL;
    rc = nodejs_chan_recv(&t->chan, &m, deadline);
    const char *type = json_string_value(json_object_get(m, "t"));
    int bye = rc == 0 && type && strcmp(type, "bye") == 0;
    json_decref(m);
    if (bye) break;
  }
  if (rc < 0 && rc != -ECONNRESET && nodejs_alive(st, t))
    PP_LOG(st->host, PP_LOG_WARNING,
           "pid %u: the helper did not confirm its stop (%s); it stops by itself when this "
           "connection closes",
           t->pid, strerror(-rc));
  nodejs_chan_close(&t->chan);
}

void nodejs_detach(struct nodejs_state *st, struct nodejs_target *t) {
  uint64_t deadline = pp_clock_ns() + (uint64_t)st->command_timeout_ms * MS;
  if (t->state == T_WAIT && t->we_opened && nodejs_alive(st, t)) {
    /* signalled but not reached yet: close the inspector we opened, if it
     * came up meanwhile, rather than leave it listening */
    struct nodejs_listener now[NODEJS_MAX_PRE];
    int n = nodejs_listeners(t->pid, now, NODEJS_MAX_PRE);
    for (int i = 0; i < n && t->we_opened; i++) {
      char path[160];
      if (listener_known(t, now[i].inode) ||
          probe_inspector(st, t, now[i].port, path, sizeof(path), deadline) != 0 ||
          nodejs_ws_open(&t->cdp.ws, t->pid, now[i].port, path, (uint64_t)st->max_profile_mb << 20,
                         deadline) < 0)
        continue;
      close_inspector(st, t, deadline);
    }
  }
  if (t->state == T_HELLO) {
    /* installed, not connected yet: the helper ends by itself when no
     * agent comes; connecting lets it end now */
    char sock[128], why[256];
    snprintf(sock, sizeof(sock), "%s/%s", t->dir, NODEJS_HELPER_SOCKET);
    nodejs_chan_init(&t->chan, 1 << 20);
    if (nodejs_chan_connect(&t->chan, t->pid, sock, why, sizeof(why)) < 0) return;
  }
  stop_helper(st, t, deadline);
  if (t->maps_on) {
    nodejs_perfmap_remove(st, t);
    t->maps_on = 0;
  }
  nodejs_ws_close(&t->cdp.ws, 0);
  nodejs_guard_release(st, t);
}
