/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The attach guard: while an inspector the agent opened may listen, the
 * kernel refuses every connection to its port in the target's network
 * namespace except the worker's own (attach_guard.c).
 */
#ifndef POLYPROF_NODEJS_ATTACH_GUARD_H
#define POLYPROF_NODEJS_ATTACH_GUARD_H

#include <stddef.h>
#include <stdint.h>

struct nodejs_guard;

/* Loads the connect hooks and attaches them to the root of the cgroup2
 * hierarchy; they refuse nothing until armed. NULL with why set when the
 * kernel or the worker's privileges do not allow it. */
struct nodejs_guard *nodejs_guard_new(char *why, size_t whylen);
/* Detaches everything (closing the worker's descriptors does the same). */
void nodejs_guard_free(struct nodejs_guard *g);
/* The cookie of pid's network namespace (as the hooks see it). */
int nodejs_guard_netns_cookie(uint32_t pid, uint64_t *cookie);
/* Refuses connections to port in that namespace from any process but this
 * one. Each arm is one holder; -EBUSY if the namespace is armed for another
 * port. */
int nodejs_guard_arm(struct nodejs_guard *g, uint64_t netns_cookie, uint16_t port);
/* Drops one holder; the last one lifts the namespace's guard. */
void nodejs_guard_disarm(struct nodejs_guard *g, uint64_t netns_cookie);

#endif
