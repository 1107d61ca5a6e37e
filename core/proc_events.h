/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kernel's process events connector (NETLINK_CONNECTOR, CN_IDX_PROC):
 * fork, exec and exit of every process, so target discovery learns of new
 * processes and exec()s without listing /proc every second.
 *
 * Events are queued by the kernel in the socket and read in one batch per
 * scan interval, or sooner when the batch holds an exec (a new program may
 * be a runtime to profile from its first moments); the caller bounds how
 * often it looks (no wake-up per event). What a batch says is reduced to two
 * sets of pids: "changed" (born or exec'd: read its start time and
 * executable again) and "gone" (its thread group leader exited). Pids are
 * those of the initial PID namespace, so the connector is used only when
 * the kernel accepted the subscription, which it does only from the initial
 * PID and user namespaces with CAP_NET_ADMIN.
 */
#ifndef PP_PROC_EVENTS_H
#define PP_PROC_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pp_proc_events;

/* Subscribes. NULL when the connector cannot be used, with the reason in
 * why (no CAP_NET_ADMIN, another network or PID namespace, a kernel
 * without it). */
struct pp_proc_events *pp_proc_events_open(char *why, size_t why_len);
void pp_proc_events_close(struct pp_proc_events *pe);

/* Reads every queued event. Returns 0, or 1 when some were lost (the
 * socket's queue overflowed, or a batch held more changes than the set
 * keeps): the caller must list /proc to catch up. */
int pp_proc_events_drain(struct pp_proc_events *pe);

/* The socket, for poll(): readable when the kernel has queued events. */
int pp_proc_events_fd(const struct pp_proc_events *pe);

/* Reads every queued event into the batch without taking it. True when
 * the batch holds an exec or lost events: worth a drain and take now. */
bool pp_proc_events_read(struct pp_proc_events *pe);

/* The batch read since the previous take, each pid once and sorted, by
 * its last event: changed (fork of a new process, exec) or gone (exit of
 * its leader). Valid until the next drain; the batch is then empty. */
void pp_proc_events_take(struct pp_proc_events *pe, const uint32_t **changed, size_t *nchanged,
                         const uint32_t **gone, size_t *ngone);

#endif
