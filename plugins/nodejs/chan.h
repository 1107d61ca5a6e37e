/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's end of the helper channel (helper.h): a unix stream socket
 * in the helper's private directory, reached through the kit's target-root
 * access, one JSON object per line both ways.
 */
#ifndef POLYPROF_NODEJS_CHAN_H
#define POLYPROF_NODEJS_CHAN_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct nodejs_chan {
  int fd;
  char *buf; /* bytes received, not handed out yet */
  size_t len, cap;
  size_t max_line; /* longest message accepted (a cpuprofile) */
};

void nodejs_chan_init(struct nodejs_chan *c, size_t max_line);
/* Connects to the socket at path inside pid's root (owned by its user);
 * the peer must be pid itself (SO_PEERCRED). 0 or -errno, reason set. */
int nodejs_chan_connect(struct nodejs_chan *c, uint32_t pid, const char *path, char *reason,
                        size_t cap);
/* Sends {"t":type}. 0 or -errno. */
int nodejs_chan_send(struct nodejs_chan *c, const char *type, uint64_t deadline_ns);
/* Next message as a JSON object (new reference), waiting until deadline
 * (0: only what has arrived). -ETIMEDOUT when none is complete by then,
 * -ECONNRESET at EOF, -EMSGSIZE / -EPROTO for a message refused. */
int nodejs_chan_recv(struct nodejs_chan *c, json_t **msg, uint64_t deadline_ns);
void nodejs_chan_close(struct nodejs_chan *c);

#endif
