/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Facts about a candidate Node.js process read from /proc: is it really
 * Node (so SIGUSR1 opens the inspector instead of killing it), its flags,
 * its listening loopback sockets, its appid.
 */
#ifndef POLYPROF_NODEJS_NODEPROC_H
#define POLYPROF_NODEJS_NODEPROC_H

#include <stddef.h>
#include <stdint.h>

struct nodejs_facts {
  int inspect_flag;    /* --inspect* on the command line or in NODE_OPTIONS */
  int disable_sigusr1; /* --disable-sigusr1 */
  int perf_prof;       /* started with --perf-basic-prof / --perf-prof */
  int inspect_port;    /* --inspect-port / --debug-port: the port, -1 unreadable, 0 none */
  char exe[256];
};

/* Positive identification before any signal: the exe is named like node,
 * the exe (or a mapped libnode.so) exports Node's N-API and V8 entry
 * points, and the process catches SIGUSR1 (so the signal cannot kill it).
 * Returns 0 if it is Node, -ENOTSUP with a reason otherwise, -EAGAIN if it
 * is Node but does not catch SIGUSR1 (yet: Node installs the handler during
 * startup), -ESRCH if gone. */
int nodejs_identify(uint32_t pid, struct nodejs_facts *facts, char *why, size_t whylen);

/* 1 if pid catches SIGUSR1 right now, 0 if not, negative errno. */
int nodejs_catches_sigusr1(uint32_t pid);

struct nodejs_listener {
  uint64_t inode;
  uint16_t port;
};

/* TCP sockets of pid listening on 127.0.0.1, 0.0.0.0 or :: in its network
 * namespace (as /proc/<pid>/net/tcp{,6} shows it), limited to sockets pid
 * holds open. Returns how many were stored (at most max), or -errno. */
int nodejs_listeners(uint32_t pid, struct nodejs_listener *out, size_t max);
/* Established connections pid accepted on its local port (inspector
 * sessions, ours included), or negative errno when it cannot be told. */
int nodejs_port_connections(uint32_t pid, uint16_t port);
/* The inode of a socket listening on TCP `port` (any address) in pid's
 * network namespace, whoever holds it, or 0 (none, or it cannot be told). */
uint64_t nodejs_port_listener(uint32_t pid, uint16_t port);

/* "nodejs: <script> (<abs path>)" for .js/.mjs/.cjs entry scripts, as
 * gProfiler's appid rule (which only knows .js). 0 or -ENOENT. */
int nodejs_appid(uint32_t pid, char *out, size_t cap);

#endif
