/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the HTTP reply of Node's inspector to GET /json/list
 * (nodejs_http_get in plugins/nodejs/ws.c): status line, headers,
 * Content-Length against the body cap, a body cut short or longer than
 * announced; then the body of a 200 reply as the inspector's target list
 * (plugins/nodejs/inspector_list.c) with the plugin's path buffer and a
 * tiny one: a path handed back must fit, be terminated and be one token of
 * the WebSocket request line. The reply comes from the profiled process:
 * fuzz_server.c serves the input on a loopback port, as the inspector
 * would, and the plugin's own client fetches it.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_input.h"
#include "fuzz_server.h"
#include "inspector_list.h"
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
  if (status == 200) {
    /* the plugin's buffer, and one that only short paths fit */
    static const size_t plens[] = {160, 8};
    for (size_t i = 0; i < sizeof(plens) / sizeof(plens[0]); i++) {
      char path[160];
      memset(path, 'x', sizeof(path));
      if (nodejs_inspector_ws_path(body, path, plens[i]) != 0) continue;
      size_t n = strnlen(path, plens[i]);
      if (n == plens[i]) abort();
      for (size_t k = 0; k < n; k++)
        if ((unsigned char)path[k] <= 0x20 || (unsigned char)path[k] >= 0x7f) abort();
    }
  }
  free(body);
  pp_fuzz_server_end();
  return 0;
}
