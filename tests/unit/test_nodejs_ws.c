/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the nodejs plugin's WebSocket framing and handshake check,
 * including hostile server input. The plugin sources are compiled in. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../plugins/nodejs/ws.c"
#include "testlib.h"

static void test_accept_key(void) {
  /* RFC 6455 section 1.3 example */
  char out[32];
  nodejs_ws_accept_for("dGhlIHNhbXBsZSBub25jZQ==", out);
  CHECK_EQ_STR(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
  const char ok[] =
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "sec-websocket-accept:   s3pPLMBiTxaQ9kYGzzhZRbK+xOo=  \r\n\r\n";
  CHECK_EQ_INT(nodejs_ws_check_handshake(ok, strlen(ok), "dGhlIHNhbXBsZSBub25jZQ=="), 0);
  const char wrong[] = "HTTP/1.1 101 Switching Protocols\r\nSec-WebSocket-Accept: AAAA\r\n\r\n";
  CHECK_EQ_INT(nodejs_ws_check_handshake(wrong, strlen(wrong), "dGhlIHNhbXBsZSBub25jZQ=="),
               -EPROTO);
  const char bad[] = "HTTP/1.0 400 Bad Request\r\n\r\nWebSockets request was expected\r\n";
  CHECK_EQ_INT(nodejs_ws_check_handshake(bad, strlen(bad), "x"), -EPROTO);
  const char huge_hdr[] =
      "HTTP/1.1 101 OK\r\nSec-WebSocket-Accept: "
      "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
      "\r\n\r\n";
  CHECK_EQ_INT(nodejs_ws_check_handshake(huge_hdr, strlen(huge_hdr), "x"), -EPROTO);
}

static void test_encode_masked(void) {
  const uint8_t key[4] = {1, 2, 3, 4};
  uint8_t out[300];
  const char *msg = "{\"id\":1}";
  int64_t n = nodejs_ws_encode_frame(NODEJS_WS_OP_TEXT, (const uint8_t *)msg, strlen(msg), key, out,
                                     sizeof(out));
  CHECK_EQ_INT(n, 2 + 4 + (int64_t)strlen(msg));
  CHECK_EQ_INT(out[0], 0x81);                    /* FIN | text */
  CHECK_EQ_INT(out[1], 0x80 | (int)strlen(msg)); /* masked, 7-bit length */
  for (size_t i = 0; i < strlen(msg); i++)
    CHECK_EQ_INT(out[6 + i] ^ key[i & 3], msg[i]);
  /* 16-bit length */
  uint8_t payload[200];
  memset(payload, 'a', sizeof(payload));
  n = nodejs_ws_encode_frame(NODEJS_WS_OP_TEXT, payload, sizeof(payload), key, out, sizeof(out));
  CHECK_EQ_INT(n, 4 + 4 + 200);
  CHECK_EQ_INT(out[1], 0x80 | 126);
  CHECK_EQ_INT(out[2] << 8 | out[3], 200);
  /* no room */
  CHECK_EQ_INT(nodejs_ws_encode_frame(NODEJS_WS_OP_TEXT, payload, 200, key, out, 100), -ENOSPC);
  /* 64-bit length */
  size_t big = 70000;
  uint8_t *bp = calloc(1, big), *bo = malloc(big + 14);
  n = nodejs_ws_encode_frame(NODEJS_WS_OP_TEXT, bp, big, key, bo, big + 14);
  CHECK_EQ_INT(n, 10 + 4 + (int64_t)big);
  CHECK_EQ_INT(bo[1], 0x80 | 127);
  uint64_t l = 0;
  for (int i = 0; i < 8; i++)
    l = l << 8 | bo[2 + i];
  CHECK_EQ_INT(l, big);
  free(bp);
  free(bo);
}

static void test_parse(void) {
  struct nodejs_ws_frame f;
  uint8_t b[16] = {0x81, 0x03, 'a', 'b', 'c'};
  CHECK_EQ_INT(nodejs_ws_parse_frame(b, 5, 100, &f), 5);
  CHECK_EQ_INT(f.opcode, 1);
  CHECK_EQ_INT(f.len, 3);
  CHECK(memcmp(f.payload, "abc", 3) == 0);
  /* incomplete at every prefix length */
  for (size_t i = 0; i < 5; i++)
    CHECK_EQ_INT(nodejs_ws_parse_frame(b, i, 100, &f), 0);
  /* 16-bit length, incomplete header and payload */
  uint8_t m[4] = {0x81, 126, 0x01, 0x00}; /* 256 bytes announced */
  CHECK_EQ_INT(nodejs_ws_parse_frame(m, 3, 1000, &f), 0);
  CHECK_EQ_INT(nodejs_ws_parse_frame(m, 4, 1000, &f), 0);
  CHECK_EQ_INT(nodejs_ws_parse_frame(m, 4, 100, &f), -EMSGSIZE);
  /* 64-bit length with the top bit set: refused, never allocated */
  uint8_t h[10] = {0x81, 127, 0x80, 0, 0, 0, 0, 0, 0, 1};
  CHECK_EQ_INT(nodejs_ws_parse_frame(h, 10, UINT64_MAX, &f), -EPROTO);
  /* 64-bit length beyond the cap */
  uint8_t g[10] = {0x81, 127, 0, 0, 0, 1, 0, 0, 0, 0};
  CHECK_EQ_INT(nodejs_ws_parse_frame(g, 10, 1 << 20, &f), -EMSGSIZE);
  /* a masked server frame, RSV bits, reserved opcodes */
  uint8_t masked[8] = {0x81, 0x81, 1, 2, 3, 4, 'x'};
  CHECK_EQ_INT(nodejs_ws_parse_frame(masked, 7, 100, &f), -EPROTO);
  uint8_t rsv[3] = {0xC1, 0x01, 'x'};
  CHECK_EQ_INT(nodejs_ws_parse_frame(rsv, 3, 100, &f), -EPROTO);
  uint8_t op3[3] = {0x83, 0x01, 'x'};
  CHECK_EQ_INT(nodejs_ws_parse_frame(op3, 3, 100, &f), -EPROTO);
  uint8_t opf[3] = {0x8F, 0x01, 'x'};
  CHECK_EQ_INT(nodejs_ws_parse_frame(opf, 3, 100, &f), -EPROTO);
  /* control frames: fragmented or longer than 125 bytes */
  uint8_t cf[3] = {0x09, 0x01, 'x'};
  CHECK_EQ_INT(nodejs_ws_parse_frame(cf, 3, 100, &f), -EPROTO);
  uint8_t cl[4] = {0x88, 126, 0, 200};
  CHECK_EQ_INT(nodejs_ws_parse_frame(cl, 4, 1000, &f), -EPROTO);
  /* close frame as Node sends it */
  uint8_t close_frame[2] = {0x88, 0x00};
  CHECK_EQ_INT(nodejs_ws_parse_frame(close_frame, 2, 100, &f), 2);
  CHECK_EQ_INT(f.opcode, NODEJS_WS_OP_CLOSE);
}

/* Feeds server bytes through a socketpair into nodejs_ws_recv. */
static int recv_from(const uint8_t *bytes, size_t len, uint64_t max_msg, char *out, size_t cap,
                     int close_after) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0) return -errno;
  struct nodejs_ws ws = {.fd = sv[0], .max_msg = max_msg, .cap = 16};
  ws.buf = malloc(ws.cap);
  size_t sent = 0;
  while (sent < len) {
    ssize_t n = write(sv[1], bytes + sent, len - sent);
    if (n <= 0) break;
    sent += (size_t)n;
  }
  if (close_after) close(sv[1]);
  const char *msg;
  size_t mlen;
  int rc = nodejs_ws_recv(&ws, &msg, &mlen, pp_clock_ns() + 500000000ull);
  if (rc == 0) snprintf(out, cap, "%.*s", (int)mlen, msg);
  if (rc == 0 && strlen(msg) != mlen) rc = -EINVAL; /* NUL-terminated at the end */
  nodejs_ws_close(&ws, 0);
  if (!close_after) close(sv[1]);
  return rc;
}

static void test_recv(void) {
  char out[256];
  /* a ping first (ignored, never answered), then the text */
  uint8_t a[] = {0x89, 0x01, 'p', 0x81, 0x05, 'h', 'e', 'l', 'l', 'o', 0x81, 0x01, 'z'};
  CHECK_EQ_INT(recv_from(a, sizeof(a), 100, out, sizeof(out), 0), 0);
  CHECK_EQ_STR(out, "hello");
  /* close frame: the session is over */
  uint8_t c[] = {0x88, 0x00};
  CHECK_EQ_INT(recv_from(c, sizeof(c), 100, out, sizeof(out), 0), -ECONNRESET);
  /* EOF in the middle of a frame */
  uint8_t t[] = {0x81, 0x05, 'h', 'e'};
  CHECK_EQ_INT(recv_from(t, sizeof(t), 100, out, sizeof(out), 1), -ECONNRESET);
  /* nothing arrives: the deadline holds */
  CHECK_EQ_INT(recv_from(t, 0, 100, out, sizeof(out), 0), -ETIMEDOUT);
  /* binary and fragmented frames are not what Node sends */
  uint8_t bin[] = {0x82, 0x01, 'x'};
  CHECK_EQ_INT(recv_from(bin, sizeof(bin), 100, out, sizeof(out), 0), -EPROTO);
  uint8_t frag[] = {0x01, 0x01, 'x'};
  CHECK_EQ_INT(recv_from(frag, sizeof(frag), 100, out, sizeof(out), 0), -EPROTO);
  /* a frame larger than the cap is refused before it is buffered */
  uint8_t big[] = {0x81, 126, 0x10, 0x00};
  CHECK_EQ_INT(recv_from(big, sizeof(big), 1000, out, sizeof(out), 0), -EMSGSIZE);
  /* a large frame grows the buffer from 16 bytes */
  size_t n = 3000;
  uint8_t *l = malloc(n + 4);
  l[0] = 0x81, l[1] = 126, l[2] = (uint8_t)(n >> 8), l[3] = (uint8_t)n;
  memset(l + 4, 'q', n);
  char *lo = malloc(n + 1);
  CHECK_EQ_INT(recv_from(l, n + 4, 1 << 20, lo, n + 1, 0), 0);
  CHECK_EQ_INT(strlen(lo), n);
  free(l);
  free(lo);
}

int main(void) {
  test_accept_key();
  test_encode_masked();
  test_parse();
  test_recv();
  return pp_test_finish("test_nodejs_ws");
}
