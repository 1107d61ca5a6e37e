/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HotSpot dynamic attach, protocol v1.
 *
 * Each operation runs in a forked child, so that the parent can enforce a
 * deadline by killing it and the worker's credentials stay untouched. The
 * JVM accepts a peer with its own euid/egid (and, on current JDKs, root;
 * user namespaces map host root to nobody, which it refuses), and only
 * trusts a trigger file owned by its euid or root. So the child resolves
 * paths as root (the JVM's root may be readable by root alone: a container
 * in a user namespace owned by root) and connects and creates the trigger
 * with the JVM's effective uid/gid; once connected it drops root for good.
 *
 * Every path is inside the JVM's root, through the kit: the socket
 * /tmp/.java_pid<nspid> must be a socket owned by the JVM's euid (the check
 * HotSpot's own tools make) and is connected through the checked handle;
 * the trigger /tmp/.attach_pid<nspid> is created O_EXCL|O_NOFOLLOW in the
 * JVM's /tmp opened as a directory inside its root, or, if something is
 * already there, used only if it is a regular file owned by the JVM. A
 * refusal names the path and why, and nothing is signalled then. To
 * trigger, the child re-identifies the process through a pidfd (start time
 * checked after the pidfd is open, so the signal cannot reach a reused pid)
 * and sends SIGQUIT, then waits for the socket with growing sleeps. The
 * request is "1\0<cmd>\0<a0>\0<a1>\0<a2>\0"; the reply is "<status>\n<text>"
 * up to EOF, copied verbatim to the parent over a pipe (on failure the
 * pipe carries the reason instead).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "java.h"
#include "polyprof/kit/cap_step.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

enum {
  EX_OK = 0,
  EX_TMP = 10,      /* cannot open the target's /tmp */
  EX_CREDS = 11,    /* cannot take the target's uid/gid */
  EX_NOSOCKET = 12, /* socket missing and signalling not allowed */
  EX_TRIGGER = 13,  /* cannot create the trigger file */
  EX_IDENTITY = 14, /* the pid is no longer the process we checked */
  EX_SIGNAL = 15,   /* the signal could not be sent */
  EX_TIMEOUT = 16,  /* the socket never appeared */
  EX_CONNECT = 17,  /* connect failed */
  EX_IO = 18,       /* request/reply failed */
  EX_EOF = 19,      /* closed without a reply: rejected credentials or JVM gone */
};

static const char *exit_reason(int code) {
  switch (code) {
    case EX_TMP:
      return "cannot open the JVM's /tmp";
    case EX_CREDS:
      return "cannot switch to the JVM's uid/gid";
    case EX_NOSOCKET:
      return "no attach socket and signalling is not allowed";
    case EX_TRIGGER:
      return "cannot create the attach trigger file";
    case EX_IDENTITY:
      return "the process changed identity before the signal";
    case EX_SIGNAL:
      return "cannot send SIGQUIT";
    case EX_TIMEOUT:
      return "timed out waiting for the attach socket";
    case EX_CONNECT:
      return "cannot connect to the attach socket";
    case EX_IO:
      return "attach request failed";
    case EX_EOF:
      return "the JVM closed the attach connection without a reply";
    default:
      return "attach helper failed";
  }
}

static uint64_t now_ms(void) {
  return pp_clock_ns() / 1000000u;
}

int java_socket_exists(uint32_t pid, uint32_t nspid) {
  char path[64];
  snprintf(path, sizeof(path), "/tmp/.java_pid%u", nspid);
  int h = pp_target_socket(pid, path, NULL, 0);
  if (h < 0) return 0;
  close(h);
  return 1;
}

/* Runs with the JVM's effective ids (root keeps its saved uid to switch
 * back): what it creates is the JVM's, what it connects is its peer. */
static int as_jvm(const struct java_target_info *ti) {
  if (geteuid() != 0 || (ti->uid == 0 && ti->gid == 0)) return 0;
  return setresgid((gid_t)-1, ti->gid, (gid_t)-1) == 0 &&
                 setresuid((uid_t)-1, ti->uid, (uid_t)-1) == 0
             ? 0
             : -1;
}

static void as_root(void) {
  if (setresuid((uid_t)-1, 0, (uid_t)-1) == 0) setresgid((gid_t)-1, 0, (gid_t)-1);
}

/* Connects to the JVM's socket: the fd, -ENOENT while it is not there, or
 * another -errno (refused: why says what is at the path). */
static int connect_socket(const struct java_target_info *ti, char *why, size_t cap) {
  char path[64];
  snprintf(path, sizeof(path), "/tmp/.java_pid%u", ti->nspid);
  int h = pp_target_socket(ti->pid, path, why, cap);
  if (h < 0) return h;
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d", h);
  int s = -1, rc = -EPERM;
  if (as_jvm(ti) == 0) {
    s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    rc = s >= 0 && connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? 0 : -errno;
  }
  as_root();
  close(h);
  if (rc == 0) return s;
  if (s >= 0) close(s);
  snprintf(why, cap, "cannot connect to %s: %s", path, strerror(-rc));
  return rc;
}

/* Creates the trigger file in the JVM's /tmp as the JVM's user: 1 if we
 * created it, 0 if a usable one (the JVM's regular file) was there, or -1
 * with why. */
static int make_trigger(const struct java_target_info *ti, int tmp, const char *name, char *why,
                        size_t cap) {
  if (as_jvm(ti) != 0) {
    as_root();
    snprintf(why, cap, "cannot take the JVM's uid/gid");
    return -1;
  }
  int fd = openat(tmp, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0660);
  int e = errno;
  as_root();
  if (fd >= 0) {
    close(fd);
    return 1;
  }
  struct stat st;
  if (e != EEXIST || fstatat(tmp, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    snprintf(why, cap, "cannot create /tmp/%s: %s", name, strerror(e));
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    snprintf(why, cap, "/tmp/%s in the JVM's root is %s, not a trigger file", name,
             java_file_kind(st.st_mode));
    return -1;
  }
  if (st.st_uid != ti->uid) {
    snprintf(why, cap, "/tmp/%s in the JVM's root is owned by uid %u, not by the JVM's uid %u",
             name, (unsigned)st.st_uid, (unsigned)ti->uid);
    return -1;
  }
  return 0;
}

/* Sends SIGQUIT to pid only if it still is the process started at
 * start_time: the pidfd pins the process, the start time proves which. */
static int signal_verified(uint32_t pid, uint64_t start_time) {
  int pfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
  if (pfd >= 0) {
    if (!java_target_alive(pid, start_time)) {
      close(pfd);
      return EX_IDENTITY;
    }
    int rc = (int)syscall(SYS_pidfd_send_signal, pfd, SIGQUIT, NULL, 0);
    close(pfd);
    return rc == 0 ? EX_OK : EX_SIGNAL;
  }
  if (errno != ENOSYS) return EX_IDENTITY;
  /* kernels before 5.3: the check and the kill are as close as we can get */
  if (!java_target_alive(pid, start_time)) return EX_IDENTITY;
  return kill((pid_t)pid, SIGQUIT) == 0 ? EX_OK : EX_SIGNAL;
}

static int write_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static int child_fail(int out, int code, const char *why) {
  if (why[0] && write(out, why, strlen(why)) < 0) {
    /* the parent names the failure from the code alone */
  }
  return code;
}

static int child_main(const struct java_target_info *ti, int allow_signal, int timeout_ms,
                      const char *const req[4], int out) {
  char why[256] = "";
  /* This child exists to take the JVM's ids: the one process of the
   * plugin with CAP_SETUID/CAP_SETGID effective, until it drops root. */
  struct pp_cap_step setid;
  pp_cap_step_begin(&setid, PP_CAP_NEEDS_SETID);
  if (getuid() == 0 && setgroups(0, NULL) != 0) return EX_CREDS;
  int s = connect_socket(ti, why, sizeof(why));
  if (s < 0 && s != -ENOENT) return child_fail(out, EX_CONNECT, why);
  if (s < 0) {
    if (!allow_signal) return EX_NOSOCKET;
    int tmp = java_open_target_tmp(ti->pid, why, sizeof(why));
    if (tmp < 0) return child_fail(out, EX_TMP, why);
    char trigger[64];
    snprintf(trigger, sizeof(trigger), ".attach_pid%u", ti->nspid);
    int made = make_trigger(ti, tmp, trigger, why, sizeof(why));
    if (made < 0) {
      close(tmp);
      return child_fail(out, EX_TRIGGER, why);
    }
    /* root signalling another user's JVM: the one step that needs CAP_KILL */
    struct pp_cap_step kill_step;
    pp_cap_step_begin(&kill_step, PP_CAP_NEEDS_KILL);
    int rc = signal_verified(ti->pid, ti->start_time);
    pp_cap_step_end(&kill_step);
    if (rc == EX_OK) {
      uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
      /* the listener usually answers within tens of ms of the signal:
       * short steps, so a young JVM is armed without idle waiting */
      for (int delay = 10; now_ms() < deadline; delay = delay < 40 ? delay * 2 : delay) {
        struct timespec ts = {0, delay * 1000000L};
        nanosleep(&ts, NULL);
        s = connect_socket(ti, why, sizeof(why));
        if (s >= 0 || (s != -ENOENT && s != -ECONNREFUSED)) break;
        if (!java_target_alive(ti->pid, ti->start_time)) break;
      }
      if (s < 0) rc = s == -ENOENT || s == -ECONNREFUSED ? EX_TIMEOUT : EX_CONNECT;
    }
    if (made) unlinkat(tmp, trigger, 0);
    close(tmp);
    if (rc != EX_OK) return child_fail(out, rc, rc == EX_CONNECT ? why : "");
  }
  /* connected: nothing more needs root */
  if (getuid() == 0 && (ti->uid != 0 || ti->gid != 0) &&
      (setresgid(ti->gid, ti->gid, ti->gid) != 0 || setresuid(ti->uid, ti->uid, ti->uid) != 0)) {
    close(s);
    return EX_CREDS;
  }
  /* the request: version, command, exactly three arguments */
  for (int i = 0; i < 4; i++) {
    const char *a = req[i] ? req[i] : "";
    if ((i == 0 && write_all(s, "1", 2) != 0) || write_all(s, a, strlen(a) + 1) != 0) {
      close(s);
      return EX_IO;
    }
  }
  char buf[8192];
  size_t total = 0;
  uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
  for (;;) {
    uint64_t t = now_ms();
    if (t >= deadline) break;
    struct pollfd p = {.fd = s, .events = POLLIN};
    int pr = poll(&p, 1, (int)(deadline - t));
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) break;
    ssize_t r = read(s, buf, sizeof(buf));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    total += (size_t)r;
    if (write(out, buf, (size_t)r) != r) break;
  }
  close(s);
  return total ? EX_OK : EX_EOF;
}

int java_attach(const struct java_target_info *ti, int allow_signal, int timeout_ms,
                const char *cmd, const char *a0, const char *a1, const char *a2,
                struct java_attach_reply *reply, char *err, size_t errlen) {
  memset(reply, 0, sizeof(*reply));
  reply->status = -1;
  if (strlen(cmd) > 16 || (a0 && strlen(a0) > 1024) || (a1 && strlen(a1) > 1024) ||
      (a2 && strlen(a2) > 1024)) {
    snprintf(err, errlen, "attach request too long for protocol v1");
    return -EINVAL;
  }
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC) != 0) {
    int e = errno;
    snprintf(err, errlen, "pipe: %s", strerror(e));
    return -e;
  }
  const char *req[4] = {cmd, a0, a1, a2};
  pid_t child = fork();
  if (child < 0) {
    int e = errno;
    close(pfd[0]);
    close(pfd[1]);
    snprintf(err, errlen, "fork: %s", strerror(e));
    return -e;
  }
  if (child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    signal(SIGPIPE, SIG_IGN);
    close(pfd[0]);
    _exit(child_main(ti, allow_signal, timeout_ms, req, pfd[1]));
  }
  close(pfd[1]);
  size_t cap = 16384, len = 0;
  char *buf = malloc(cap);
  uint64_t deadline = now_ms() + (uint64_t)timeout_ms * 2 + 2000; /* socket wait + reply */
  int timed_out = 0;
  while (buf) {
    uint64_t t = now_ms();
    if (t >= deadline) {
      timed_out = 1;
      break;
    }
    struct pollfd p = {.fd = pfd[0], .events = POLLIN};
    int pr = poll(&p, 1, (int)(deadline - t));
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) {
      timed_out = pr == 0;
      break;
    }
    if (len + 4096 + 1 > cap) {
      if (cap >= (64u << 20)) break; /* replies are small; a huge one is not ours */
      char *g = realloc(buf, cap * 2);
      if (!g) break;
      buf = g;
      cap *= 2;
    }
    ssize_t r = read(pfd[0], buf + len, cap - len - 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    len += (size_t)r;
  }
  close(pfd[0]);
  if (timed_out) kill(child, SIGKILL); /* our own helper */
  int wst = 0;
  while (waitpid(child, &wst, 0) < 0 && errno == EINTR) {
  }
  int code = WIFEXITED(wst) ? WEXITSTATUS(wst) : -1;
  if (timed_out || code != EX_OK || !buf) {
    if (!timed_out && buf && len > 0 && code != EX_OK) {
      buf[len] = '\0'; /* the child's reason */
      snprintf(err, errlen, "%s: %s", exit_reason(code), buf);
    } else {
      snprintf(err, errlen, "%s", timed_out ? "attach timed out" : exit_reason(code));
    }
    free(buf);
    return code == EX_NOSOCKET ? -ENOENT : code == EX_IDENTITY ? -ESRCH : -EIO;
  }
  return java_attach_parse_reply(buf, len, reply, err, errlen);
}

int java_attach_parse_reply(char *buf, size_t len, struct java_attach_reply *reply, char *err,
                            size_t errlen) {
  buf[len] = '\0';
  char *nl = memchr(buf, '\n', len);
  char *end = NULL;
  long status = strtol(buf, &end, 10);
  if (!nl || end == buf) {
    free(buf);
    snprintf(err, errlen, "malformed attach reply");
    return -EPROTO;
  }
  reply->status = (int)status;
  reply->len = len - (size_t)(nl + 1 - buf);
  memmove(buf, nl + 1, reply->len + 1);
  reply->body = buf;
  return 0;
}

void java_attach_reply_free(struct java_attach_reply *r) {
  free(r->body);
  r->body = NULL;
}

int java_load_result(const struct java_attach_reply *r, int *rc, char *err, size_t errlen) {
  *rc = -1;
  const char *body = r->body ? r->body : "";
  const char *p = strstr(body, "return code: ");
  if (r->status != 0) {
    /* JDK <= 20 report a failed load in the status; JDK 8 puts the agent's
     * return code on the next line */
    snprintf(err, errlen, "load failed (status %d): %.200s", r->status, body);
    return -1;
  }
  if (p) {
    *rc = atoi(p + 13);
  } else {
    char *end;
    long v = strtol(body, &end, 10);
    if (end != body && (*end == '\n' || *end == '\0')) {
      *rc = (int)v; /* JDK 8: bare return code */
    } else {
      /* JDK 21+: status 0 and an error text instead of a return code */
      snprintf(err, errlen, "%.200s", body[0] ? body : "load reply without a return code");
      for (char *c = err; *c; c++)
        if (*c == '\n') *c = ' ';
      return -1;
    }
  }
  if (*rc != 0) {
    snprintf(err, errlen, "agent returned %d", *rc);
    return -1;
  }
  return 0;
}
