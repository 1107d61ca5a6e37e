/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the nettrace stream a .NET runtime writes on an EventPipe
 * session (plugins/dotnet/nettrace.c), and the method events decoded
 * from it (methods.c). The runtime is the profiled process: every byte is
 * hostile. Method-load and ReadyToRun entry-point events are decoded too.
 * The stream is parsed twice: fed whole with generous limits, then
 * in chunks of a size the input picks with tight limits (a block larger
 * than the buffer, a full metadata table, a full stack cache).
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "methods.h"
#include "nettrace.h"

struct ctx {
  struct dotnet_nt *p;
  struct dotnet_methods *m;
  uint64_t sink;
};

static void on_event(void *arg, const struct dotnet_nt_event *ev) {
  struct ctx *c = arg;
  /* touch every byte handed out: a payload or stack past the buffer shows
   * under ASan */
  for (uint32_t i = 0; i < ev->payload_len; i++)
    c->sink += ev->payload[i];
  const uint8_t *ips;
  uint32_t n;
  if (ev->stack_id && dotnet_nt_stack(c->p, ev->stack_id, &ips, &n)) {
    for (uint32_t i = 0; i < n; i++)
      c->sink += ips[i];
    uint32_t ps = dotnet_nt_pointer_size(c->p);
    for (uint32_t i = 0; ps == 8 && i + 8 <= n && i < 64 * 8; i += 8) {
      uint64_t ip;
      memcpy(&ip, ips + i, 8);
      const char *name = dotnet_methods_lookup(c->m, ip);
      if (name) c->sink += strlen(name);
    }
  }
  /* every payload goes to the method decoders, not only MethodLoad and
   * R2RGetEntryPoint events: they must refuse what is not one */
  if (ev->payload_len) {
    (void)dotnet_methods_add_event(c->m, ev->payload, ev->payload_len);
    (void)dotnet_methods_add_r2r_event(c->m, ev->payload, ev->payload_len);
  }
}

static void run(const uint8_t *data, size_t size, const struct dotnet_nt_limits *lim, size_t chunk,
                int use_space) {
  struct ctx c = {0};
  c.m = dotnet_methods_new(64, 4096);
  c.p = dotnet_nt_new(lim, on_event, &c);
  if (!c.p || !c.m) abort();
  for (size_t i = 0; i < size;) {
    size_t n = size - i < chunk ? size - i : chunk;
    if (use_space) {
      size_t room = 0;
      uint8_t *dst = dotnet_nt_space(c.p, &room);
      if (!dst || room == 0) break; /* error state, or an object over max_block */
      if (n > room) n = room;
      memcpy(dst, data + i, n);
      dotnet_nt_commit(c.p, n);
    } else {
      dotnet_nt_feed(c.p, data + i, n);
    }
    i += n;
    if (dotnet_nt_state(c.p) >= DOTNET_NT_END) break;
  }
  if (dotnet_nt_state(c.p) == DOTNET_NT_ERROR && !dotnet_nt_error(c.p)) abort();
  (void)dotnet_nt_stats(c.p);
  (void)dotnet_nt_qpc_frequency(c.p);
  (void)dotnet_nt_sync_qpc(c.p);
  (void)dotnet_nt_expected_sample_ns(c.p);
  /* a reset parser must take the same stream again */
  dotnet_nt_reset(c.p);
  dotnet_nt_feed(c.p, data, size < 4096 ? size : 4096);
  dotnet_nt_free(c.p);
  (void)dotnet_methods_count(c.m);
  dotnet_methods_free(c.m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const struct dotnet_nt_limits wide = {
      .max_block = 1 << 20, .max_metadata = 4096, .max_stack_bytes = 1 << 20, .max_stacks = 65536};
  static const struct dotnet_nt_limits tight = {
      .max_block = 4096, .max_metadata = 8, .max_stack_bytes = 256, .max_stacks = 4};
  run(data, size, &wide, size ? size : 1, 0);
  /* the chunk size comes from the input's length, so a real trace stays a
   * valid seed as it is */
  run(data, size, &tight, 1 + size % 97, 1);
  /* the UTF-16 names of metadata and methods */
  char out[64];
  (void)dotnet_utf16z_to_utf8(data, size, out, sizeof(out));
  (void)dotnet_utf16z_to_utf8(data, size, out, 1);
  return 0;
}
