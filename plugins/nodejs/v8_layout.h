/* SPDX-License-Identifier: Apache-2.0 */
/*
 * V8's post-mortem metadata: the object layouts and frame constants the
 * out-of-process reader (v8 mode) needs, read from the `v8dbg_*` symbols
 * that V8 exports from the `node` executable (or libnode.so). Names change
 * between V8 versions (a field's type is part of its symbol name), so each
 * value has a list of candidate names; a value that is missing or out of
 * its plausible range makes the whole layout unusable, with a reason that
 * names it.
 */
#ifndef POLYPROF_NODEJS_V8_LAYOUT_H
#define POLYPROF_NODEJS_V8_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define V8_MAX_FRAME_TYPE 64

/* What a V8 frame type marker stands for (v8_layout.frame_kind[]). */
enum v8_frame_class {
  V8F_UNKNOWN = 0,
  V8F_ENTRY,       /* C++ -> JS entry */
  V8F_EXIT,        /* JS -> C++ exit (runtime, API callbacks, builtins in C++) */
  V8F_INTERPRETED, /* Ignition */
  V8F_BASELINE,    /* Sparkplug */
  V8F_OPTIMIZED,   /* TurboFan, Maglev */
  V8F_STUB,        /* builtins, stubs, construct and internal frames */
  V8F_WASM,
};

struct v8_layout {
  /* frame slots, relative to the frame pointer */
  int32_t fp_function, fp_context, fp_bytecode_array, fp_bytecode_offset;
  uint8_t frame_kind[V8_MAX_FRAME_TYPE]; /* marker -> enum v8_frame_class */
  /* tagging */
  uint32_t smi_shift; /* a Smi's value is word >> smi_shift */
  /* objects */
  int32_t map_instance_type;
  int32_t jsfunction_shared;
  int32_t sfi_name_or_scope_info, sfi_script;
  int32_t script_name, script_source, script_line_ends;
  int32_t fixed_array_length, fixed_array_data;
  int32_t string_length, seq_chars, cons_first, cons_second, thin_actual, sliced_parent,
      sliced_offset;
  int32_t scopeinfo_first_vars, scopeinfo_ncontextlocals;
  /* instance types */
  uint16_t type_jsfunction_first, type_jsfunction_last, type_context_first, type_context_last;
  uint16_t type_sfi, type_scope_info, type_script, type_fixed_array, type_bytecode_array;
  uint16_t first_nonstring_type;
  uint16_t string_repr_mask, string_enc_mask, one_byte_tag, seq_tag, cons_tag, sliced_tag, thin_tag,
      external_tag;
  /* Optimized code and what it inlined (v8_inline.c). V8 exports these
   * only in part, and which part changes per version; the rest is derived
   * from neighbouring fields (v8_layout_derive_code). -1: unknown. */
  int32_t jsfunction_code;
  int32_t code_start_field; /* Code holds the address of its instructions */
  int32_t code_header_size; /* or they follow its header (V8 10) */
  int32_t code_size, code_flags, code_positions, code_deopt;
  int32_t deopt_inlined_count, deopt_literals, deopt_inlining_positions;
  int32_t code_kind_mask, code_kind_shift, code_kind_baseline;
  int32_t type_code, type_code_wrapper, type_sfi_wrapper;
  /* V8 11+: instructions live in an InstructionStream after its header,
   * whose first field after the map points back to the Code */
  int32_t istream_header_size, type_istream;
  int inline_ok; /* all of the above known and plausible */
};

/* Reads the layout of the V8 in module fd (an ELF the process pid maps
 * with load bias `bias`). The values are read from the process's memory
 * (constants in the module's data, all in one system call) and checked
 * for plausibility. 0, or -ENOTSUP with a reason naming the missing or
 * inconsistent value, or -errno (-ESRCH: gone). */
int v8_layout_load(uint32_t pid, int fd, uint64_t bias, struct v8_layout *L, char *why,
                   size_t whylen);

/* Fills the Code layout values V8 does not export from those it does, and
 * sets inline_ok (v8_layout_load calls it; exposed for tests). */
void v8_layout_derive_code(struct v8_layout *L);

#endif
