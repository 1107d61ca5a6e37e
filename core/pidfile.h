/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Single-instance lock: a pid file held with flock() for the agent's life.
 * A second agent learns which pid holds it.
 */
#ifndef PP_PIDFILE_H
#define PP_PIDFILE_H

#include <stddef.h>

/* Returns an fd (keep it open) or -errno with err set, e.g.
 * "another polyprof (pid 1234) is running: /run/polyprof.pid is locked". */
int pp_pidfile_acquire(const char *path, char *err, size_t errlen);
void pp_pidfile_release(int fd, const char *path);

#endif
