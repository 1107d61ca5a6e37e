/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: replies on a .NET runtime's diagnostic IPC socket
 * (plugins/dotnet/dotnet_ipc.c), which the profiled process writes. The
 * input is what the runtime sends: it goes through a socket pair to
 * dotnet_ipc_read_reply (header, size, error HRESULT, payload copy into a
 * small and a full buffer), then the payload is decoded as the
 * ProcessInfo2 reply the plugin identifies a target with.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dotnet.h"
#include "fuzz_input.h"

static void check_info(const uint8_t *p, size_t len) {
  struct dotnet_proc_info info;
  if (dotnet_ipc_parse_info2(p, len, &info) == 0) {
    /* every string must be terminated inside its field */
    if (memchr(info.command_line, 0, sizeof(info.command_line)) == NULL ||
        memchr(info.arch, 0, sizeof(info.arch)) == NULL ||
        memchr(info.entrypoint, 0, sizeof(info.entrypoint)) == NULL ||
        memchr(info.version, 0, sizeof(info.version)) == NULL)
      abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (256u << 10)) return 0;
  static uint8_t payload[DOTNET_IPC_MAX_PAYLOAD];
  size_t len = 0;
  uint32_t hr = 0;
  int fd = pp_fuzz_peer_socket(data, size, NULL);
  int rc = dotnet_ipc_read_reply(fd, 100, payload, sizeof(payload), &len, &hr);
  close(fd);
  if (rc == 0) {
    if (len > sizeof(payload)) abort();
    check_info(payload, len);
  }
  /* the session-start reply: an 8-byte buffer for the session id */
  uint8_t small[8];
  fd = pp_fuzz_peer_socket(data, size, NULL);
  rc = dotnet_ipc_read_reply(fd, 100, small, sizeof(small), &len, &hr);
  close(fd);
  if (rc == 0 && len > sizeof(small)) abort();
  /* the payload alone, as ProcessInfo2 */
  check_info(data, size);
  return 0;
}
