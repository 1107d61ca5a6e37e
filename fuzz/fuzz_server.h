/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A server inside the fuzz process for clients that open their own
 * connection (Node's inspector HTTP client, the Docker API client, the
 * uploaders over libcurl): a thread accepts on a loopback TCP port or a
 * Unix socket, reads each request's head and answers every connection
 * with the current fuzz input, then closes it.
 */
#ifndef PP_FUZZ_SERVER_H
#define PP_FUZZ_SERVER_H

#include <stddef.h>
#include <stdint.h>

/* Starts the server once (later calls return the same port). */
uint16_t pp_fuzz_server_tcp(void);
/* Same on a Unix socket; returns its path. */
const char *pp_fuzz_server_unix(void);
/* What every connection gets from now on, until pp_fuzz_server_end(). */
void pp_fuzz_server_reply(const uint8_t *data, size_t size);
/* Waits until no connection is being answered, so the input may go. */
void pp_fuzz_server_end(void);

#endif
