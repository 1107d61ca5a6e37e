/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: a plugin descriptor as the registry's probe child sends it
 * (core/registry.c): the probe dlopen()s a plugin, and a plugin is code
 * that may be buggy or hostile, so the parent decodes the bytes as
 * untrusted and validates every field (names, option types, ranges,
 * defaults, choices). A descriptor the agent accepts is encoded again
 * with the probe's own encoder and must decode to the same descriptor.
 * The decoder is internal to registry.c, which is compiled in here.
 */
#include "../core/registry.c"

#include "fuzz_input.h"

static int same_str(const char *a, const char *b) {
  return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static void round_trip(const struct pp_plugin *d, int vt) {
  struct pp_wbuf b;
  pp_wbuf_init(&b);
  b.limit = PROBE_MAX_REPLY;
  struct pp_plugin in = *d;
  in.abi_major = PP_ABI_MAJOR;
  serialise_desc(&b, &in);
  /* the encoder sends the vtable as bits of present functions: none here */
  struct pp_plugin again;
  char why[1024] = "";
  int vt2 = b.err ? -1 : decode_desc(b.data, b.len, &again, why, sizeof(why));
  if (vt2 < 0 || !same_str(again.name, d->name) || !same_str(again.version, d->version) ||
      again.option_count != d->option_count || again.capabilities != d->capabilities)
    abort();
  (void)vt;
  free_desc(&again);
  pp_wbuf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct pp_plugin d;
  char why[1024] = "";
  int vt = decode_desc(data, size, &d, why, sizeof(why));
  if (vt < 0) {
    free_desc(&d);
    return 0;
  }
  if (validate_desc(&d, (uint32_t)vt, why, sizeof(why)) == 0) round_trip(&d, vt);
  free_desc(&d);
  return 0;
}
