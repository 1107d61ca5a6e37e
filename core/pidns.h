/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Is the agent in the host's (initial) pid namespace, where it sees every
 * process? A container without the host's pid namespace mounts its own
 * /proc, in which the agent's NSpid shows one level only, so the answer
 * comes from the namespace's identity instead: the kernel gives the initial
 * pid namespace a fixed inode number (PROC_PID_INIT_INO).
 */
#ifndef PP_PIDNS_H
#define PP_PIDNS_H

#include <stdbool.h>

/* The inode of the initial pid namespace, as /proc/self/ns/pid names it. */
#define PP_PIDNS_INIT_INO 0xEFFFFFFCu

/* True in the initial pid namespace, or when nothing says otherwise
 * (/proc/self/ns/pid and NSpid both unreadable). */
bool pp_pidns_is_init(void);

/* The decision from the text of readlink(/proc/self/ns/pid) ("pid:[N]"):
 * 1 initial, 0 another, -1 unrecognised. Exposed for tests. */
int pp_pidns_link_is_init(const char *link);

#endif
