/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the nodejs plugin's v8 mode walk (plugins/nodejs/v8_walk.c,
 * v8_heap.c) over a memory image (fuzz_memimage.h) standing for a Node
 * process: the frame-pointer chain in the copied stack (exit and entry
 * markers, the scan for an exit frame when the chain gives nothing), each
 * JS frame's JSFunction, SharedFunctionInfo, ScopeInfo, strings of every
 * representation, Script and line, all read from the target. Walked twice
 * with a 16-entry cache (the second from what the first cached, a small
 * frame limit) and once more with an empty one. The layout comes from the
 * image header and is used only if it passes the checks attaching makes
 * (v8_layout_load), as the walker never sees another; functions inlined
 * into optimized frames are expanded (v8_inline.c: Code objects found
 * from the function or by address, deoptimization data, source position
 * tables), each JS frame's tier told from its code, and C++ frames
 * mixed in through stand-ins for the process's mappings (half the pages
 * V8's builtins, half C++ with names). Seeds are images
 * recorded from a real Node 20 process (seed_v8_image).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "fuzz_memimage.h"
#include "fuzz_v8_walk.h"
#include "v8_inline.h"
#include "v8_layout.h"
#include "v8_walk.h"

static int plausible_off(int32_t v) {
  return v >= 0 && v < 512;
}
static int plausible_slot(int32_t v) {
  return v < 0 && v >= -128 && v % 8 == 0;
}

/* What v8_layout_load guarantees of a layout it returns. */
static int layout_ok(const struct v8_layout *L) {
  const int32_t offs[] = {L->map_instance_type, L->jsfunction_shared,  L->sfi_name_or_scope_info,
                          L->sfi_script,        L->script_name,        L->script_source,
                          L->script_line_ends,  L->fixed_array_length, L->fixed_array_data,
                          L->string_length,     L->seq_chars,          L->cons_first,
                          L->cons_second,       L->thin_actual,        L->sliced_parent,
                          L->sliced_offset};
  for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++)
    if (!plausible_off(offs[i])) return 0;
  if (!plausible_slot(L->fp_function) || !plausible_slot(L->fp_context)) return 0;
  if (L->fp_bytecode_array && !plausible_slot(L->fp_bytecode_array)) return 0;
  if (L->scopeinfo_first_vars < 1 || L->scopeinfo_first_vars > 16 ||
      L->scopeinfo_ncontextlocals < 0 || L->scopeinfo_ncontextlocals >= L->scopeinfo_first_vars)
    return 0;
  if (L->first_nonstring_type == 0 || L->type_context_first > L->type_context_last ||
      L->type_sfi < L->first_nonstring_type || L->type_script < L->first_nonstring_type)
    return 0;
  if (L->smi_shift != 32 || L->type_jsfunction_first > L->type_jsfunction_last) return 0;
  for (int t = 0; t < V8_MAX_FRAME_TYPE; t++)
    if (L->frame_kind[t] > V8F_WASM) return 0;
  return 1;
}

/* The inlined-frame layout as v8_layout_load leaves it: derived and
 * checked (inline_ok says whether it passed). */
static void inline_layout(struct v8_layout *L) {
  v8_layout_derive_code(L);
}

static struct pp_frame frames[V8_MAX_FRAMES];

/* Stand-ins for the mappings: odd pages hold V8's builtins, pages whose
 * number is a multiple of 4 C++ functions with names. */
static int fake_in_v8(void *ctx, uint64_t pc) {
  (void)ctx;
  return (pc >> 12) & 1;
}
static int fake_native(void *ctx, uint64_t pc, int is_return, struct pp_frame *f) {
  (void)ctx;
  (void)is_return;
  if ((pc >> 12) & 3) return -1;
  *f = (struct pp_frame){.name = "cxx", .kind = PP_FRAME_NATIVE};
  return 0;
}

static void check(int n, uint32_t max) {
  if (n == -EAGAIN || n == -EINVAL) return;
  if (n < 0 || (uint32_t)n > max) abort();
  for (int k = 0; k < n; k++) {
    unsigned kind = frames[k].kind;
    if (!frames[k].name || (kind != PP_FRAME_JS && kind != PP_FRAME_NATIVE &&
                            (kind < PP_FRAME_JS_INTERPRETED || kind > PP_FRAME_JS_BUILTIN)))
      abort();
    (void)strlen(frames[k].name);
    if (frames[k].file) (void)strlen(frames[k].file);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct v8_image_hdr h;
  if (size < sizeof(h) + 12) return 0;
  memcpy(&h, data, sizeof(h));
  uint64_t sp;
  uint32_t stack_len;
  memcpy(&sp, data + sizeof(h), 8);
  memcpy(&stack_len, data + sizeof(h) + 8, 4);
  size_t at = sizeof(h) + 12;
  if (stack_len > size - at) stack_len = (uint32_t)(size - at);
  /* the source position table decoder on the raw bytes */
  (void)v8_position_at(data, size, sp);
  if (!layout_ok(&h.L)) return 0;
  inline_layout(&h.L);
  /* an exact-size copy of the stack, so a read past it is seen */
  unsigned char *stack = malloc(stack_len ? stack_len : 1);
  if (!stack) abort();
  memcpy(stack, data + at, stack_len);
  if (!pp_fuzz_image_load(data, size, at + stack_len)) abort();
  struct v8_raw_sample s = {.tid = 4242,
                            .regs = {.bp = h.bp, .sp = sp, .ip = h.ip},
                            .stack = stack,
                            .stack_len = stack_len};
  struct v8_reader r;
  if (v8_reader_init(&r, 4242, &h.L, 16) < 0) abort();
  check(v8_walk(&r, &s, frames, V8_MAX_FRAMES), V8_MAX_FRAMES);
  check(v8_walk(&r, &s, frames, 3), 3);
  r.native = fake_native;
  r.in_v8_module = fake_in_v8;
  check(v8_walk(&r, &s, frames, V8_MAX_FRAMES), V8_MAX_FRAMES);
  check(v8_walk(&r, &s, frames, 2), 2);
  v8_reader_free(&r);
  if (v8_reader_init(&r, 4242, &h.L, 0) < 0) abort();
  check(v8_walk(&r, &s, frames, V8_MAX_FRAMES), V8_MAX_FRAMES);
  v8_reader_free(&r);
  pp_fuzz_image_unload();
  free(stack);
  return 0;
}
