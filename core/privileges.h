/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a plugin worker may do: the Linux capabilities its declaration
 * (PP_CAP_NEEDS_* in plugin.h) maps to, and how a freshly forked child
 * takes exactly those before it execs the worker (docs/security.md).
 */
#ifndef PP_PRIVILEGES_H
#define PP_PRIVILEGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The capability set of a worker, computed before fork (the child may only
 * make async-signal-safe calls). */
struct pp_privs {
  uint64_t caps; /* Linux capability bits: bounding = permitted = inheritable */
  uint64_t step; /* the part of caps held for single steps only: permitted
                    but neither effective nor ambient once the worker runs
                    (PP_CAP_STEP_*); the plugin raises them around each step */
  int last_cap;  /* highest capability number the kernel knows */
};

/* True if the descriptor declares its privileges (one PP_CAP_NEEDS_* bit at
 * least, PP_CAP_NEEDS_NOTHING included). */
bool pp_priv_declared(uint64_t plugin_caps);

/* The Linux capabilities a declaration maps to, whatever the agent holds. */
uint64_t pp_priv_needed(uint64_t plugin_caps);

/* The capabilities of a declaration that its PP_CAP_STEP_* bits keep out
 * of the effective set (those that no other of its NEEDS bits maps to). */
uint64_t pp_priv_step_needed(uint64_t plugin_caps);

/* What the worker of such a plugin gets: pp_priv_needed() limited to what
 * this process holds (its permitted set). */
struct pp_privs pp_priv_for_plugin(uint64_t plugin_caps);

/* The capabilities this process holds (permitted set). */
uint64_t pp_priv_agent_caps(void);

/* "CAP_SYS_PTRACE,CAP_DAC_READ_SEARCH", or "none". */
void pp_priv_format(uint64_t caps, char *buf, size_t len);

/* Returned by pp_priv_child_apply() when a root agent cannot cut the
 * bounding set (it lacks CAP_SETPCAP): not an errno value. */
#define PP_PRIV_ESETPCAP 4096

/* In a forked child before exec (async-signal-safe): bounding set cut to
 * `p->caps`, then permitted = effective = inheritable = ambient = caps, so
 * the exec'd worker (root or not) starts with exactly them. 0 or -errno, or
 * -PP_PRIV_ESETPCAP (the child must not exec then). */
int pp_priv_child_apply(const struct pp_privs *p);

/* In the exec'd worker, before anything else: the step capabilities leave
 * the effective and ambient sets (they stay permitted, for the kit's
 * pp_cap_step_begin()). 0 or -errno. */
int pp_priv_worker_lower_steps(uint64_t step);

/* In a forked child that runs plugin code without exec (the registry's
 * probe): no capabilities at all, no_new_privs. Async-signal-safe. */
int pp_priv_child_drop_all(int last_cap);

/* Highest capability number the kernel knows (/proc/sys/kernel/cap_last_cap,
 * 40 if unreadable). */
int pp_priv_last_cap(void);

#endif
