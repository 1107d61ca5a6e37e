/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker's seccomp sandbox: no_new_privs, and an allow-list of system
 * calls made of a common base (core/seccomp/base.txt, compiled in) and the
 * plugin's own list, a text file installed beside the plugin as
 * <name>.seccomp (from plugins/<name>/seccomp.txt). A call outside the
 * list traps: the worker tells the agent which call (PP_MSG_DENIED) and
 * exits with PP_WORKER_EXIT_DENIED, and the agent restarts it as for a
 * crash. See docs/security.md.
 */
#ifndef PP_WORKER_SANDBOX_H
#define PP_WORKER_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Exit status of a worker stopped by its allow-list. */
#define PP_WORKER_EXIT_DENIED 159

#define PP_SYSCALL_MAX 1024 /* numbers at or above are refused */

struct pp_syscall_entry {
  const char *name;
  int nr;
};
/* This architecture's system calls (generated at build time). */
extern const struct pp_syscall_entry pp_syscall_table[];
extern const size_t pp_syscall_table_len;
extern const char pp_seccomp_base_list[];
extern const char pp_seccomp_default_list[];

struct pp_syscall_set {
  uint8_t bits[PP_SYSCALL_MAX / 8];
};

/* -1 if unknown on this architecture. */
int pp_syscall_number(const char *name);
/* NULL if unknown. Async-signal-safe. */
const char *pp_syscall_name(int nr);

/* Add the names in `text` (one per line, '#' comments) to `set`. A name
 * this architecture lacks is skipped and counted in *unknown (may be NULL).
 * -EINVAL with err naming the line if a line is not a name. */
int pp_allowlist_parse(const char *text, struct pp_syscall_set *set, unsigned *unknown, char *err,
                       size_t errlen);

/* The allow-list file of a plugin: "<path without .so>.seccomp". */
int pp_allowlist_path(const char *plugin_path, char *out, size_t cap);

/* Read and check a plugin's list (regular file, owned by root or by us,
 * not writable by group or others). 1 if it exists and was added, 0 if
 * there is none, -errno with err set if it is unusable. */
int pp_allowlist_load(const char *path, struct pp_syscall_set *set, char *err, size_t errlen);

/* In the worker process, before the plugin is loaded: no_new_privs, the
 * SIGSYS reporter (writes PP_MSG_DENIED on sock_fd) and the filter for
 * base + the plugin's list (or base + the default list, with a warning in
 * the log, when the plugin has none). 0, or -errno with err set. */
int pp_sandbox_enter(int sock_fd, const char *plugin_path, const char *plugin_name, char *err,
                     size_t errlen);

/* The classic BPF program for `set` (exposed for tests): returns the number
 * of instructions written into prog (at most cap), or -E2BIG. */
struct sock_filter;
int pp_sandbox_build(const struct pp_syscall_set *set, struct sock_filter *prog, size_t cap);

#endif
