/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The header of a python_object_reader memory image (fuzz_memimage.h):
 * the version whose layouts apply and where the objects read begin.
 */
#ifndef PP_FUZZ_PYTHON_OBJECT_READER_H
#define PP_FUZZ_PYTHON_OBJECT_READER_H

#include <stdint.h>

struct py_objimg_hdr {
  uint8_t major, minor;
  uint8_t types; /* bit 0: str_type known, bit 1: long_type known */
  uint8_t pad;
  uint32_t ns_tid;          /* the thread whose name is asked for */
  int64_t pthread_tid_off;  /* 2.7-3.10: the tid's offset in struct pthread (-1: unknown) */
  uint64_t interp_head;     /* the first interpreter: its modules, its thread states */
  uint64_t dict, obj, ival; /* a dict, an instance and an int read directly */
  uint64_t str_type, long_type;
};

#endif
