/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-version memory layouts of the Ruby VM (Linux x86_64).
 *
 * Every offset the sampler follows lives in one table row per minor series,
 * so adding a version is adding a row. The values come from rbspy's bindgen
 * bindings of each release's vm_core.h; the 3.1 row was checked on live Debian 3.1.2 processes.
 * Fields we could not source are -1 and the feature that needs them degrades (see docs/ruby.md).
 */
#ifndef POLYPROF_RUBY_LAYOUT_H
#define POLYPROF_RUBY_LAYOUT_H

#include <stdint.h>

enum ruby_string_kind {
  RUBY_STR_FLAGS_LEN = 0, /* <= 3.1: embedded length in flags bits 14..18, chars at +16 */
  RUBY_STR_LEN_FIELD = 1, /* 3.2+: length at +16 (embedded or not), embedded chars at +24 */
};

enum ruby_line_kind {
  RUBY_LINES_POSITIONS = 0, /* 2.5: {position, line_no, events} entries, scanned */
  RUBY_LINES_SUCCINCT = 1,  /* 2.6+: succinct bit-vector position -> entry index */
};

struct ruby_layout {
  const char *series; /* "3.1" */
  int major, minor;
  int min_patch, max_patch; /* patch range the row holds for (-1: any) */

  int16_t ec_thread_ptr;                           /* rb_execution_context_t.thread_ptr */
  int16_t cfp_size;                                /* sizeof(rb_control_frame_t) */
  int16_t first_lineno;                            /* body.location.first_lineno */
  int8_t first_lineno_value;                       /* 1: a Fixnum VALUE (<= 3.1), 0: an int */
  int8_t line_kind;                                /* enum ruby_line_kind */
  int16_t ii_body, ii_positions, ii_size, ii_succ; /* body.insns_info.* (-1: absent) */
  int16_t ii_entry_size;                           /* sizeof(iseq_insn_info_entry) */
  int16_t ii_entry_line;                           /* offset of line_no inside an entry */

  int16_t vm_main_thread;        /* 2.x: rb_vm_t.main_thread */
  int16_t vm_living_threads;     /* 2.x: rb_vm_t.living_threads list head (-1: unknown) */
  int16_t vm_main_ractor;        /* 3.x: rb_vm_t.ractor.main_ractor (-1: 2.x) */
  int16_t vm_ractor_main_thread; /* 3.x: rb_vm_t.ractor.main_thread */
  int16_t ractor_threads_set;    /* 3.x: rb_ractor_t.threads.set list head (-1: unknown) */
  int16_t ractor_running_ec;     /* 3.x: rb_ractor_t.threads.running_ec */
  int16_t ractor_main;           /* 3.x: rb_ractor_t.threads.main (checks running_ec) */

  int16_t thread_ec;  /* rb_thread_t.ec */
  int16_t thread_tid; /* rb_thread_t.tid (3.1), or inside *nt (3.2+); -1: unknown */
  int16_t thread_nt;  /* rb_thread_t.nt (3.2+): tid is read through it; -1: none */
  /* rb_thread_t.thread_id, the pthread_t (the address of libc's struct
   * pthread, which holds the kernel tid): where Ruby keeps no tid of its
   * own, the tid is read there (ruby_threads.c); -1: unknown */
  int16_t thread_pthread;

  int8_t string_kind; /* enum ruby_string_kind */
  int16_t last_op_id; /* tLAST_OP_ID: IDs above it carry a 4-bit scope */
};

/* The row for a version ("3.1.2"), or NULL if unsupported. *patch_ok is 0
 * when the minor series is known but the patch is outside the checked range
 * (the caller may still try). */
const struct ruby_layout *ruby_layout_for(const char *version, int *patch_ok);

/* Parses "X.Y.Z..." into numbers. 0 or -1. */
int ruby_parse_version(const char *s, int *major, int *minor, int *patch);

/* "2.5, 2.6, ... 4.0" for messages and docs. */
const char *ruby_layout_supported(void);

#endif
