/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Core <-> plugin worker protocol.
 *
 * Transport: a SOCK_STREAM unix socketpair (a stream rather than SEQPACKET
 * because a profile can be far larger than a socket buffer, and SEQPACKET
 * refuses a record bigger than that). Each message is
 *
 *     u32 type | u32 length | length bytes of payload
 *
 * in host byte order (both ends are the same machine, usually the same
 * binary). `length` is capped at PP_IPC_MAX_MSG; a peer that announces more
 * is broken or hostile and the connection is dropped. Payload fields are
 * fixed-width integers and strings as u32 length + bytes (no NUL; length
 * PP_WIRE_NULL stands for a NULL pointer). Every field is bounds-checked when
 * decoded: neither side trusts the other.
 *
 * Requests (core -> worker) are answered in order, one answer each: REPLY for
 * everything but SNAPSHOT, which is answered by PROFILE. LOG may arrive at
 * any time in between.
 *
 * The same little buffer helpers (pp_wbuf / pp_rbuf) serialise the profile
 * codec and the registry's descriptor copies.
 */
#ifndef PP_IPC_H
#define PP_IPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Largest payload either side accepts. A snapshot of a busy host is a few
 * MiB; this leaves two orders of magnitude of headroom while still bounding
 * what a corrupt length field can make us allocate. */
#define PP_IPC_MAX_MSG (256u << 20)
#define PP_IPC_HDR_SIZE 8u
#define PP_WIRE_NULL UINT32_MAX

enum pp_ipc_type {
  /* core -> worker */
  PP_MSG_INIT = 1,        /* (empty) dlopen the plugin, entry(), init() -> REPLY */
  PP_MSG_START = 2,       /* session: u32 freq, u32 duration, u32 flags, u64 tick_ns, str mode */
  PP_MSG_ADD_TARGETS = 3, /* u32 n, n * (u32 pid, u32 reserved, u64 start_time) */
  PP_MSG_SNAPSHOT = 4,    /* (empty) -> PROFILE */
  PP_MSG_STOP = 5,        /* (empty) stop() -> REPLY */
  PP_MSG_EXIT = 6,        /* (empty) stop() if started, fini(), REPLY, then exit */
  PP_MSG_PING = 7,        /* (empty) -> REPLY; proves the worker loop is not stuck */
  /* (empty) dump() -> PROFILE: every thread's stack once, each under a
   * "[tid N]" root frame (PP_FRAME_PSEUDO); rc -ENOTSUP without dump() */
  PP_MSG_DUMP = 8,

  /* worker -> core */
  PP_MSG_LOG = 64,     /* u32 level, str text */
  PP_MSG_REPLY = 65,   /* i32 rc, str message ("" on success) */
  PP_MSG_PROFILE = 66, /* i32 rc, str message, then an encoded profile (profile_codec.h) */
  /* u32 syscall number, str its name: the seccomp allow-list refused it;
   * the worker exits right after sending this (worker_sandbox.c) */
  PP_MSG_DENIED = 67,
};

const char *pp_ipc_type_name(uint32_t type);

/* ---- serialisation helpers ---- */

/* Growable output buffer. Errors are sticky (checked once at the end). */
struct pp_wbuf {
  uint8_t *data;
  size_t len, cap;
  size_t limit; /* 0: PP_IPC_MAX_MSG */
  int err;      /* 0 or -ENOMEM / -E2BIG */
};

void pp_wbuf_init(struct pp_wbuf *b);
void pp_wbuf_free(struct pp_wbuf *b);
void pp_wbuf_reset(struct pp_wbuf *b); /* len = 0, err = 0, keeps memory */
/* Make room for `n` more bytes; returns a pointer to write them or NULL. */
uint8_t *pp_wbuf_reserve(struct pp_wbuf *b, size_t n);
void pp_wbuf_put(struct pp_wbuf *b, const void *p, size_t n);
void pp_wbuf_u32(struct pp_wbuf *b, uint32_t v);
void pp_wbuf_u64(struct pp_wbuf *b, uint64_t v);
void pp_wbuf_str(struct pp_wbuf *b, const char *s); /* NULL -> PP_WIRE_NULL */
void pp_wbuf_strn(struct pp_wbuf *b, const char *s, size_t n);

/* Bounds-checked reader over a byte range. Errors are sticky: after the
 * first short read every getter returns 0 / NULL and `err` is -EINVAL. */
struct pp_rbuf {
  const uint8_t *p;
  size_t len, off;
  int err;
};

void pp_rbuf_init(struct pp_rbuf *r, const void *p, size_t len);
uint32_t pp_rbuf_u32(struct pp_rbuf *r);
uint64_t pp_rbuf_u64(struct pp_rbuf *r);
/* Pointer to the next n bytes (not copied), NULL if fewer remain. */
const void *pp_rbuf_bytes(struct pp_rbuf *r, size_t n);
/* A string field: *s points into the buffer (NOT NUL-terminated), *n is its
 * length; *s == NULL for a wire NULL. Fails (returns -EINVAL) if longer than
 * max or if it holds a NUL byte. */
int pp_rbuf_str(struct pp_rbuf *r, size_t max, const char **s, size_t *n);
/* Same, as a malloc'd NUL-terminated copy (NULL for a wire NULL, unless
 * required, which makes a wire NULL an error). */
int pp_rbuf_strdup(struct pp_rbuf *r, size_t max, bool required, char **out);
size_t pp_rbuf_left(const struct pp_rbuf *r);

/* ---- framing ---- */

/* Monotonic clock in ns (CLOCK_MONOTONIC). */
uint64_t pp_ipc_now_ns(void);

/* Incremental receiver for a non-blocking socket. */
struct pp_ipc_rx {
  uint8_t hdr[PP_IPC_HDR_SIZE];
  size_t hdr_got;
  uint32_t type, len;
  uint8_t *body;
  size_t body_got, body_cap;
};

/* Called for every complete message. The payload belongs to the receiver
 * and is only valid during the call. A non-zero return stops reading and is
 * passed up by pp_ipc_rx_read(). */
typedef int (*pp_ipc_msg_fn)(void *ctx, uint32_t type, const uint8_t *payload, uint32_t len);

/* Inside the callback only: take ownership of the current payload buffer
 * (malloc'd, the caller frees it; NULL for an empty payload). Saves a copy
 * of a big PROFILE. */
uint8_t *pp_ipc_rx_steal(struct pp_ipc_rx *rx);

void pp_ipc_rx_init(struct pp_ipc_rx *rx);
void pp_ipc_rx_free(struct pp_ipc_rx *rx);
/* Read whatever is available without blocking (the fd must be O_NONBLOCK)
 * and dispatch complete messages. Returns 0 when the socket would block,
 * -EPIPE on end of file, -EPROTO on an oversized message, -ENOMEM, another
 * -errno of recv(), or the first non-zero return of `fn`. `max_msgs` bounds
 * the work done in one call (0 = no bound). */
int pp_ipc_rx_read(struct pp_ipc_rx *rx, int fd, pp_ipc_msg_fn fn, void *ctx, unsigned max_msgs);

/* Send one message on a non-blocking socket, handling partial writes and
 * EINTR. Waits for buffer space until deadline_ns (pp_ipc_now_ns() clock;
 * 0 = no deadline). While waiting, if rx is given, incoming data is read and
 * dispatched so two peers writing to each other cannot deadlock. Returns 0,
 * -ETIMEDOUT, -EPIPE (peer gone), -EMSGSIZE (len > PP_IPC_MAX_MSG), or the
 * error of the rx path. */
int pp_ipc_send(int fd, uint32_t type, const void *payload, size_t len, uint64_t deadline_ns,
                struct pp_ipc_rx *rx, pp_ipc_msg_fn fn, void *ctx);

/* Wait until fd is readable or deadline_ns (0 = forever). 1 readable (or
 * hung up), 0 timeout, -errno. */
int pp_ipc_wait_readable(int fd, uint64_t deadline_ns);

#endif
