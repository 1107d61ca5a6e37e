/*
 * .NET diagnostic IPC client: finding a process's diagnostic socket (also
 * inside containers, via /proc/PID/root), framing commands and reading
 * replies with deadlines. Replies come from the target and are untrusted.
 */
#ifndef DOTNET_IPC_H
#define DOTNET_IPC_H

#include <stddef.h>
#include <stdint.h>

#include "polyprof/plugin.h"

#define DOTNET_IPC_SET_EVENTPIPE 0x02
#define DOTNET_IPC_SET_PROCESS 0x04
#define DOTNET_IPC_EP_STOP 0x01
#define DOTNET_IPC_EP_COLLECT2 0x03
#define DOTNET_IPC_PROC_INFO2 0x04
#define DOTNET_IPC_PROC_ENABLE_PERFMAP 0x05
#define DOTNET_IPC_PROC_DISABLE_PERFMAP 0x06
#define DOTNET_PERFMAP_TYPE_PERFMAP 3

#define DOTNET_IPC_MAX_PAYLOAD 65535 /* the u16 size field bounds every reply */

/* Finds the diagnostic socket of host pid `pid`; -ENOENT if there is none. */
int dotnet_ipc_find_socket(const struct pp_host *host, uint32_t pid, char *out, size_t outlen);

/* Connects (with a deadline) and sends one command; returns the fd. */
int dotnet_ipc_send_command(const char *sock, uint8_t set, uint8_t id, const void *payload,
                            size_t len, int timeout_ms);
/* Reads one reply header + payload. Returns 0 if the reply is OK (payload
 * copied, *len set), -EPROTO with *hresult for an error reply, or -errno. */
int dotnet_ipc_read_reply(int fd, int timeout_ms, uint8_t *payload, size_t cap, size_t *len,
                          uint32_t *hresult);
/* One command, one reply, connection closed. */
int dotnet_ipc_call(const char *sock, uint8_t set, uint8_t id, const void *payload, size_t len,
                    uint8_t *reply, size_t cap, size_t *reply_len, uint32_t *hresult,
                    int timeout_ms);

/* Builds a CollectTracing2 payload; returns its length or -ENOSPC. */
struct dotnet_provider_cfg {
  uint64_t keywords;
  uint32_t level;
  const char *name;
  const char *args; /* "k=v;..." or NULL */
};
long dotnet_ipc_collect2_payload(uint8_t *buf, size_t cap, uint32_t buffer_mb, int rundown,
                                 const struct dotnet_provider_cfg *p, size_t n);

/* ProcessInfo2 reply: fields we use, converted to UTF-8. */
struct dotnet_proc_info {
  uint64_t pid;
  char command_line[1024];
  char arch[32];
  char entrypoint[256];
  char version[64];
};
int dotnet_ipc_parse_info2(const uint8_t *p, size_t len, struct dotnet_proc_info *out);

#endif
