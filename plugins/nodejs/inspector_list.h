/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The inspector's target list (the JSON body of its GET /json/list reply),
 * sent by the profiled process.
 */
#ifndef POLYPROF_NODEJS_INSPECTOR_LIST_H
#define POLYPROF_NODEJS_INSPECTOR_LIST_H

#include <stddef.h>

/* Writes into path (plen bytes, NUL-terminated) the WebSocket path, without
 * its leading '/', of the first target whose webSocketDebuggerUrl is a
 * ws:// URL with a path that fits and is a single request-line token
 * (visible ASCII, no space). 0, or -EPROTO when no target qualifies. */
int nodejs_inspector_ws_path(const char *body, char *path, size_t plen);

#endif
