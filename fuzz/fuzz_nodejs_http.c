/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the HTTP reply of Node's inspector to GET /json/list
 * (nodejs_http_get in plugins/nodejs/ws.c): status line, headers,
 * Content-Length against the body cap, a body cut short or longer than
 * announced. The reply comes from the profiled process: fuzz_server.c
 * serves the input on a loopback port, as the inspector would, and the
 * plugin's own client fetches it.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_input.h"
#include "fuzz_server.h"
#include "polyprof/kit/log.h"
#include "ws.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint16_t port = pp_fuzz_server_tcp();
  pp_fuzz_server_reply(data, size);
  char *body = NULL;
  /* the size cap the plugin uses for /json/list, and a small one */
  size_t cap = size % 2 ? 64 * 1024 : 512;
  int status = nodejs_http_get((uint32_t)getpid(), port, "/json/list", cap, &body,
                               pp_clock_ns() + 5000000000ull);
  if (status >= 0 && (status < 100 || status > 599 || !body || strlen(body) > cap)) abort();
  if (status < 0 && body) abort();
  free(body);
  pp_fuzz_server_end();
  return 0;
}
