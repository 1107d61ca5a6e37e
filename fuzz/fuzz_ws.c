/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: what Node's inspector server sends on the WebSocket
 * (plugins/nodejs/ws.c), as the profiled process controls it: the 101
 * handshake reply (checked against a fixed key), then the frames. The
 * input is parsed three ways: the handshake check on the head, the frame
 * parser stepping through the bytes after it with a small and a large
 * payload cap, and nodejs_ws_recv reading them from a socket with a
 * receive buffer that starts small and must grow within max_msg.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_input.h"
#include "polyprof/kit/log.h"
#include "ws.h"

/* the key the seeds' handshake replies answer */
#define FUZZ_WS_KEY "dGhlIHNhbXBsZSBub25jZQ=="

static uint64_t sink;

static void step_frames(const uint8_t *p, size_t len, uint64_t max_payload) {
  while (len) {
    struct nodejs_ws_frame f;
    int64_t n = nodejs_ws_parse_frame(p, len, max_payload, &f);
    if (n <= 0) return;
    if ((uint64_t)n > len || f.len > max_payload || f.payload < p || f.payload + f.len > p + n)
      abort();
    for (uint64_t i = 0; i < f.len; i++)
      sink += f.payload[i];
    p += n;
    len -= (size_t)n;
  }
}

static void recv_all(const uint8_t *p, size_t len, uint64_t max_msg) {
  struct nodejs_ws ws = {.fd = pp_fuzz_peer_socket(p, len, NULL), .cap = 16, .max_msg = max_msg};
  ws.buf = malloc(ws.cap);
  if (!ws.buf) abort();
  uint64_t deadline = pp_clock_ns() + 2000000000ull;
  for (int i = 0; i < 1000; i++) {
    const char *msg;
    size_t n;
    if (nodejs_ws_recv(&ws, &msg, &n, deadline) < 0) break;
    if (n > max_msg || msg[n] != '\0') abort();
    sink += strlen(msg);
  }
  nodejs_ws_close(&ws, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* the head ends at the first blank line, as read_head finds it */
  const uint8_t *end = memmem(data, size, "\r\n\r\n", 4);
  size_t head = end ? (size_t)(end + 4 - data) : 0;
  if (head) {
    char *h = malloc(head + 1);
    if (!h) abort();
    memcpy(h, data, head);
    h[head] = '\0';
    (void)nodejs_ws_check_handshake(h, head, FUZZ_WS_KEY);
    free(h);
  }
  step_frames(data + head, size - head, 64);
  step_frames(data + head, size - head, 1 << 20);
  recv_all(data + head, size - head, 256);
  recv_all(data + head, size - head, 1 << 20);
  return 0;
}
