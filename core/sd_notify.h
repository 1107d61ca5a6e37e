/* SPDX-License-Identifier: Apache-2.0 */
/*
 * systemd readiness notification (sd_notify(3) protocol) without libsystemd:
 * one datagram with "KEY=value" lines to the socket named by $NOTIFY_SOCKET
 * (a path, or an abstract name written with a leading '@').
 *
 * The agent sends READY=1 once its plugins are loaded, RELOADING=1 then
 * READY=1 around a SIGHUP reload, STATUS=... after each session and
 * STOPPING=1 on the way out. Outside systemd (no $NOTIFY_SOCKET) every call
 * is a no-op.
 */
#ifndef PP_SD_NOTIFY_H
#define PP_SD_NOTIFY_H

/* Reads $NOTIFY_SOCKET once and removes it from the environment, so plugin
 * workers and the helpers they start never talk to the service manager in
 * the agent's name. Returns 1 if notifications are on, 0 if the variable is
 * unset, or -EINVAL if it is malformed (relative, empty, too long): then
 * notifications stay off and the caller logs why. */
int pp_sd_notify_init(void);

/* Sends `state` ("READY=1", "STATUS=...\nREADY=1"...). 0 when sent or when
 * notifications are off, -errno if the datagram could not be sent. Safe to
 * call from the run loop at any time; never blocks. */
int pp_sd_notify(const char *state);

/* Forgets the address (tests; the agent never needs it). */
void pp_sd_notify_reset(void);

#endif
