/* SPDX-License-Identifier: Apache-2.0 */
/* The worker's seccomp sandbox (worker_sandbox.h). */
#include "worker_sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ipc.h"
#include "log.h"

#if defined(__x86_64__)
#define PP_AUDIT_ARCH AUDIT_ARCH_X86_64
#define PP_X32_BIT 0x40000000u /* x32 numbers: another ABI, refused */
#elif defined(__aarch64__)
#define PP_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

#define MAX_LIST_BYTES (64u << 10)

int pp_syscall_number(const char *name) {
  for (size_t i = 0; i < pp_syscall_table_len; i++)
    if (strcmp(pp_syscall_table[i].name, name) == 0) return pp_syscall_table[i].nr;
  return -1;
}

const char *pp_syscall_name(int nr) {
  for (size_t i = 0; i < pp_syscall_table_len; i++)
    if (pp_syscall_table[i].nr == nr) return pp_syscall_table[i].name;
  return NULL;
}

static void set_add(struct pp_syscall_set *s, int nr) {
  if (nr >= 0 && nr < PP_SYSCALL_MAX) s->bits[nr / 8] |= (uint8_t)(1u << (nr % 8));
}

static bool set_has(const struct pp_syscall_set *s, int nr) {
  return nr >= 0 && nr < PP_SYSCALL_MAX && (s->bits[nr / 8] >> (nr % 8)) & 1;
}

int pp_allowlist_parse(const char *text, struct pp_syscall_set *set, unsigned *unknown, char *err,
                       size_t errlen) {
  unsigned line = 0;
  const char *p = text;
  while (*p) {
    line++;
    const char *eol = strchr(p, '\n');
    size_t n = eol ? (size_t)(eol - p) : strlen(p);
    const char *hash = memchr(p, '#', n);
    size_t m = hash ? (size_t)(hash - p) : n;
    while (m && (p[m - 1] == ' ' || p[m - 1] == '\t' || p[m - 1] == '\r'))
      m--;
    size_t s = 0;
    while (s < m && (p[s] == ' ' || p[s] == '\t'))
      s++;
    if (s < m) {
      char name[64];
      size_t len = m - s;
      bool ok = len < sizeof(name);
      for (size_t i = 0; ok && i < len; i++) {
        char c = p[s + i];
        ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
      }
      if (!ok) {
        snprintf(err, errlen, "line %u: \"%.*s\" is not a system call name", line,
                 (int)(len > 40 ? 40 : len), p + s);
        return -EINVAL;
      }
      memcpy(name, p + s, len);
      name[len] = 0;
      int nr = pp_syscall_number(name);
      if (nr < 0 || nr >= PP_SYSCALL_MAX) {
        if (unknown) (*unknown)++;
      } else {
        set_add(set, nr);
      }
    }
    if (!eol) break;
    p = eol + 1;
  }
  return 0;
}

int pp_allowlist_path(const char *plugin_path, char *out, size_t cap) {
  size_t n = strlen(plugin_path);
  if (n > 3 && strcmp(plugin_path + n - 3, ".so") == 0) n -= 3;
  if (n + sizeof(".seccomp") > cap) return -ENAMETOOLONG;
  memcpy(out, plugin_path, n);
  memcpy(out + n, ".seccomp", sizeof(".seccomp"));
  return 0;
}

int pp_allowlist_load(const char *path, struct pp_syscall_set *set, char *err, size_t errlen) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return 0;
    int e = errno;
    snprintf(err, errlen, "allow-list %s: %s", path, strerror(e));
    return -e;
  }
  struct stat st;
  int rc = 0;
  char *text = NULL;
  if (fstat(fd, &st) < 0) {
    rc = -errno;
    snprintf(err, errlen, "allow-list %s: %s", path, strerror(-rc));
  } else if (!S_ISREG(st.st_mode) || (st.st_uid != 0 && st.st_uid != geteuid()) ||
             (st.st_mode & 022)) {
    /* As trusted as the plugin itself, or not at all. */
    rc = -EPERM;
    snprintf(err, errlen,
             "allow-list %s is not a regular file owned by root (or the agent's user) and "
             "writable by its owner only",
             path);
  } else if ((uint64_t)st.st_size > MAX_LIST_BYTES) {
    rc = -EFBIG;
    snprintf(err, errlen, "allow-list %s is larger than %u bytes", path, MAX_LIST_BYTES);
  } else if (!(text = malloc((size_t)st.st_size + 1))) {
    rc = -ENOMEM;
    snprintf(err, errlen, "out of memory");
  } else {
    size_t got = 0;
    while (got < (size_t)st.st_size) {
      ssize_t r = read(fd, text + got, (size_t)st.st_size - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += (size_t)r;
    }
    text[got] = 0;
    if (memchr(text, 0, got)) {
      rc = -EINVAL;
      snprintf(err, errlen, "allow-list %s: not a text file", path);
    } else {
      char why[200];
      rc = pp_allowlist_parse(text, set, NULL, why, sizeof(why));
      if (rc) snprintf(err, errlen, "allow-list %s: %s", path, why);
    }
  }
  free(text);
  close(fd);
  return rc ? rc : 1;
}

#define STMT(code, k) ((struct sock_filter)BPF_STMT((code), (k)))
#define JUMP(code, k, jt, jf) ((struct sock_filter)BPF_JUMP((code), (k), (jt), (jf)))

int pp_sandbox_build(const struct pp_syscall_set *set, struct sock_filter *prog, size_t cap) {
  size_t n = 0;
#define EMIT(insn)               \
  do {                           \
    if (n >= cap) return -E2BIG; \
    prog[n++] = (insn);          \
  } while (0)
#ifdef PP_AUDIT_ARCH
  /* Another ABI's numbers mean other calls: refuse outright. */
  EMIT(STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
  EMIT(JUMP(BPF_JMP | BPF_JEQ | BPF_K, PP_AUDIT_ARCH, 1, 0));
  EMIT(STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
#endif
  EMIT(STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
#ifdef PP_X32_BIT
  EMIT(JUMP(BPF_JMP | BPF_JGE | BPF_K, PP_X32_BIT, 0, 1));
  EMIT(STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
#endif
  /* One compare and return per allowed call: no argument is looked at, so
   * the kernel (5.11+) caches every verdict in a bitmap and an allowed call
   * costs no filter run at all. */
  for (int nr = 0; nr < PP_SYSCALL_MAX; nr++) {
    if (!set_has(set, nr)) continue;
    EMIT(JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 1));
    EMIT(STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  }
  EMIT(STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP));
#undef EMIT
  return (int)n;
}

/* ---- the SIGSYS reporter ---- */

static int report_fd = -1;

static size_t put_u32(uint8_t *p, uint32_t v) {
  memcpy(p, &v, 4);
  return 4;
}

/* Async-signal-safe: one write of a small DENIED frame, then exit. A
 * plugin thread in the middle of sending a frame of its own when another
 * thread trips could interleave the two on the stream; the agent then
 * sees a protocol error instead of the name, and still the SIGSYS-style
 * exit status. */
static void on_sigsys(int sig, siginfo_t *si, void *uc) {
  (void)sig;
  (void)uc;
  int nr = si->si_syscall;
  const char *name = pp_syscall_name(nr);
  if (!name) name = "unknown";
  size_t len = strlen(name);
  if (len > 48) len = 48;
  uint8_t buf[PP_IPC_HDR_SIZE + 8 + 48];
  uint32_t payload = (uint32_t)(8 + len);
  size_t off = put_u32(buf, PP_MSG_DENIED);
  off += put_u32(buf + off, payload);
  off += put_u32(buf + off, (uint32_t)nr);
  off += put_u32(buf + off, (uint32_t)len);
  memcpy(buf + off, name, len);
  off += len;
  if (report_fd >= 0) {
    ssize_t w = write(report_fd, buf, off);
    (void)w;
  }
  _exit(PP_WORKER_EXIT_DENIED);
}

int pp_sandbox_enter(int sock_fd, const char *plugin_path, const char *plugin_name, char *err,
                     size_t errlen) {
  struct pp_syscall_set set;
  memset(&set, 0, sizeof(set));
  char why[512];
  if (pp_allowlist_parse(pp_seccomp_base_list, &set, NULL, why, sizeof(why)) < 0) {
    snprintf(err, errlen, "the built-in base allow-list: %s", why);
    return -EINVAL;
  }
  /* Beside the real file: a plugin directory of symlinks (a test's, or an
   * operator's selection) still finds each plugin's own list. */
#ifdef POLYPROF_SANITIZE
  /* A sanitizer build's worker runs LeakSanitizer at exit, which stops the
   * process's threads with ptrace from a helper task. */
  pp_allowlist_parse("ptrace\nwait4\nwaitid\n", &set, NULL, why, sizeof(why));
#endif
  char list[4200];
  char *real = realpath(plugin_path, NULL);
  int prc = pp_allowlist_path(real ? real : plugin_path, list, sizeof(list));
  free(real);
  if (prc < 0) {
    snprintf(err, errlen, "plugin path too long for its allow-list");
    return -ENAMETOOLONG;
  }
  int rc = pp_allowlist_load(list, &set, err, errlen);
  if (rc < 0) return rc;
  if (rc == 0) {
    pp_allowlist_parse(pp_seccomp_default_list, &set, NULL, why, sizeof(why));
    pp_log(PP_LOG_WARNING, "polyprof",
           "plugin %s has no system call allow-list (%s): it runs with the default set "
           "(docs/security.md); ship one with the plugin",
           plugin_name, list);
  }
  struct sock_filter prog[4 + 2 * PP_SYSCALL_MAX + 4];
  int n = pp_sandbox_build(&set, prog, sizeof(prog) / sizeof(prog[0]));
  if (n < 0) {
    snprintf(err, errlen, "seccomp filter too large");
    return n;
  }
  report_fd = sock_fd;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_sigsys;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigset_t sys;
  sigemptyset(&sys);
  sigaddset(&sys, SIGSYS);
  if (sigaction(SIGSYS, &sa, NULL) < 0 || sigprocmask(SIG_UNBLOCK, &sys, NULL) < 0) {
    rc = -errno;
    snprintf(err, errlen, "SIGSYS handler: %s", strerror(-rc));
    return rc;
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1ul, 0ul, 0ul, 0ul) != 0) {
    rc = -errno;
    snprintf(err, errlen, "no_new_privs: %s", strerror(-rc));
    return rc;
  }
  struct sock_fprog fprog = {.len = (unsigned short)n, .filter = prog};
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) != 0) {
    rc = -errno;
    snprintf(err, errlen, "seccomp filter: %s", strerror(-rc));
    return rc;
  }
  return 0;
}
