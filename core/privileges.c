/* SPDX-License-Identifier: Apache-2.0 */
/* Worker capability sets from plugin declarations (privileges.h). */
#include "privileges.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "polyprof/plugin.h"

#define CAP_BIT(n) (1ull << (n))

/* Capability numbers (linux/capability.h), named here so that the mapping
 * reads like the documentation. */
enum {
  C_DAC_OVERRIDE = 1,
  C_DAC_READ_SEARCH = 2,
  C_FOWNER = 3,
  C_KILL = 5,
  C_SETGID = 6,
  C_SETUID = 7,
  C_IPC_LOCK = 14,
  C_SYS_CHROOT = 18,
  C_SYS_PTRACE = 19,
  C_SYS_ADMIN = 21,
  C_SYSLOG = 34,
  C_PERFMON = 38,
  C_CHECKPOINT_RESTORE = 40,
};

static const char *const cap_names[] = {
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
};

struct cap_header {
  uint32_t version;
  int pid;
};
struct cap_data {
  uint32_t effective, permitted, inheritable;
};
#define CAP_VERSION_3 0x20080522

bool pp_priv_declared(uint64_t plugin_caps) {
  return (plugin_caps & PP_CAP_NEEDS_ANY) != 0;
}

int pp_priv_last_cap(void) {
  static int cached = -1;
  if (cached >= 0) return cached;
  int v = 40;
  FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");
  if (f) {
    int n;
    if (fscanf(f, "%d", &n) == 1 && n > 0 && n < 64) v = n;
    fclose(f);
  }
  cached = v;
  return v;
}

uint64_t pp_priv_needed(uint64_t d) {
  uint64_t c = 0;
  if (d & PP_CAP_NEEDS_ROOT) c |= ~0ull;
  /* Before 5.8 there is no CAP_PERFMON: perf_event_open of other users'
   * processes and the kernel is CAP_SYS_ADMIN's. */
  if (d & PP_CAP_NEEDS_PERFMON)
    c |= CAP_BIT(pp_priv_last_cap() >= C_PERFMON ? C_PERFMON : C_SYS_ADMIN) | CAP_BIT(C_IPC_LOCK);
  /* /proc/PID/map_files (the kit's way to a mapped file whose path was
   * replaced) is CAP_CHECKPOINT_RESTORE's since 5.9; before, only
   * CAP_SYS_ADMIN opens it, which is not worth it for that fallback. */
  if (d & PP_CAP_NEEDS_PTRACE) {
    c |= CAP_BIT(C_SYS_PTRACE) | CAP_BIT(C_DAC_READ_SEARCH);
    if (pp_priv_last_cap() >= C_CHECKPOINT_RESTORE) c |= CAP_BIT(C_CHECKPOINT_RESTORE);
  }
  if (d & PP_CAP_NEEDS_SYSLOG) c |= CAP_BIT(C_SYSLOG);
  if (d & PP_CAP_NEEDS_KILL) c |= CAP_BIT(C_KILL);
  if (d & PP_CAP_NEEDS_NSENTER) c |= CAP_BIT(C_SYS_ADMIN) | CAP_BIT(C_SYS_CHROOT);
  if (d & PP_CAP_NEEDS_SETID) c |= CAP_BIT(C_SETUID) | CAP_BIT(C_SETGID);
  if (d & PP_CAP_NEEDS_FILE_OVERRIDE) c |= CAP_BIT(C_DAC_OVERRIDE);
  if (d & PP_CAP_NEEDS_FILE_OWNER) c |= CAP_BIT(C_FOWNER);
  int last = pp_priv_last_cap();
  if (last < 63) c &= (1ull << (last + 1)) - 1;
  return c;
}

uint64_t pp_priv_agent_caps(void) {
  struct cap_header h = {CAP_VERSION_3, 0};
  struct cap_data d[2];
  if (syscall(SYS_capget, &h, d) != 0) return 0;
  return (uint64_t)d[0].permitted | ((uint64_t)d[1].permitted << 32);
}

uint64_t pp_priv_step_needed(uint64_t d) {
  if (d & PP_CAP_NEEDS_ROOT) return 0;
  uint64_t steps = 0;
  if ((d & PP_CAP_STEP_NSENTER) && (d & PP_CAP_NEEDS_NSENTER)) steps |= PP_CAP_NEEDS_NSENTER;
  if ((d & PP_CAP_STEP_SETID) && (d & PP_CAP_NEEDS_SETID)) steps |= PP_CAP_NEEDS_SETID;
  if ((d & PP_CAP_STEP_KILL) && (d & PP_CAP_NEEDS_KILL)) steps |= PP_CAP_NEEDS_KILL;
  if ((d & PP_CAP_STEP_FILE_OVERRIDE) && (d & PP_CAP_NEEDS_FILE_OVERRIDE))
    steps |= PP_CAP_NEEDS_FILE_OVERRIDE;
  if ((d & PP_CAP_STEP_FILE_OWNER) && (d & PP_CAP_NEEDS_FILE_OWNER))
    steps |= PP_CAP_NEEDS_FILE_OWNER;
  if (!steps) return 0;
  /* A capability that another need also maps to (CAP_SYS_ADMIN for perf
   * events before 5.8) is needed all the time: it stays effective. */
  return pp_priv_needed(steps) & ~pp_priv_needed(d & ~steps);
}

struct pp_privs pp_priv_for_plugin(uint64_t plugin_caps) {
  struct pp_privs p = {.caps = pp_priv_needed(plugin_caps) & pp_priv_agent_caps(),
                       .last_cap = pp_priv_last_cap()};
  p.step = pp_priv_step_needed(plugin_caps) & p.caps;
  return p;
}

void pp_priv_format(uint64_t caps, char *buf, size_t len) {
  size_t off = 0;
  if (len) buf[0] = 0;
  for (int i = 0; i < 64 && off < len; i++) {
    if (!(caps & CAP_BIT(i))) continue;
    int n;
    if ((size_t)i < sizeof(cap_names) / sizeof(cap_names[0]))
      n = snprintf(buf + off, len - off, "%s%s", off ? "," : "", cap_names[i]);
    else
      n = snprintf(buf + off, len - off, "%scap_%d", off ? "," : "", i);
    if (n < 0) break;
    off += (size_t)n;
  }
  if (!off) snprintf(buf, len, "none");
}

/* Raw syscalls only: this runs between fork() and exec() of a threaded
 * process. */
static int set_sets(uint64_t caps, int last_cap, bool need_bounding) {
  /* Bounding first: dropping needs CAP_SETPCAP, which capset() takes away.
   * A root process that execs gets its whole bounding set back, so for a
   * root worker the cut is essential; an agent that is not root execs into
   * exactly its ambient set, and no_new_privs keeps exec from adding. */
  for (int c = 0; c <= last_cap; c++) {
    if (caps & CAP_BIT(c)) continue;
    if (prctl(PR_CAPBSET_DROP, (unsigned long)c, 0ul, 0ul, 0ul) != 0 && errno != EINVAL &&
        need_bounding && geteuid() == 0)
      return -PP_PRIV_ESETPCAP;
  }
  struct cap_header h = {CAP_VERSION_3, 0};
  struct cap_data d[2];
  for (int i = 0; i < 2; i++) {
    uint32_t v = (uint32_t)(caps >> (32 * i));
    d[i].effective = d[i].permitted = d[i].inheritable = v;
  }
  if (syscall(SYS_capset, &h, d) != 0) return -errno;
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0ul, 0ul, 0ul) != 0 && errno != EINVAL)
    return -errno;
  for (int c = 0; c <= last_cap; c++)
    if ((caps & CAP_BIT(c)) &&
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, (unsigned long)c, 0ul, 0ul) != 0)
      return -errno;
  return 0;
}

int pp_priv_child_apply(const struct pp_privs *p) {
  int rc = set_sets(p->caps, p->last_cap, true);
  if (rc) return rc;
  /* The worker sets it again before loading the plugin; here it already
   * keeps the exec below from gaining anything. */
  if (prctl(PR_SET_NO_NEW_PRIVS, 1ul, 0ul, 0ul, 0ul) != 0) return -errno;
  return 0;
}

int pp_priv_worker_lower_steps(uint64_t step) {
  if (!step) return 0;
  struct cap_header h = {CAP_VERSION_3, 0};
  struct cap_data d[2];
  if (syscall(SYS_capget, &h, d) != 0) return -errno;
  for (int i = 0; i < 2; i++)
    d[i].effective &= ~(uint32_t)(step >> (32 * i));
  if (syscall(SYS_capset, &h, d) != 0) return -errno;
  /* Ambient capabilities become effective in whatever the plugin executes:
   * a step capability must not reach a helper that way. */
  for (int c = 0; c < 64; c++)
    if ((step & CAP_BIT(c)) &&
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_LOWER, (unsigned long)c, 0ul, 0ul) != 0 &&
        errno != EINVAL)
      return -errno;
  return 0;
}

int pp_priv_child_drop_all(int last_cap) {
  /* A probe does not exec: without CAP_SETPCAP its empty permitted set and
   * no_new_privs are the limit. */
  int rc = set_sets(0, last_cap, false);
  if (rc) return rc;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1ul, 0ul, 0ul, 0ul) != 0) return -errno;
  return 0;
}
