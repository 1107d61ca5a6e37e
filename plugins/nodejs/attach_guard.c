/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The attach guard (attach_guard.h).
 *
 * Node's SIGUSR1 inspector has no authentication: whoever connects to it
 * can run code as the process. The agent needs it for a few milliseconds,
 * so before the signal it arms a connect hook in the kernel: a cgroup
 * connect4/connect6 BPF program on the root of the cgroup2 hierarchy runs
 * at every TCP connect() on the host, before any packet leaves, and
 * refuses (EPERM) a connection to the guarded port of the guarded network
 * namespace unless the caller is this worker process. An unprivileged
 * client thus finds the inspector refusing it for as long as it may
 * listen, whoever it is and however fast it polls.
 *
 * The program is 21 instructions written out here (no compiler, no
 * libbpf). Its map holds, per network namespace cookie, the allowed
 * process (its thread group id as the kernel knows it) and the port in
 * network byte order. The hooks are attached through BPF links whose only
 * references are this worker's descriptors: when the worker ends, even by
 * SIGKILL, the kernel detaches them, so nothing is left behind.
 */
#include "attach_guard.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "polyprof/kit/cap_step.h"

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif

#define GUARD_SLOTS 256 /* network namespaces armed at once (the map's size) */

struct nodejs_guard {
  int map_fd;
  int prog_fd[2], link_fd[2];
  uint32_t tgid;
  /* how many targets hold each armed namespace: the last one disarms it */
  struct {
    uint64_t cookie;
    uint32_t holders;
  } slot[GUARD_SLOTS];
};

static int slot_of(struct nodejs_guard *g, uint64_t cookie) {
  for (int i = 0; i < GUARD_SLOTS; i++)
    if (g->slot[i].holders && g->slot[i].cookie == cookie) return i;
  return -1;
}

struct guard_value {
  uint32_t tgid;
  uint32_t port_be;
};

/* bpf() needs CAP_SYS_ADMIN (CAP_BPF) for every command while unprivileged
 * BPF is disabled: a step capability, raised for this call only. */
static long sys_bpf(int cmd, union bpf_attr *attr) {
  struct pp_cap_step s;
  pp_cap_step_begin(&s, PP_CAP_NEEDS_NSENTER);
  long rc = syscall(SYS_bpf, cmd, attr, sizeof(*attr));
  pp_cap_step_end(&s);
  return rc;
}

#define INSN(c, d, s, o, i) \
  ((struct bpf_insn){.code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i)})

/* The hook: allow (1) unless the socket's namespace is armed, the port is
 * the armed one and the caller is not the armed process. */
static int load_prog(int map_fd, enum bpf_attach_type type, char *log, size_t loglen) {
  const struct bpf_insn prog[] = {
      INSN(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_6, BPF_REG_1, 0, 0), /* r6 = ctx */
      INSN(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_1, BPF_REG_6, 0, 0),
      INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_get_netns_cookie),
      INSN(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_10, BPF_REG_0, -8, 0), /* key on the stack */
      INSN(BPF_LD | BPF_IMM | BPF_DW, BPF_REG_1, BPF_PSEUDO_MAP_FD, 0, map_fd),
      INSN(0, 0, 0, 0, 0),
      INSN(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_2, BPF_REG_10, 0, 0),
      INSN(BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_2, 0, 0, -8),
      INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_map_lookup_elem),
      INSN(BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_0, 0, 9, 0), /* not armed: allow */
      INSN(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_7, BPF_REG_0, 0, 0),
      INSN(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_8, BPF_REG_0, 4, 0),
      INSN(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_2, BPF_REG_6,
           offsetof(struct bpf_sock_addr, user_port), 0),
      INSN(BPF_JMP | BPF_JNE | BPF_X, BPF_REG_2, BPF_REG_8, 5, 0), /* another port: allow */
      INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_get_current_pid_tgid),
      INSN(BPF_ALU64 | BPF_RSH | BPF_K, BPF_REG_0, 0, 0, 32),
      INSN(BPF_JMP | BPF_JEQ | BPF_X, BPF_REG_0, BPF_REG_7, 2, 0), /* the agent: allow */
      INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0),
      INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
      INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1),
      INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
  };
  static const char license[] = "Dual BSD/GPL";
  union bpf_attr a;
  memset(&a, 0, sizeof(a));
  a.prog_type = BPF_PROG_TYPE_CGROUP_SOCK_ADDR;
  a.expected_attach_type = type;
  a.insns = (uint64_t)(uintptr_t)prog;
  a.insn_cnt = sizeof(prog) / sizeof(prog[0]);
  a.license = (uint64_t)(uintptr_t)license;
  a.log_buf = (uint64_t)(uintptr_t)log;
  a.log_size = (uint32_t)loglen;
  a.log_level = log ? 1 : 0;
  snprintf(a.prog_name, sizeof(a.prog_name), "pp_node_guard");
  int fd = (int)sys_bpf(BPF_PROG_LOAD, &a);
  return fd < 0 ? -errno : fd;
}

/* Where the cgroup2 hierarchy is mounted (its root as this mount namespace
 * sees it). */
static int cgroup2_root(char *out, size_t cap) {
  FILE *f = fopen("/proc/self/mountinfo", "re");
  if (!f) return -errno;
  char line[4096];
  int rc = -ENOENT;
  while (rc < 0 && fgets(line, sizeof(line), f)) {
    char root[1024], mnt[1024];
    const char *sep = strstr(line, " - cgroup2 ");
    if (!sep || sscanf(line, "%*s %*s %*s %1023s %1023s", root, mnt) != 2) continue;
    if (strcmp(root, "/") != 0 || strlen(mnt) >= cap) continue;
    snprintf(out, cap, "%s", mnt);
    rc = 0;
  }
  fclose(f);
  return rc;
}

/* This process's id as the kernel's hooks see it: the outermost pid of
 * the NSpid line (the agent runs in the host's pid namespace). */
static uint32_t kernel_tgid(void) {
  FILE *f = fopen("/proc/self/status", "re");
  if (!f) return (uint32_t)getpid();
  char line[256];
  unsigned long pid = 0;
  while (fgets(line, sizeof(line), f))
    if (sscanf(line, "NSpid: %lu", &pid) == 1) break;
  fclose(f);
  return pid ? (uint32_t)pid : (uint32_t)getpid();
}

void nodejs_guard_free(struct nodejs_guard *g) {
  if (!g) return;
  for (int i = 0; i < 2; i++) {
    if (g->link_fd[i] >= 0) close(g->link_fd[i]);
    if (g->prog_fd[i] >= 0) close(g->prog_fd[i]);
  }
  if (g->map_fd >= 0) close(g->map_fd);
  free(g);
}

struct nodejs_guard *nodejs_guard_new(char *why, size_t whylen) {
  struct nodejs_guard *g = calloc(1, sizeof(*g));
  if (!g) {
    snprintf(why, whylen, "out of memory");
    return NULL;
  }
  g->map_fd = g->prog_fd[0] = g->prog_fd[1] = g->link_fd[0] = g->link_fd[1] = -1;
  g->tgid = kernel_tgid();
  union bpf_attr a;
  memset(&a, 0, sizeof(a));
  a.map_type = BPF_MAP_TYPE_HASH;
  a.key_size = sizeof(uint64_t);
  a.value_size = sizeof(struct guard_value);
  a.max_entries = GUARD_SLOTS;
  snprintf(a.map_name, sizeof(a.map_name), "pp_node_guard");
  g->map_fd = (int)sys_bpf(BPF_MAP_CREATE, &a);
  if (g->map_fd < 0) {
    snprintf(why, whylen, "creating its BPF map: %s", strerror(errno));
    nodejs_guard_free(g);
    return NULL;
  }
  char cg[1024];
  int rc = cgroup2_root(cg, sizeof(cg));
  if (rc < 0) {
    snprintf(why, whylen, "no cgroup2 hierarchy mounted: %s", strerror(-rc));
    nodejs_guard_free(g);
    return NULL;
  }
  int cgfd = open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (cgfd < 0) {
    snprintf(why, whylen, "opening %s: %s", cg, strerror(errno));
    nodejs_guard_free(g);
    return NULL;
  }
  static const enum bpf_attach_type types[2] = {BPF_CGROUP_INET4_CONNECT, BPF_CGROUP_INET6_CONNECT};
  for (int i = 0; i < 2; i++) {
    g->prog_fd[i] = load_prog(g->map_fd, types[i], NULL, 0);
    if (g->prog_fd[i] < 0) {
      snprintf(why, whylen, "loading its connect hook: %s", strerror(-g->prog_fd[i]));
      break;
    }
    memset(&a, 0, sizeof(a));
    a.link_create.prog_fd = (uint32_t)g->prog_fd[i];
    a.link_create.target_fd = (uint32_t)cgfd;
    a.link_create.attach_type = types[i];
    g->link_fd[i] = (int)sys_bpf(BPF_LINK_CREATE, &a);
    if (g->link_fd[i] < 0) {
      snprintf(why, whylen, "attaching its connect hook to %s: %s", cg, strerror(errno));
      break;
    }
  }
  close(cgfd);
  if (g->link_fd[1] < 0) {
    nodejs_guard_free(g);
    return NULL;
  }
  return g;
}

struct cookie_job {
  uint32_t pid;
  uint64_t cookie;
  int result;
};

/* In a thread of its own: the network namespace is per thread. */
static void *cookie_thread(void *arg) {
  struct cookie_job *j = arg;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/ns/net", j->pid);
  int nsfd = open(path, O_RDONLY | O_CLOEXEC);
  if (nsfd < 0 || pp_setns_step(nsfd, CLONE_NEWNET) < 0) {
    j->result = -errno;
    if (nsfd >= 0) close(nsfd);
    return NULL;
  }
  close(nsfd);
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  socklen_t l = sizeof(j->cookie);
  j->result = s < 0 || getsockopt(s, SOL_SOCKET, SO_NETNS_COOKIE, &j->cookie, &l) < 0 ? -errno : 0;
  if (s >= 0) close(s);
  return NULL;
}

int nodejs_guard_netns_cookie(uint32_t pid, uint64_t *cookie) {
  struct cookie_job j = {.pid = pid, .result = -EIO};
  pthread_t t;
  int r = pthread_create(&t, NULL, cookie_thread, &j);
  if (r) return -r;
  pthread_join(t, NULL);
  if (j.result == 0) *cookie = j.cookie;
  return j.result;
}

int nodejs_guard_arm(struct nodejs_guard *g, uint64_t netns_cookie, uint16_t port) {
  struct guard_value v = {.tgid = g->tgid, .port_be = htons(port)}, old;
  union bpf_attr a;
  memset(&a, 0, sizeof(a));
  a.map_fd = (uint32_t)g->map_fd;
  a.key = (uint64_t)(uintptr_t)&netns_cookie;
  int i = slot_of(g, netns_cookie);
  if (i >= 0) {
    a.value = (uint64_t)(uintptr_t)&old;
    if (sys_bpf(BPF_MAP_LOOKUP_ELEM, &a) < 0) return -errno;
    if (old.port_be != v.port_be) return -EBUSY;
    g->slot[i].holders++;
    return 0;
  }
  i = 0;
  while (i < GUARD_SLOTS && g->slot[i].holders)
    i++;
  if (i == GUARD_SLOTS) return -ENOSPC;
  a.value = (uint64_t)(uintptr_t)&v;
  a.flags = BPF_ANY;
  if (sys_bpf(BPF_MAP_UPDATE_ELEM, &a) < 0) return -errno;
  g->slot[i].cookie = netns_cookie;
  g->slot[i].holders = 1;
  return 0;
}

void nodejs_guard_disarm(struct nodejs_guard *g, uint64_t netns_cookie) {
  int i = slot_of(g, netns_cookie);
  if (i < 0 || --g->slot[i].holders > 0) return;
  union bpf_attr a;
  memset(&a, 0, sizeof(a));
  a.map_fd = (uint32_t)g->map_fd;
  a.key = (uint64_t)(uintptr_t)&netns_cookie;
  sys_bpf(BPF_MAP_DELETE_ELEM, &a);
}
