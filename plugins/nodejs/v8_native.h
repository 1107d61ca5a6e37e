/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Names of the C++ frames of a Node.js process (Node's, V8's, OpenSSL's,
 * libuv's, libc's) in the v8 mode's samples: the process's executable
 * mappings, each file's ELF function symbols (demangled), and a cache of
 * the names last used.
 *
 * Symbol tables are shared by every process that maps the same file
 * (device and inode) and bounded in number; their names stay in the file
 * (read when a symbol is first named), so node's hundred thousand symbols
 * cost their addresses only. Files are opened through the kit's
 * target-file access, as the inode the process maps.
 */
#ifndef POLYPROF_NODEJS_V8_NATIVE_H
#define POLYPROF_NODEJS_V8_NATIVE_H

#include <stddef.h>
#include <stdint.h>

#include "polyprof/kit/target_files.h"
#include "polyprof/plugin.h"

struct v8_native;

/* The mappings of process pid, read now (symbols are loaded when first
 * needed); v8_file: the file holding V8. NULL if out of memory. */
struct v8_native *v8_native_new(uint32_t pid, const struct pp_file_id *v8_file);
void v8_native_free(struct v8_native *nv);

/* Names the code at pc (a return address if is_return: the call before
 * it is named) into *f as a native frame (its name valid until 512 more
 * frames were named). 0, or -1: in no file (JIT code), or no symbol
 * covers it. Fits v8_reader.native. */
int v8_native_frame(void *nv, uint64_t pc, int is_return, struct pp_frame *f);

/* Whether pc lies in a mapping of the file holding V8 (V8 maps a copy of
 * its embedded builtins next to its heap code: that is the file too).
 * Fits v8_reader.in_v8_module. */
int v8_native_in_v8(void *nv, uint64_t pc);

/* Bytes held by the shared symbol tables and name cache, for the log. */
size_t v8_native_bytes(void);

#endif
