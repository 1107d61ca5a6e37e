/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Minimal loopback HTTP + RFC 6455 WebSocket client for Node's inspector.
 *
 * Only what Node's inspector server accepts and sends: one masked FIN text
 * frame per client message, unmasked FIN frames from the server. Every
 * operation takes an absolute CLOCK_MONOTONIC deadline; everything received
 * is treated as hostile (bounded headers, bounded frames).
 */
#ifndef POLYPROF_NODEJS_WS_H
#define POLYPROF_NODEJS_WS_H

#include <stddef.h>
#include <stdint.h>

#define NODEJS_WS_OP_CONT 0x0
#define NODEJS_WS_OP_TEXT 0x1
#define NODEJS_WS_OP_BINARY 0x2
#define NODEJS_WS_OP_CLOSE 0x8
#define NODEJS_WS_OP_PING 0x9
#define NODEJS_WS_OP_PONG 0xA

struct nodejs_ws_frame {
  unsigned opcode;
  int fin;
  const uint8_t *payload; /* points into the parsed buffer */
  uint64_t len;
};

/* Parses one server frame from buf[0..len). Returns the number of bytes the
 * whole frame occupies (> 0), 0 if more bytes are needed, -EPROTO for a frame
 * a server must not send (masked, RSV bits, reserved opcode, fragmented
 * control frame, 64-bit length with the top bit set) and -EMSGSIZE if the
 * payload exceeds max_payload. */
int64_t nodejs_ws_parse_frame(const uint8_t *buf, size_t len, uint64_t max_payload,
                              struct nodejs_ws_frame *out);

/* Encodes a masked FIN client frame into out (needs len + 14 bytes).
 * Returns the frame size, or -ENOSPC. */
int64_t nodejs_ws_encode_frame(unsigned opcode, const uint8_t *payload, size_t len,
                               const uint8_t key[4], uint8_t *out, size_t cap);

/* base64(SHA1(key + GUID)) as the server must answer in Sec-WebSocket-Accept
 * (out: at least 29 bytes). */
void nodejs_ws_accept_for(const char *key, char out[32]);

/* Checks a complete handshake reply head (up to and including the blank
 * line): status 101 and the right Sec-WebSocket-Accept. 0 or -EPROTO. */
int nodejs_ws_check_handshake(const char *head, size_t len, const char *key);

struct nodejs_ws {
  int fd;
  uint8_t *buf; /* received bytes not consumed yet, then the current message */
  size_t len, cap;
  size_t consumed; /* bytes of buf the last returned message occupied */
  uint64_t max_msg;
};

/* Connects to 127.0.0.1:port inside the network namespace of pid (a short
 * lived thread does the setns so the calling thread keeps its namespace).
 * Returns a connected non-blocking socket or a negative errno. */
int nodejs_connect_loopback(uint32_t pid, uint16_t port, uint64_t deadline_ns);

/* GET path over a fresh connection; on success *body is malloc'd and
 * NUL-terminated (at most max_body bytes). Returns the HTTP status or a
 * negative errno. */
int nodejs_http_get(uint32_t pid, uint16_t port, const char *path, size_t max_body, char **body,
                    uint64_t deadline_ns);

/* Opens the WebSocket at ws://127.0.0.1:port/<path>. 0 or negative errno. */
int nodejs_ws_open(struct nodejs_ws *ws, uint32_t pid, uint16_t port, const char *path,
                   uint64_t max_msg, uint64_t deadline_ns);
int nodejs_ws_send_text(struct nodejs_ws *ws, const char *text, size_t len, uint64_t deadline_ns);
/* Next text message: *msg points into ws->buf and is valid until the next
 * call; it is NUL-terminated. Pings are ignored (Node drops a client that
 * answers with a pong); a close frame or EOF is -ECONNRESET. */
int nodejs_ws_recv(struct nodejs_ws *ws, const char **msg, size_t *len, uint64_t deadline_ns);
/* Sends a close frame (best effort, when send_close) and closes the socket
 * at once. Only for a connection Node is not closing itself. */
void nodejs_ws_close(struct nodejs_ws *ws, int send_close);
/* Ends the session the way Node expects, whoever started closing it: our
 * close frame (the answer to Node's, or the request), then reading until
 * Node closes the connection (or the deadline), then closing ours. Dropping
 * the connection while Node's inspector thread still writes its close frame
 * crashes Node 20 (SIGSEGV in WsHandler::OnCloseFrameWritten). */
void nodejs_ws_finish(struct nodejs_ws *ws, uint64_t deadline_ns);

#endif
