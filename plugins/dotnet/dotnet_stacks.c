/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sampled stacks in the kit's stack table, named at snapshot.
 *
 * A sample carries code addresses, and the name of an address may arrive
 * after the sample that needs it: a rundown names the code that existed
 * before the session only when a session stops, and the runtime flushes
 * its per-thread buffers in any order, so a method's load event can follow
 * a sample of it in the stream. So each frame is stored as its address (the
 * frame's name is the address in hex: one interned string per distinct
 * address) and named from the method map when the table is emitted, by a
 * host whose emit() names the frames and hands the stack to the real sink.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dotnet.h"

#define MAX_FRAMES 512

struct pp_stack_table *dotnet_stacks_new(uint32_t max_stacks, uint32_t max_depth) {
  /* the limits of the former table: max_stacks stacks of 64 frames on
   * average; an address is at most 16 hex digits */
  struct pp_stack_table_limits lim = {.max_stacks = max_stacks,
                                      .max_frame_refs = (size_t)max_stacks * 64,
                                      .max_string_bytes = (size_t)max_stacks * 64 * 17,
                                      .max_depth = max_depth ? max_depth : MAX_FRAMES};
  if (lim.max_depth > MAX_FRAMES) lim.max_depth = MAX_FRAMES;
  return pp_stack_table_new(&lim);
}

static void hex(char out[17], uint64_t v) {
  static const char digits[] = "0123456789abcdef";
  char tmp[16];
  int n = 0;
  do {
    tmp[n++] = digits[v & 15];
    v >>= 4;
  } while (v);
  for (int i = 0; i < n; i++)
    out[i] = tmp[n - 1 - i];
  out[n] = '\0';
}

static uint64_t unhex(const char *s) {
  uint64_t v = 0;
  for (; *s; s++)
    v = (v << 4) | (uint64_t)(*s <= '9' ? *s - '0' : *s - 'a' + 10);
  return v;
}

int dotnet_stacks_add(struct pp_stack_table *t, uint32_t pid, uint32_t tid, const uint64_t *ips,
                      uint32_t n, uint64_t count) {
  if (n > MAX_FRAMES) n = MAX_FRAMES;
  char names[MAX_FRAMES][17];
  struct pp_frame frames[MAX_FRAMES];
  for (uint32_t i = 0; i < n; i++) {
    hex(names[i], ips[i]);
    frames[i] = (struct pp_frame){.name = names[i], .kind = PP_FRAME_DOTNET};
  }
  return pp_stack_table_add(t, pid, tid, NULL, frames, n, count);
}

/* The host the table emits to: names the frames, forwards to the real one. */
struct namer {
  struct pp_host host; /* the real one's, with the sink calls ours */
  const struct pp_host *real;
  struct pp_sink *sink;
  struct dotnet_methods *methods;
  uint64_t unknown;
  struct pp_frame frames[MAX_FRAMES];
};

static int namer_emit(struct pp_sink *self, const struct pp_sample *s) {
  struct namer *nm = (struct namer *)self;
  uint32_t k = 0;
  for (uint32_t i = 0; i < s->nframes && i < MAX_FRAMES; i++) {
    const char *name = dotnet_methods_lookup(nm->methods, unhex(s->frames[i].name));
    if (!name) {
      nm->unknown++;
      /* runs of unnamed frames (stubs, native transitions) fold into one */
      if (k > 0 && strcmp(nm->frames[k - 1].name, "[unknown]") == 0) continue;
      name = "[unknown]";
    }
    nm->frames[k++] = (struct pp_frame){.name = name, .kind = PP_FRAME_DOTNET};
  }
  if (k == 0)
    nm->frames[k++] = (struct pp_frame){.name = "[no managed frames]", .kind = PP_FRAME_DOTNET};
  /* comm stays NULL: the process's comm, as for every runtime stack
   * (docs/formats.md); the thread is in tid */
  struct pp_sample out = *s;
  out.frames = nm->frames;
  out.nframes = k;
  return nm->real->emit(nm->sink, &out);
}

static int namer_counter(struct pp_sink *self, const char *name, uint64_t delta) {
  struct namer *nm = (struct namer *)self;
  return nm->real->add_counter(nm->sink, name, delta);
}

/* The table uses emit and add_counter; the other sink calls are forwarded
 * too, so that the namer stays a complete host whatever the table calls. */
static int namer_appid(struct pp_sink *self, uint32_t pid, const char *appid) {
  struct namer *nm = (struct namer *)self;
  return nm->real->set_appid(nm->sink, pid, appid);
}

static int namer_metadata(struct pp_sink *self, uint32_t pid, const char *json) {
  struct namer *nm = (struct namer *)self;
  return nm->real->set_app_metadata(nm->sink, pid, json);
}

static int namer_status(struct pp_sink *self, uint32_t pid, int status, const char *reason) {
  struct namer *nm = (struct namer *)self;
  return nm->real->set_pid_status(nm->sink, pid, status, reason);
}

size_t dotnet_stacks_emit(struct pp_stack_table *t, struct dotnet_methods *m,
                          const struct pp_host *host, struct pp_sink *sink,
                          uint64_t *unknown_frames) {
  if (pp_stack_table_count(t) == 0 && pp_stack_table_dropped(t) == 0) return 0;
  static struct namer nm; /* single-threaded, like the vtable calls */
  memset(&nm.host, 0, sizeof(nm.host));
  size_t hs = host->struct_size < sizeof(nm.host) ? host->struct_size : sizeof(nm.host);
  memcpy(&nm.host, host, hs);
  nm.host.emit = namer_emit;
  nm.host.add_counter = namer_counter;
  nm.host.set_appid = nm.host.set_appid ? namer_appid : NULL;
  nm.host.set_app_metadata = nm.host.set_app_metadata ? namer_metadata : NULL;
  nm.host.set_pid_status = nm.host.set_pid_status ? namer_status : NULL;
  nm.real = host;
  nm.sink = sink;
  nm.methods = m;
  nm.unknown = 0;
  size_t n = pp_stack_table_emit(t, &nm.host, (struct pp_sink *)&nm);
  if (unknown_frames) *unknown_frames += nm.unknown;
  return n;
}
