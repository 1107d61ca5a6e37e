/* SPDX-License-Identifier: Apache-2.0 */
/*
 * V8's post-mortem metadata (v8dbg_* symbols) -> struct v8_layout.
 *
 * gen-postmortem-metadata.py in V8 emits one `int v8dbg_<name> = value;`
 * per constant. Class fields are named class_<Class>__<field>__<type>, and
 * the type part follows V8's C++ spelling of the moment (Object,
 * Tagged_Object_, Tagged_NameOrScopeInfoT_...), so every field is looked up
 * under each spelling seen from Node 18 to 24. Constants equal to zero live
 * in .bss and read as zero from memory, as they should.
 *
 * The layout is checked before use: tag values and sizes must be the
 * 64-bit, uncompressed-pointer ones every official Node build uses, and
 * offsets must be small and aligned. Anything else is reported, never
 * guessed.
 */
#include "v8_layout.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "polyprof/kit/elf_lookup.h"
#include "polyprof/kit/remote.h"

enum { F_I32, F_U16, F_FRAME };

struct field {
  const char *names; /* candidates, '|' separated, without the v8dbg_ prefix */
  int type;
  size_t off;   /* F_I32/F_U16: offset in struct v8_layout; F_FRAME: class */
  int required; /* 0: optional (left at its default) */
};

#define I32(n, f, r) \
  { n, F_I32, offsetof(struct v8_layout, f), r }
#define U16(n, f, r) \
  { n, F_U16, offsetof(struct v8_layout, f), r }
#define FRAME(n, c) \
  { "frametype_" n, F_FRAME, c, 0 }

/* Scalars checked in v8_layout_load, not stored. */
enum {
  K_HEAP_TAG,
  K_HEAP_TAG_MASK,
  K_SMI_TAG_MASK,
  K_SMI_SHIFT,
  K_TAGGED_SIZE,
  K_MAP_OFF,
  K_JSFUNCTION_TYPE,
  K_FIRST_JSFUNCTION,
  K_LAST_JSFUNCTION,
  K_COUNT
};
static const char *const checks[K_COUNT] = {
    [K_HEAP_TAG] = "HeapObjectTag",
    [K_HEAP_TAG_MASK] = "HeapObjectTagMask",
    [K_SMI_TAG_MASK] = "SmiTagMask",
    [K_SMI_SHIFT] = "SmiShiftSize",
    [K_TAGGED_SIZE] = "TaggedSize",
    [K_MAP_OFF] = "class_HeapObject__map__Map|class_HeapObject__map__Tagged_Map_",
    [K_JSFUNCTION_TYPE] = "type_JSFunction__JS_FUNCTION_TYPE",
    [K_FIRST_JSFUNCTION] = "FirstJSFunctionType",
    [K_LAST_JSFUNCTION] = "LastJSFunctionType",
};

static const struct field fields[] = {
    I32("off_fp_function", fp_function, 1),
    I32("off_fp_context_or_frame_type|off_fp_context", fp_context, 1),
    I32("off_fp_bytecode_array", fp_bytecode_array, 0),
    I32("off_fp_bytecode_offset", fp_bytecode_offset, 0),
    I32("class_Map__instance_type__uint16_t", map_instance_type, 1),
    I32("class_JSFunction__shared__SharedFunctionInfo|class_JSFunction__shared__Tagged_"
        "SharedFunctionInfo_",
        jsfunction_shared, 1),
    I32("class_SharedFunctionInfo__name_or_scope_info__Object|class_SharedFunctionInfo__name_or_"
        "scope_info__Tagged_Object_|class_SharedFunctionInfo__name_or_scope_info__Tagged_"
        "NameOrScopeInfoT_",
        sfi_name_or_scope_info, 1),
    I32("class_SharedFunctionInfo__script_or_debug_info__HeapObject|class_SharedFunctionInfo__"
        "script_or_debug_info__Object|class_SharedFunctionInfo__script__Tagged_HeapObject_|class_"
        "SharedFunctionInfo__raw_script__Tagged_Object_",
        sfi_script, 1),
    I32("class_Script__name__Object|class_Script__name__Tagged_Object_", script_name, 1),
    I32("class_Script__source__Object|class_Script__source__Tagged_Object_", script_source, 1),
    I32("class_Script__line_ends__Object|class_Script__line_ends__Tagged_Object_", script_line_ends,
        0),
    I32("class_FixedArrayBase__length__SMI", fixed_array_length, 1),
    I32("class_FixedArray__data__uintptr_t", fixed_array_data, 1),
    I32("class_String__length__int32_t", string_length, 1),
    I32("class_SeqOneByteString__chars__char", seq_chars, 1),
    I32("class_ConsString__first__String|class_ConsString__first__Tagged_String_", cons_first, 1),
    I32("class_ConsString__second__String|class_ConsString__second__Tagged_String_", cons_second,
        1),
    I32("class_ThinString__actual__String|class_ThinString__actual__Tagged_String_", thin_actual,
        1),
    I32("class_SlicedString__parent__String|class_SlicedString__parent__Tagged_String_",
        sliced_parent, 0),
    I32("class_SlicedString__offset__SMI", sliced_offset, 0),
    I32("scopeinfo_idx_first_vars", scopeinfo_first_vars, 1),
    I32("scopeinfo_idx_ncontextlocals", scopeinfo_ncontextlocals, 1),
    U16("type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE", type_sfi, 1),
    U16("type_ScopeInfo__SCOPE_INFO_TYPE", type_scope_info, 1),
    U16("type_Script__SCRIPT_TYPE", type_script, 1),
    U16("type_FixedArray__FIXED_ARRAY_TYPE", type_fixed_array, 1),
    U16("type_BytecodeArray__BYTECODE_ARRAY_TYPE", type_bytecode_array, 0),
    U16("FirstNonstringType", first_nonstring_type, 1),
    U16("FirstContextType", type_context_first, 1),
    U16("LastContextType", type_context_last, 1),
    U16("StringRepresentationMask", string_repr_mask, 1),
    U16("StringEncodingMask", string_enc_mask, 1),
    U16("OneByteStringTag", one_byte_tag, 1),
    U16("SeqStringTag", seq_tag, 1),
    U16("ConsStringTag", cons_tag, 1),
    U16("SlicedStringTag", sliced_tag, 0),
    U16("ThinStringTag", thin_tag, 1),
    U16("ExternalStringTag", external_tag, 0),
    I32("class_JSFunction__code__CodeT|class_JSFunction__code__Tagged_Code_|class_JSFunction__"
        "code__Code",
        jsfunction_code, 0),
    I32("class_Code__instruction_start__Address", code_start_field, 0),
    I32("class_Code__instruction_start__uintptr_t", code_header_size, 0),
    I32("class_Code__instruction_size__int", code_size, 0),
    I32("class_Code__flags__uint32_t", code_flags, 0),
    I32("class_Code__source_position_table__ByteArray", code_positions, 0),
    I32("class_Code__deoptimization_data__FixedArray", code_deopt, 0),
    I32("DeoptimizationDataInlinedFunctionCountIndex", deopt_inlined_count, 0),
    I32("DeoptimizationDataLiteralArrayIndex", deopt_literals, 0),
    I32("DeoptimizationDataInliningPositionsIndex", deopt_inlining_positions, 0),
    I32("CodeKindFieldMask", code_kind_mask, 0),
    I32("CodeKindFieldShift", code_kind_shift, 0),
    I32("CodeKindBaseline", code_kind_baseline, 0),
    I32("type_Code__CODE_TYPE", type_code, 0),
    I32("type_CodeWrapper__CODE_WRAPPER_TYPE", type_code_wrapper, 0),
    I32("type_SharedFunctionInfoWrapper__SHARED_FUNCTION_INFO_WRAPPER_TYPE", type_sfi_wrapper, 0),
    I32("class_InstructionStream__instruction_start__uintptr_t", istream_header_size, 0),
    I32("type_InstructionStream__INSTRUCTION_STREAM_TYPE", type_istream, 0),
    FRAME("EntryFrame", V8F_ENTRY),
    FRAME("ConstructEntryFrame", V8F_ENTRY),
    FRAME("ExitFrame", V8F_EXIT),
    FRAME("BuiltinExitFrame", V8F_EXIT),
    FRAME("ApiCallbackExitFrame", V8F_EXIT),
    FRAME("ApiAccessorExitFrame", V8F_EXIT),
    FRAME("InterpretedFrame", V8F_INTERPRETED),
    FRAME("BaselineFrame", V8F_BASELINE),
    FRAME("OptimizedFrame", V8F_OPTIMIZED),
    FRAME("TurbofanFrame", V8F_OPTIMIZED),
    FRAME("TurbofanJSFrame", V8F_OPTIMIZED),
    FRAME("MaglevFrame", V8F_OPTIMIZED),
    FRAME("StubFrame", V8F_STUB),
    FRAME("BuiltinFrame", V8F_STUB),
    FRAME("ConstructFrame", V8F_STUB),
    FRAME("FastConstructFrame", V8F_STUB),
    FRAME("InternalFrame", V8F_STUB),
    FRAME("BuiltinContinuationFrame", V8F_STUB),
    FRAME("JavaScriptBuiltinContinuationFrame", V8F_STUB),
    FRAME("JavaScriptBuiltinContinuationWithCatchFrame", V8F_STUB),
    FRAME("TurbofanStubWithContextFrame", V8F_STUB),
    FRAME("IrregexpFrame", V8F_STUB),
    FRAME("NativeFrame", V8F_STUB),
    FRAME("WasmFrame", V8F_WASM),
    FRAME("WasmExitFrame", V8F_WASM),
    FRAME("JsToWasmFrame", V8F_WASM),
    FRAME("WasmToJsFrame", V8F_WASM),
};

#define NFIELDS (sizeof(fields) / sizeof(fields[0]))
#define MAX_CAND 4
#define NSLOTS ((NFIELDS + K_COUNT) * MAX_CAND)

/* Splits "a|b" into "v8dbg_a", "v8dbg_b" in buf; returns the count. */
static int candidates(const char *names, char (*buf)[128], int max) {
  int n = 0;
  const char *p = names;
  while (*p && n < max) {
    const char *e = strchr(p, '|');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    snprintf(buf[n++], 128, "v8dbg_%.*s", (int)len, p);
    if (!e) break;
    p = e + 1;
  }
  return n;
}

static int plausible_offset(int32_t v) {
  return v >= 0 && v < 512;
}

/* The Code fields V8 does not export, from the ones it does, as V8's
 * layouts have them: Node 18 (V8 10.2) exports the size and flags, and
 * its instructions follow a fixed header, with the position table two
 * words before the size; Node 20 (V8 11.3) exports the tables only, the
 * instruction start, flags and size following them; Node 22 and 24 (V8
 * 12.4, 13.6) export the instruction start, three words after the
 * position table (a CodeWrapper pointer sits between). The deoptimization
 * data is always the word before the position table, and its slots kept
 * their order (inlined count 1, literals 2, inlining positions 7) until
 * V8 exported them. A JSFunction's code pointer, where not exported, is
 * the word after its SharedFunctionInfo's three successors (V8 11.3) or
 * the word before it (V8 12+, which has CodeWrapper). A layout that comes
 * out implausible turns inlined-frame expansion off, nothing else. */
void v8_layout_derive_code(struct v8_layout *L) {
  /* the values come from the target's memory: bounded before any sum */
  const int32_t in[] = {L->jsfunction_code,  L->jsfunction_shared, L->code_start_field,
                        L->code_header_size, L->code_size,         L->code_flags,
                        L->code_positions,   L->code_deopt};
  L->inline_ok = 0;
  for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++)
    if (in[i] < -1 || in[i] > 4096) return;
  if (L->jsfunction_code < 0)
    L->jsfunction_code =
        L->type_code_wrapper >= 0 ? L->jsfunction_shared - 8 : L->jsfunction_shared + 24;
  if (L->code_positions < 0 && L->code_start_field >= 0 && L->type_code_wrapper >= 0)
    L->code_positions = L->code_start_field - 24;
  if (L->code_positions < 0 && L->code_header_size >= 0 && L->code_size >= 0)
    L->code_positions = L->code_size - 16;
  if (L->code_start_field < 0 && L->code_header_size < 0 && L->code_positions >= 0) {
    /* V8 11.3: instruction start, flags, then size (after two 16-bit
     * fields that V8 11.4 removed) */
    L->code_start_field = L->code_positions + 16;
    if (L->code_flags < 0) L->code_flags = L->code_start_field + 8;
    if (L->code_size < 0) L->code_size = L->code_flags + 8;
  }
  if (L->code_deopt < 0 && L->code_positions >= 8) L->code_deopt = L->code_positions - 8;
  if (L->deopt_inlined_count < 0) L->deopt_inlined_count = 1;
  if (L->deopt_literals < 0) L->deopt_literals = 2;
  if (L->deopt_inlining_positions < 0) L->deopt_inlining_positions = 7;
  if (L->code_kind_shift < 0) L->code_kind_shift = 0; /* a zero constant may be absent */
  int32_t offs[] = {L->jsfunction_code, L->code_size, L->code_flags, L->code_positions,
                    L->code_deopt};
  int ok = L->code_start_field >= 0 || L->code_header_size > 0;
  for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++)
    ok &= plausible_offset(offs[i]) && offs[i] % 4 == 0;
  ok &= L->code_positions % 8 == 0 && L->code_deopt % 8 == 0 && L->jsfunction_code % 8 == 0;
  ok &= L->code_start_field < 0 ||
        (plausible_offset(L->code_start_field) && L->code_start_field % 8 == 0);
  ok &= L->code_header_size < 0 || (L->code_header_size > 0 && L->code_header_size < 1024);
  /* instructions are found by address through their container's header */
  ok &= L->code_header_size > 0 ||
        (L->istream_header_size > 8 && L->istream_header_size < 1024 && L->type_istream > 0);
  ok &= L->deopt_inlined_count > 0 && L->deopt_inlined_count < 32 && L->deopt_literals > 0 &&
        L->deopt_literals < 32 && L->deopt_inlining_positions > 0 &&
        L->deopt_inlining_positions < 32;
  ok &= L->code_kind_mask > 0 && L->code_kind_mask < 256 && L->code_kind_shift < 32 &&
        L->code_kind_baseline > 0 && L->type_code > 0 && L->type_code <= 0xffff;
  L->inline_ok = ok;
}

static int plausible_fp_slot(int32_t v) {
  return v < 0 && v >= -128 && v % 8 == 0;
}

int v8_layout_load(uint32_t pid, int fd, uint64_t bias, struct v8_layout *L, char *why,
                   size_t whylen) {
  static char names[NSLOTS][128];
  const char *np[NSLOTS];
  int owner[NSLOTS]; /* index into fields, or NFIELDS + check */
  size_t n = 0;
  for (size_t i = 0; i < NFIELDS + K_COUNT; i++) {
    const char *spec = i < NFIELDS ? fields[i].names : checks[i - NFIELDS];
    int c = candidates(spec, &names[n], MAX_CAND);
    for (int k = 0; k < c; k++, n++) {
      np[n] = names[n];
      owner[n] = (int)i;
    }
  }
  uint64_t addr[NSLOTS];
  int rc = pp_elf_lookup_symbols(fd, np, n, 0, addr, NULL);
  if (rc < 0) {
    snprintf(why, whylen, "cannot read its ELF symbols (%s)", strerror(-rc));
    return -ENOTSUP;
  }
  if (rc == 0) {
    snprintf(why, whylen, "no V8 post-mortem metadata (v8dbg_* symbols) in its executable");
    return -ENOTSUP;
  }
  /* first candidate found per value, all read in one system call */
  int32_t val[NFIELDS + K_COUNT];
  int found[NFIELDS + K_COUNT];
  struct pp_remote_iov iov[NFIELDS + K_COUNT];
  size_t niov = 0;
  memset(found, 0, sizeof(found));
  for (size_t s = 0; s < n; s++) {
    int o = owner[s];
    if (found[o] || !addr[s]) continue;
    found[o] = 1;
    iov[niov].addr = addr[s] + bias;
    iov[niov].buf = &val[o];
    iov[niov].len = sizeof(int32_t);
    niov++;
  }
  rc = 0;
  for (size_t at = 0; at < niov && rc == 0; at += 64)
    rc = pp_remote_readv(pid, iov + at, niov - at < 64 ? niov - at : 64);
  if (rc < 0) {
    if (rc == -ESRCH) return rc;
    snprintf(why, whylen, "cannot read its V8 metadata from memory (%s)", strerror(-rc));
    return rc == -EPERM ? rc : -ENOTSUP;
  }
  memset(L, 0, sizeof(*L));
  L->fp_bytecode_array = L->fp_bytecode_offset = 0;
  int32_t *unknown[] = {&L->jsfunction_code,    &L->code_start_field,
                        &L->code_header_size,   &L->code_size,
                        &L->code_flags,         &L->code_positions,
                        &L->code_deopt,         &L->deopt_inlined_count,
                        &L->deopt_literals,     &L->deopt_inlining_positions,
                        &L->code_kind_mask,     &L->code_kind_shift,
                        &L->code_kind_baseline, &L->type_code,
                        &L->type_code_wrapper,  &L->type_sfi_wrapper};
  for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++)
    *unknown[i] = -1;
  for (size_t i = 0; i < NFIELDS; i++) {
    const struct field *f = &fields[i];
    if (!found[i]) {
      if (f->required) {
        const char *bar = strchr(f->names, '|');
        snprintf(why, whylen, "V8 metadata incomplete: no v8dbg_%.*s",
                 (int)(bar ? bar - f->names : (long)strlen(f->names)), f->names);
        return -ENOTSUP;
      }
      continue;
    }
    int32_t v = val[i];
    if (f->type == F_I32) {
      memcpy((char *)L + f->off, &v, sizeof(v));
    } else if (f->type == F_U16) {
      if (v < 0 || v > 0xffff) {
        snprintf(why, whylen, "V8 metadata inconsistent: v8dbg_%s = %d", f->names, v);
        return -ENOTSUP;
      }
      uint16_t u = (uint16_t)v;
      memcpy((char *)L + f->off, &u, sizeof(u));
    } else if (v > 0 && v < V8_MAX_FRAME_TYPE) {
      L->frame_kind[v] = (uint8_t)f->off;
    }
  }
  int32_t *c = &val[NFIELDS];
  int *cf = &found[NFIELDS];
  for (int k = 0; k < K_COUNT; k++) {
    if (!cf[k] && k != K_FIRST_JSFUNCTION && k != K_LAST_JSFUNCTION && k != K_MAP_OFF) {
      snprintf(why, whylen, "V8 metadata incomplete: no v8dbg_%s", checks[k]);
      return -ENOTSUP;
    }
  }
  if (cf[K_TAGGED_SIZE] && c[K_TAGGED_SIZE] != 8) {
    snprintf(why, whylen, "V8 built with pointer compression (tagged size %d) is not supported",
             c[K_TAGGED_SIZE]);
    return -ENOTSUP;
  }
  if (c[K_HEAP_TAG] != 1 || c[K_HEAP_TAG_MASK] != 3 || c[K_SMI_TAG_MASK] != 1 ||
      c[K_SMI_SHIFT] != 31 || (cf[K_MAP_OFF] && c[K_MAP_OFF] != 0)) {
    snprintf(why, whylen,
             "V8 metadata inconsistent: tags %d/%d, Smi mask %d shift %d, map at %d (expected "
             "1/3, 1, 31, 0)",
             c[K_HEAP_TAG], c[K_HEAP_TAG_MASK], c[K_SMI_TAG_MASK], c[K_SMI_SHIFT],
             cf[K_MAP_OFF] ? c[K_MAP_OFF] : 0);
    return -ENOTSUP;
  }
  L->smi_shift = 32;
  int32_t jsf = c[K_JSFUNCTION_TYPE];
  if (jsf <= 0 || jsf > 0xffff) {
    snprintf(why, whylen, "V8 metadata inconsistent: JS_FUNCTION_TYPE %d", jsf);
    return -ENOTSUP;
  }
  if (cf[K_FIRST_JSFUNCTION] && cf[K_LAST_JSFUNCTION] && c[K_FIRST_JSFUNCTION] > 0 &&
      c[K_LAST_JSFUNCTION] >= c[K_FIRST_JSFUNCTION] && c[K_LAST_JSFUNCTION] <= 0xffff) {
    L->type_jsfunction_first = (uint16_t)c[K_FIRST_JSFUNCTION];
    L->type_jsfunction_last = (uint16_t)c[K_LAST_JSFUNCTION];
  } else {
    /* older V8 names only JS_FUNCTION_TYPE, the first of its subtypes
     * (class constructors and the builtin constructors follow it) */
    L->type_jsfunction_first = (uint16_t)jsf;
    L->type_jsfunction_last = (uint16_t)(jsf + 32 > 0xffff ? 0xffff : jsf + 32);
  }
  /* plausibility of what the walk dereferences */
  const struct {
    const char *name;
    int32_t v;
  } offs[] = {
      {"Map instance_type", L->map_instance_type},
      {"JSFunction shared", L->jsfunction_shared},
      {"SharedFunctionInfo name_or_scope_info", L->sfi_name_or_scope_info},
      {"SharedFunctionInfo script", L->sfi_script},
      {"Script name", L->script_name},
      {"Script source", L->script_source},
      {"Script line_ends", L->script_line_ends},
      {"FixedArray length", L->fixed_array_length},
      {"FixedArray data", L->fixed_array_data},
      {"String length", L->string_length},
      {"SeqString chars", L->seq_chars},
      {"ConsString first", L->cons_first},
      {"ConsString second", L->cons_second},
      {"ThinString actual", L->thin_actual},
      {"SlicedString parent", L->sliced_parent},
      {"SlicedString offset", L->sliced_offset},
  };
  for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
    if (!plausible_offset(offs[i].v)) {
      snprintf(why, whylen, "V8 metadata inconsistent: %s offset %d", offs[i].name, offs[i].v);
      return -ENOTSUP;
    }
  }
  if (!plausible_fp_slot(L->fp_function) || !plausible_fp_slot(L->fp_context) ||
      (L->fp_bytecode_array && !plausible_fp_slot(L->fp_bytecode_array))) {
    snprintf(why, whylen, "V8 metadata inconsistent: frame slots function %d context %d",
             L->fp_function, L->fp_context);
    return -ENOTSUP;
  }
  if (L->scopeinfo_first_vars < 1 || L->scopeinfo_first_vars > 16 ||
      L->scopeinfo_ncontextlocals < 0 || L->scopeinfo_ncontextlocals >= L->scopeinfo_first_vars) {
    snprintf(why, whylen, "V8 metadata inconsistent: ScopeInfo indexes %d/%d",
             L->scopeinfo_first_vars, L->scopeinfo_ncontextlocals);
    return -ENOTSUP;
  }
  if (L->first_nonstring_type == 0 || L->type_context_first > L->type_context_last ||
      L->type_sfi < L->first_nonstring_type || L->type_script < L->first_nonstring_type) {
    snprintf(why, whylen, "V8 metadata inconsistent: instance types");
    return -ENOTSUP;
  }
  v8_layout_derive_code(L);
  int have_exit = 0, have_interp = 0;
  for (int t = 0; t < V8_MAX_FRAME_TYPE; t++) {
    have_exit |= L->frame_kind[t] == V8F_EXIT;
    have_interp |= L->frame_kind[t] == V8F_INTERPRETED;
  }
  if (!have_exit || !have_interp) {
    snprintf(why, whylen, "V8 metadata incomplete: frame type markers");
    return -ENOTSUP;
  }
  return 0;
}
