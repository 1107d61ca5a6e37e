/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the agent <-> worker IPC framing (core/ipc.c) on the
 * agent's side, where the bytes come from a plugin worker (a plugin may
 * be buggy, its process taken over): pp_ipc_rx_read takes messages off a
 * socket (headers, lengths up to the cap, a body cut short), and each
 * payload is read with the pp_rbuf accessors as the worker's LOG and
 * REPLY messages are (u32, bounded strings, copies). The socket is read
 * in one go and again a few messages at a time.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_input.h"
#include "ipc.h"

static uint64_t sink;

static int on_msg(void *ctx, uint32_t type, const uint8_t *p, uint32_t len) {
  struct pp_rbuf r;
  pp_rbuf_init(&r, p, len);
  sink += type + pp_rbuf_u32(&r);
  const char *s;
  size_t n;
  if (pp_rbuf_str(&r, 65536, &s, &n) == 0 && s) {
    if (n > 65536 || memchr(s, 0, n)) abort(); /* bounded, no NUL inside */
    if (n) sink += (unsigned char)s[0] + (unsigned char)s[n - 1];
  }
  char *copy = NULL;
  if (pp_rbuf_strdup(&r, 64, type & 1, &copy) == 0 && copy) {
    if (strlen(copy) > 64) abort();
    free(copy);
  }
  (void)pp_rbuf_u64(&r);
  const uint8_t *rest = pp_rbuf_bytes(&r, pp_rbuf_left(&r));
  if (rest && pp_rbuf_left(&r) != 0) abort();
  /* the PROFILE reply: the caller takes the buffer */
  if (type == PP_MSG_PROFILE) free(pp_ipc_rx_steal((struct pp_ipc_rx *)ctx));
  return type == PP_MSG_EXIT ? 1 : 0;
}

static void read_all(const uint8_t *data, size_t size, unsigned per_call) {
  struct pp_ipc_rx rx;
  pp_ipc_rx_init(&rx);
  int fd = pp_fuzz_peer_socket(data, size, NULL);
  for (int i = 0; i < 100000; i++) {
    int rc = pp_ipc_rx_read(&rx, fd, on_msg, &rx, per_call);
    if (rc != 0 || (per_call == 0)) break;
  }
  pp_ipc_rx_free(&rx);
  close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  read_all(data, size, 0);
  read_all(data, size, 1);
  (void)pp_ipc_type_name(size ? data[0] : 0);
  return 0;
}
