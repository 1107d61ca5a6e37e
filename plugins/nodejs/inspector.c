/*
 * Inspector attach and per-session profiling of one Node.js process.
 *
 * Attach is a small state machine driven from tick() so that a slow target
 * never holds up the worker for long: identify the process (never signal
 * anything we have not positively identified as Node), note the loopback
 * sockets it already listens on, SIGUSR1 it through a pidfd, and on later
 * ticks look for the new listening socket, ask it for /json/list, open the
 * WebSocket, check with Runtime.evaluate that the inspector really belongs
 * to this pid (a port collision would otherwise hand us another process),
 * then start the V8 sampling profiler.
 *
 * An inspector that was already open (--inspect, an IDE) is used as is: a
 * second session does not disturb the user's, and it is never closed by us.
 * One we opened is closed again with process._debugEnd() at stop, but only
 * while no other client is connected to it: closing blocks the target's
 * main thread until every client has answered (see other_sessions). A marker
 * file in the scratch directory remembers which inspectors we opened, so a
 * restarted worker still closes them.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nodejs.h"

#define MS 1000000ull

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
 * inspector (process._debugEnd(), inspector.close()) makes Node's main
 * thread join the inspector I/O thread, which only ends once every session
 * socket is gone: Node sends each client a close frame and waits for its
 * answer. A client that does not read its socket (another agent between
 * two sessions, a paused tool) then blocks the target's event loop for as
 * long as it does not read. So we close only when we are alone. */
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

static void fail_target(struct nodejs_state *st, struct nodejs_target *t, int level,
                        const char *fmt, ...) PP_PRINTF(4, 5);
static void fail_target(struct nodejs_state *st, struct nodejs_target *t, int level,
                        const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t->reason, sizeof(t->reason), fmt, ap);
  va_end(ap);
  nodejs_ws_close(&t->cdp.ws, 1);
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
  else if (pfd >= 0)
    rc = syscall(SYS_pidfd_send_signal, pfd, SIGUSR1, NULL, 0) < 0 ? -errno : 0;
  else
    rc = kill((pid_t)t->pid, SIGUSR1) < 0 ? -errno : 0;
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
  json_t *list = json_loads(body, JSON_REJECT_DUPLICATES, NULL);
  free(body);
  int rc = -EPROTO;
  size_t i;
  json_t *e;
  json_array_foreach(list, i, e) {
    const char *url = json_string_value(json_object_get(e, "webSocketDebuggerUrl"));
    if (!url || strncmp(url, "ws://", 5) != 0) continue;
    const char *slash = strchr(url + 5, '/');
    if (!slash || strlen(slash + 1) >= plen) continue;
    snprintf(path, plen, "%s", slash + 1);
    rc = 0;
    break;
  }
  json_decref(list);
  return rc;
}

/* Checks the inspector session belongs to t and collects the version. */
static int validate(struct nodejs_state *st, struct nodejs_target *t, uint64_t deadline) {
  static const char expr[] =
      "JSON.stringify([process.pid, process.version, (typeof process.getBuiltinModule === "
      "'function' ? process.getBuiltinModule('fs') : require('fs')).readlinkSync('/proc/self/ns/"
      "pid')])";
  json_t *v = NULL;
  char err[200];
  int rc = nodejs_cdp_evaluate(&t->cdp, expr, &v, err, sizeof(err), deadline);
  if (rc < 0) {
    snprintf(t->reason, sizeof(t->reason), "validating the inspector session: %s",
             err[0] ? err : strerror(-rc));
    return rc;
  }
  json_t *a = json_is_string(v) ? json_loads(json_string_value(v), 0, NULL) : NULL;
  json_decref(v);
  char host_ns[64] = "", path[64];
  snprintf(path, sizeof(path), "/proc/%u/ns/pid", t->pid);
  ssize_t hl = readlink(path, host_ns, sizeof(host_ns) - 1);
  if (hl > 0) host_ns[hl] = '\0';
  json_t *jpid = json_array_get(a, 0);
  const char *ver = json_string_value(json_array_get(a, 1));
  const char *ns = json_string_value(json_array_get(a, 2));
  rc = 0;
  if (!json_is_integer(jpid) || json_integer_value(jpid) != (json_int_t)t->ns_pid || !ns ||
      hl <= 0 || strcmp(ns, host_ns) != 0) {
    snprintf(t->reason, sizeof(t->reason),
             "the inspector reached belongs to another process (port collision)");
    rc = -ESRCH;
  } else if (ver) {
    snprintf(t->version, sizeof(t->version), "%s", ver);
  }
  json_decref(a);
  return rc;
}

static int start_profiler(struct nodejs_state *st, struct nodejs_target *t, uint64_t deadline) {
  char err[200] = "";
  int rc = nodejs_cdp_call(&t->cdp, "Profiler.enable", NULL, NULL, err, sizeof(err), deadline);
  json_t *p = json_pack("{s:i}", "interval", (int)st->interval_us);
  /* the interval must be set before start; it is an error while running */
  if (rc == 0)
    rc = nodejs_cdp_call(&t->cdp, "Profiler.setSamplingInterval", p, NULL, err, sizeof(err),
                         deadline);
  json_decref(p);
  if (rc == 0)
    rc = nodejs_cdp_call(&t->cdp, "Profiler.start", NULL, NULL, err, sizeof(err), deadline);
  /* Node does not exit while a session is attached ("Waiting for the
   * debugger to disconnect..."): ask to be told (Node >= 12), so the tick
   * can let it go (nodejs_watch_exit). Older Node: an error, ignored. */
  if (rc == 0) {
    json_t *on = json_pack("{s:b}", "enabled", 1);
    char e2[200] = "";
    if (nodejs_cdp_call(&t->cdp, "NodeRuntime.notifyWhenWaitingForDisconnect", on, NULL, e2,
                        sizeof(e2), deadline) < 0) {
      PP_LOG(st->host, PP_LOG_DEBUG, "pid %u: no exit notification (%s): it exits at detach",
             t->pid, e2[0] ? e2 : "no reply");
    } else if (!t->cdp.exit_pending) {
      /* A program that finished before the request was handled was not
       * told to anyone and now waits for us with no event coming. Its JS
       * context is gone by then (destroyed, or closed to calls), so even
       * evaluating a literal fails: that is the sign to let it go. */
      json_t *v = NULL;
      if (nodejs_cdp_evaluate(&t->cdp, "0", &v, NULL, 0, deadline) == -EREMOTEIO)
        t->cdp.exit_pending = 1;
      json_decref(v);
    }
    json_decref(on);
  }
  if (rc < 0)
    snprintf(t->reason, sizeof(t->reason), "starting the profiler: %s",
             err[0] ? err : strerror(-rc));
  return rc;
}

/* Reads (and drops) what Node sends until it closes the session, for at
 * most ms: dropping our socket while Node's inspector thread still writes
 * its close frame crashes Node 20 (SIGSEGV in
 * WsHandler::OnCloseFrameWritten). */
static void drain_until_closed(struct nodejs_ws *ws, uint64_t ms) {
  const char *m;
  size_t l;
  uint64_t until = pp_clock_ns() + ms * MS;
  while (pp_clock_ns() < until && nodejs_ws_recv(ws, &m, &l, pp_clock_ns() + 500 * MS) == 0) {
  }
}

/* Node opens a SIGUSR1 inspector on 127.0.0.1:9229, so a second Node process
 * in the same network namespace could not open its own while ours stays
 * open for the whole run. Right after attaching, the inspector we opened is
 * reopened on a random loopback port (inspector.close() + open(0) from a
 * setImmediate, after this evaluation has answered); the caller then finds
 * the new port like after SIGUSR1. close() drops our session, so the socket
 * is closed here. A target whose event loop never turns keeps port 9229. */
static int move_off_default_port(struct nodejs_state *st, struct nodejs_target *t,
                                 uint64_t deadline) {
  static const char expr[] =
      "(() => { const i = typeof process.getBuiltinModule === 'function' ? "
      "process.getBuiltinModule('inspector') : require('inspector');"
      " setImmediate(() => { i.close(); i.open(0, '127.0.0.1', false); }); return 'ok'; })()";
  /* The listeners before the move: the reopened inspector is the one
   * socket not among them. Listed after the move instead, the new port
   * was sometimes there already (Node reopens from a setImmediate, often
   * before the drain below sees EOF); it then looked like someone else's
   * inspector, was used as such and left open at stop (seen under load in
   * test_nodejs_http, _netns and _port_move). Into a copy, stored on
   * success only: the caller may be walking t->pre (try_listeners). */
  struct nodejs_listener before[NODEJS_MAX_PRE];
  int nb = nodejs_listeners(t->pid, before, NODEJS_MAX_PRE);
  json_t *v = NULL;
  char err[200] = "";
  int rc = nodejs_cdp_evaluate(&t->cdp, expr, &v, err, sizeof(err), deadline);
  json_decref(v);
  if (rc == 0) {
    /* Let Node close our session itself before we drop the socket: closing
     * it while Node's inspector thread writes its close frame to us crashes
     * Node 20 (SIGSEGV in WsHandler::OnCloseFrameWritten, seen in the system
     * test). Reading until EOF, as the detach path does, avoids the race. */
    drain_until_closed(&t->cdp.ws, 2000);
  }
  nodejs_ws_close(&t->cdp.ws, 1);
  if (rc < 0) return rc;
  t->moved = 1;
  t->npre = nb > 0 ? nb : 0;
  if (t->npre) memcpy(t->pre, before, (size_t)t->npre * sizeof(before[0]));
  t->state = T_WAIT;
  t->deadline_ns = pp_clock_ns() + (uint64_t)st->attach_timeout_s * 1000 * MS;
  return 0;
}

/* Opens the session on port and validates it; with work, starts the mode's
 * work too (profiler or perf map). */
static int connect_port(struct nodejs_state *st, struct nodejs_target *t, uint16_t port,
                        const char *wspath, int work) {
  uint64_t deadline = pp_clock_ns() + (uint64_t)st->command_timeout_ms * MS;
  uint64_t max_msg = (uint64_t)st->max_profile_mb << 20;
  t->cdp.exit_pending = 0;
  int rc = nodejs_ws_open(&t->cdp.ws, t->pid, port, wspath, max_msg, deadline);
  if (rc < 0) {
    snprintf(t->reason, sizeof(t->reason), "WebSocket to the inspector on port %u: %s", port,
             strerror(-rc));
    return rc;
  }
  rc = validate(st, t, deadline);
  int opened = t->we_opened; /* for the log: attach-maps closes it again */
  if (rc == 0 && work && st->mode == NODEJS_INSPECTOR && t->we_opened && !t->moved &&
      st->move_port && port == 9229) {
    /* moving closes the inspector: not while another client is connected
     * (see other_sessions) */
    int others = other_sessions(t);
    if (others != 0) {
      PP_LOG(st->host, PP_LOG_INFO,
             "pid %u: inspector left on port 9229: %s other inspector session(s)", t->pid,
             others > 0 ? "there are" : "cannot rule out");
      t->moved = 1;
    } else {
      if (move_off_default_port(st, t, deadline) == 0) return 0; /* reconnects later */
      t->moved = 1; /* could not move: stay where it is */
      rc = nodejs_ws_open(&t->cdp.ws, t->pid, port, wspath, max_msg, deadline);
      if (rc < 0) {
        snprintf(t->reason, sizeof(t->reason), "inspector on port %u: %s", port, strerror(-rc));
        return rc;
      }
    }
  }
  if (rc == 0 && work && st->mode == NODEJS_INSPECTOR) {
    rc = start_profiler(st, t, pp_clock_ns() + (uint64_t)st->command_timeout_ms * MS);
    if (rc == 0) t->state = T_LIVE;
  } else if (rc == 0 && work && st->mode == NODEJS_ATTACH_MAPS) {
    rc = nodejs_perfmap_start(st, t, pp_clock_ns() + (uint64_t)st->command_timeout_ms * MS);
    if (rc == 0) t->state = T_MAPS;
  }
  if (rc < 0 && rc != -ESRCH && work && t->cdp.ws.fd >= 0) {
    /* ours, but the mode's work could not start: close the inspector if we
     * opened it rather than leave it listening until a retry */
    t->start_failed = 1;
    nodejs_close_session(st, t, pp_clock_ns() + (uint64_t)st->command_timeout_ms * MS);
    return rc;
  }
  if (rc < 0) {
    /* a foreign inspector (rc -ESRCH) must not be closed by us */
    nodejs_ws_close(&t->cdp.ws, 1);
    return rc;
  }
  if (work) {
    PP_LOG(st->host, PP_LOG_INFO, "pid %u: Node.js %s, inspector on port %u%s, %s", t->pid,
           t->version, port, opened ? " (opened by us)" : " (already open)",
           st->mode == NODEJS_INSPECTOR ? "profiling" : "perf map enabled");
    t->reason[0] = '\0';
  }
  return 0;
}

static int listener_known(const struct nodejs_target *t, uint64_t inode) {
  for (int i = 0; i < t->npre; i++)
    if (t->pre[i].inode == inode) return 1;
  return 0;
}

/* Tries the given listeners as inspectors. 0 once one is connected. */
static int try_listeners(struct nodejs_state *st, struct nodejs_target *t,
                         const struct nodejs_listener *l, int n, int only_new, int work) {
  int rc = -ENOENT;
  for (int i = 0; i < n; i++) {
    if (only_new && listener_known(t, l[i].inode)) continue;
    char path[160];
    uint64_t deadline = pp_clock_ns() + (uint64_t)st->command_timeout_ms * MS;
    if (probe_inspector(st, t, l[i].port, path, sizeof(path), deadline) != 0) continue;
    rc = connect_port(st, t, l[i].port, path, work);
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

/* Joins an open inspector, or opens one with SIGUSR1. 0 (T_WAIT, T_LIVE or
 * T_MAPS), or negative with the target failed (T_FAILED or T_GONE). */
static int open_inspector(struct nodejs_state *st, struct nodejs_target *t) {
  t->we_opened = marker_exists(st, t);
  int n = nodejs_listeners(t->pid, t->pre, NODEJS_MAX_PRE);
  t->npre = n > 0 ? n : 0;
  /* Open already: ours from a previous worker, or the user's (--inspect). Only
   * then are existing sockets probed, so the app's own servers see no
   * stray requests otherwise. */
  if ((t->inspect_flag || t->we_opened) && t->npre &&
      try_listeners(st, t, t->pre, t->npre, 0, 1) == 0)
    return 0;
  if (t->inspect_flag && !t->we_opened) {
    char why[200];
    snprintf(why, sizeof(why), "%.199s", t->reason[0] ? t->reason : "no listening socket");
    fail_target(st, t, PP_LOG_WARNING, "started with --inspect but no inspector answered: %s", why);
    return t->state == T_GONE ? -ESRCH : -ECONNREFUSED;
  }
  marker_set(st, t, 1); /* before the signal: a crash right after still knows */
  int rc = signal_node(st, t);
  if (rc < 0) {
    marker_set(st, t, 0);
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
  return 0;
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
  if (st->mode == NODEJS_PERF) {
    if (!f.perf_prof)
      PP_INFO(st->host,
              "pid %u: started without --perf-basic-prof/--perf-prof: perf cannot name its "
              "JS frames",
              t->pid);
    return PP_ATTACH_IGNORE;
  }
  if (st->host->proc_ns_pid(st->host, t->pid, &t->ns_pid) < 0) t->ns_pid = t->pid;
  char nsp[64];
  struct stat ns;
  snprintf(nsp, sizeof(nsp), "/proc/%u/ns/net", t->pid);
  t->netns = stat(nsp, &ns) == 0 ? (uint64_t)ns.st_ino : 0;
  if (netns_busy(st, t)) {
    t->state = T_QUEUED; /* a tick opens it when the namespace is free */
    return 0;
  }
  return open_inspector(st, t);
}

static void poll_listen(struct nodejs_state *st, struct nodejs_target *t) {
  struct nodejs_listener now[NODEJS_MAX_PRE];
  int n = nodejs_listeners(t->pid, now, NODEJS_MAX_PRE);
  if (n < 0 && !nodejs_alive(st, t)) {
    t->state = T_GONE;
    return;
  }
  t->start_failed = 0;
  if (n > 0 && try_listeners(st, t, now, n, 1, 1) == 0) return;
  if (t->start_failed) {
    char why[sizeof(t->reason)];
    memcpy(why, t->reason, sizeof(why));
    fail_target(st, t, PP_LOG_WARNING, "%s", why);
    return;
  }
  if (pp_clock_ns() < t->deadline_ns) return;
  /* No new socket: the app (or another client's SIGUSR1) had opened the
   * inspector earlier, which SIGUSR1 leaves alone. Then it is not ours, and
   * must be marked so before connecting: we never close it. */
  marker_set(st, t, 0);
  t->we_opened = 0;
  if (t->npre && try_listeners(st, t, t->pre, t->npre, 0, 1) == 0) return;
  if (t->moved) {
    fail_target(st, t, PP_LOG_WARNING,
                "the inspector did not come back after moving it off port 9229 within %llds",
                (long long)st->attach_timeout_s);
    return;
  }
  fail_target(st, t, PP_LOG_WARNING,
              "the inspector did not start listening within %llds of SIGUSR1 (port 9229 in use "
              "in its network namespace, or a SIGUSR1 listener in the app?)",
              (long long)st->attach_timeout_s);
}

int nodejs_open_sync(struct nodejs_state *st, struct nodejs_target *t, uint64_t deadline) {
  if (t->cdp.ws.fd >= 0) return 0;
  int n = nodejs_listeners(t->pid, t->pre, NODEJS_MAX_PRE);
  t->npre = n > 0 ? n : 0;
  /* ours may still be open (a previous close failed) */
  if (t->we_opened && t->npre && try_listeners(st, t, t->pre, t->npre, 0, 0) == 0) return 0;
  marker_set(st, t, 1);
  int rc = signal_node(st, t);
  if (rc < 0) {
    marker_set(st, t, 0);
    return rc;
  }
  t->we_opened = 1;
  while (pp_clock_ns() < deadline) {
    struct nodejs_listener now[NODEJS_MAX_PRE];
    n = nodejs_listeners(t->pid, now, NODEJS_MAX_PRE);
    if (n < 0) return n;
    if (n > 0 && try_listeners(st, t, now, n, 1, 0) == 0) return 0;
    usleep(50000);
  }
  if (t->npre && try_listeners(st, t, t->pre, t->npre, 0, 0) == 0) {
    t->we_opened = 0; /* it was open before we signalled */
    marker_set(st, t, 0);
    return 0;
  }
  marker_set(st, t, 0);
  t->we_opened = 0;
  return -ETIMEDOUT;
}

/* Closes the inspector if we opened it (process._debugEnd() drops every
 * session, ours included, so the reply may never come: EOF means it worked),
 * and our connection in any case. */
void nodejs_close_session(struct nodejs_state *st, struct nodejs_target *t, uint64_t deadline) {
  int others = t->cdp.ws.fd >= 0 && t->we_opened ? other_sessions(t) : 0;
  if (others != 0) {
    /* Closing now would hold the target's main thread until every other
     * client answers (see other_sessions). Leave it open; the marker stays,
     * so a later detach closes it once we are alone. */
    PP_LOG(st->host, PP_LOG_INFO,
           "pid %u: inspector left open: %s other inspector session(s) connected", t->pid,
           others > 0 ? "there are" : "cannot rule out");
  } else if (t->cdp.ws.fd >= 0 && t->we_opened) {
    json_t *v = NULL;
    int rc = nodejs_cdp_evaluate(&t->cdp, "process._debugEnd()", &v, NULL, 0, deadline);
    json_decref(v);
    if (rc == 0 || rc == -ECONNRESET) {
      const char *m;
      size_t l;
      while (nodejs_ws_recv(&t->cdp.ws, &m, &l, pp_clock_ns() + 500 * MS) == 0) {
      }
      marker_set(st, t, 0);
      t->we_opened = 0;
    } else {
      PP_LOG(st->host, PP_LOG_WARNING, "pid %u: could not close the inspector: %s", t->pid,
             strerror(-rc));
    }
  }
  nodejs_ws_close(&t->cdp.ws, 1);
}

/* Between snapshots nothing reads a live session, and a client that does
 * not read holds the target when someone else closes the inspector (see
 * other_sessions): the main thread waits for our answer to Node's close
 * frame. So every tick drains whatever arrived without waiting; a close
 * frame or EOF drops our session at once, and profiling is retried later. */
static void let_target_exit(struct nodejs_state *st, struct nodejs_target *t);

static void watch_live(struct nodejs_state *st, struct nodejs_target *t) {
  if (t->cdp.exit_pending) { /* seen while waiting for a reply */
    let_target_exit(st, t);
    return;
  }
  struct pollfd p = {.fd = t->cdp.ws.fd, .events = POLLIN};
  if (p.fd < 0 || poll(&p, 1, 0) <= 0) return;
  int rc = 0;
  for (int i = 0; i < 64 && rc == 0; i++) { /* events we never asked for: dropped */
    const char *m;
    size_t l;
    rc = nodejs_ws_recv(&t->cdp.ws, &m, &l, pp_clock_ns() + 20 * MS);
    if (rc == 0 && nodejs_cdp_note_event(&t->cdp, m, l)) { /* the one event we asked for */
      let_target_exit(st, t);
      return;
    }
  }
  if (rc == -ETIMEDOUT || rc == 0) return;
  marker_set(st, t, 0); /* it is being closed: not ours to close any more */
  t->we_opened = 0;
  fail_target(st, t, PP_LOG_INFO,
              "the inspector session was closed by the target or another "
              "client (%s); profiling resumes later",
              strerror(-rc));
}

void nodejs_step(struct nodejs_state *st, struct nodejs_target *t) {
  switch (t->state) {
    case T_QUEUED:
      if (!netns_busy(st, t)) open_inspector(st, t);
      break;
    case T_WAIT:
      poll_listen(st, t);
      break;
    case T_LIVE:
      watch_live(st, t);
      break;
    default:
      break;
  }
}

/* Stops the running profile and starts the next one back to back (both
 * requests are sent before the first reply is read, so the gap is one
 * message), then turns the stopped profile into stacks. */
int nodejs_snapshot_target(struct nodejs_state *st, struct nodejs_target *t, uint64_t deadline) {
  char err[200] = "";
  json_t *res = NULL;
  int id_stop = nodejs_cdp_send(&t->cdp, "Profiler.stop", NULL, deadline);
  int id_start = id_stop > 0 ? nodejs_cdp_send(&t->cdp, "Profiler.start", NULL, deadline) : id_stop;
  int rc =
      id_start < 0 ? id_start : nodejs_cdp_wait(&t->cdp, id_stop, &res, err, sizeof(err), deadline);
  if (rc == 0) rc = nodejs_cdp_wait(&t->cdp, id_start, NULL, err, sizeof(err), deadline);
  if (rc < 0) {
    json_decref(res);
    if (!nodejs_alive(st, t)) {
      t->state = T_GONE; /* released: connection closed, marker dropped */
      return -ESRCH;
    }
    fail_target(st, t, PP_LOG_WARNING, "Profiler.stop/start: %s", err[0] ? err : strerror(-rc));
    return rc;
  }
  nodejs_collect(st, t, json_object_get(res, "profile"));
  json_decref(res);
  return 0;
}

/* A process whose program finished waits at exit for our session to
 * disconnect; Node announces it with NodeRuntime.waitingForDisconnect.
 * Called from every tick for live targets: reads what has arrived without
 * waiting (only that event is expected between requests), and on the event
 * takes the profile so far and disconnects, so the process exits on time
 * and its last samples still reach the next snapshot. */
void nodejs_watch_exit(struct nodejs_state *st, struct nodejs_target *t) {
  if (t->state != T_LIVE || t->cdp.ws.fd < 0) return;
  int waiting = t->cdp.exit_pending;         /* seen while waiting for a reply */
  for (int i = 0; i < 16 && !waiting; i++) { /* bounded: a chatty peer cannot hold the tick */
    const char *m;
    size_t l;
    if (nodejs_ws_recv(&t->cdp.ws, &m, &l, 0) < 0) return; /* nothing yet, or gone: snapshot sees */
    waiting = nodejs_cdp_note_event(&t->cdp, m, l);
  }
  if (waiting) let_target_exit(st, t);
}

static void let_target_exit(struct nodejs_state *st, struct nodejs_target *t) {
  uint64_t deadline = pp_clock_ns() + (uint64_t)st->command_timeout_ms * MS;
  json_t *res = NULL;
  char err[200] = "";
  int rc = nodejs_cdp_call(&t->cdp, "Profiler.stop", NULL, &res, err, sizeof(err), deadline);
  /* into this session's stacks: the process may be gone before the snapshot */
  if (rc == 0) nodejs_collect(st, t, json_object_get(res, "profile"));
  json_decref(res);
  /* Closing while Node's inspector thread writes its own close frame
   * crashed Node 20 at exit (SIGSEGV, once in test_nodejs_exit_race;
   * the same race as in move_off_default_port): ask to close, then read
   * until Node has closed, bounded. */
  if (nodejs_ws_send_close(&t->cdp.ws, pp_clock_ns() + 200 * MS) == 0)
    drain_until_closed(&t->cdp.ws, 1000);
  nodejs_ws_close(&t->cdp.ws, 0);
  marker_set(st, t, 0); /* its inspector goes away with it */
  t->we_opened = 0;
  t->state = T_ENDED;
  PP_LOG(st->host, PP_LOG_INFO, "pid %u: exiting; session closed so it can (profile %s)", t->pid,
         rc == 0  ? "kept"
         : err[0] ? err
                  : strerror(-rc));
}

void nodejs_forget_inspector(struct nodejs_state *st, struct nodejs_target *t) {
  nodejs_ws_close(&t->cdp.ws, 0);
  marker_set(st, t, 0);
  t->we_opened = 0;
}

void nodejs_detach(struct nodejs_state *st, struct nodejs_target *t) {
  uint64_t deadline = pp_clock_ns() + (uint64_t)st->command_timeout_ms * MS;
  if (t->state == T_WAIT && t->we_opened && t->cdp.ws.fd < 0 && nodejs_alive(st, t)) {
    /* signalled (or being moved) but not connected yet: find the inspector
     * we opened so it can be closed below, not left listening */
    struct nodejs_listener now[NODEJS_MAX_PRE];
    int n = nodejs_listeners(t->pid, now, NODEJS_MAX_PRE);
    if (n > 0) try_listeners(st, t, now, n, 1, 0);
  }
  if (t->state == T_MAPS) nodejs_perfmap_stop(st, t, deadline);
  if (t->cdp.ws.fd >= 0 && t->state == T_LIVE) {
    /* disable stops the profiler and drops its data */
    nodejs_cdp_call(&t->cdp, "Profiler.disable", NULL, NULL, NULL, 0, deadline);
  }
  nodejs_close_session(st, t, deadline);
}
