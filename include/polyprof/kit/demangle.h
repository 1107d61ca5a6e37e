/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Symbol demangling for C++ (Itanium ABI) and Rust (legacy and v0), giving
 * the names perf prints by default: no parameter lists, no Rust hashes.
 */
#ifndef POLYPROF_KIT_DEMANGLE_H
#define POLYPROF_KIT_DEMANGLE_H

#include <stddef.h>

/* Writes the demangled form of name into buf (truncated to cap-1) and
 * returns buf, or returns NULL if name is not a mangled name (then the
 * caller keeps name as it is). */
const char *pp_demangle(const char *name, char *buf, size_t cap);

#endif
