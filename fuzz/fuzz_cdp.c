/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: CDP messages from Node's inspector (plugins/nodejs/cdp.c)
 * as the plugin reads them: each line of the input is one message the
 * profiled process sends, framed as a WebSocket text frame on a socket.
 * The plugin evaluates an expression (reply matching by id, error and
 * exception replies, events in between), then waits for the replies of two
 * more requests, as attaching does. The same bytes are then read as the
 * helper's channel (chan.c), one JSON object per line.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cdp.h"
#include "chan.h"
#include "fuzz_input.h"
#include "polyprof/kit/log.h"

/* Frames each line as an unmasked FIN text frame (what a server sends). */
static uint8_t *frame_lines(const uint8_t *data, size_t size, size_t *out_len) {
  uint8_t *out = malloc(size + 10 * (size + 1) + 1);
  if (!out) abort();
  size_t o = 0;
  for (size_t i = 0; i <= size;) {
    const uint8_t *nl = memchr(data + i, '\n', size - i);
    size_t n = nl ? (size_t)(nl - (data + i)) : size - i;
    out[o++] = 0x81;
    if (n <= 125) {
      out[o++] = (uint8_t)n;
    } else if (n <= 0xffff) {
      out[o++] = 126;
      out[o++] = (uint8_t)(n >> 8);
      out[o++] = (uint8_t)n;
    } else {
      out[o++] = 127;
      for (int k = 0; k < 8; k++)
        out[o++] = (uint8_t)((uint64_t)n >> (56 - 8 * k));
    }
    memcpy(out + o, data + i, n);
    o += n;
    i += n + 1;
    if (!nl) break;
  }
  *out_len = o;
  return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (512u << 10)) return 0;
  size_t flen;
  uint8_t *framed = frame_lines(data, size, &flen);
  struct nodejs_cdp c = {.next_id = 1};
  int peer;
  c.ws.fd = pp_fuzz_peer_socket(framed, flen, &peer);
  c.ws.cap = 64 * 1024;
  c.ws.buf = malloc(c.ws.cap);
  c.ws.max_msg = 1 << 20;
  if (!c.ws.buf) abort();
  free(framed);
  uint64_t deadline = pp_clock_ns() + 2000000000ull;
  char err[200];
  json_t *v = NULL;
  (void)nodejs_cdp_evaluate(&c, "0", &v, err, sizeof(err), deadline);
  if (strlen(err) >= sizeof(err)) abort();
  json_decref(v);
  for (int id = 2; id <= 3; id++) {
    json_t *r = NULL;
    (void)nodejs_cdp_wait(&c, id, &r, err, sizeof(err), deadline);
    json_decref(r);
  }
  nodejs_ws_close(&c.ws, 0);
  close(peer);
  /* the raw bytes as the helper's channel */
  int cv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, cv) < 0) abort();
  struct nodejs_chan ch;
  nodejs_chan_init(&ch, 4096);
  ch.fd = cv[0];
  size_t room = size < 65536 ? size : 65536; /* within the socket's buffer */
  if (room && write(cv[1], data, room) < 0) abort();
  close(cv[1]);
  for (int i = 0; i < 64; i++) {
    json_t *m = NULL;
    int rc = nodejs_chan_recv(&ch, &m, 0);
    if (rc == 0 && !json_is_object(m)) abort();
    json_decref(m);
    if (rc < 0 && rc != -EPROTO) break;
  }
  nodejs_chan_close(&ch);
  return 0;
}
