/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Demangling through libiberty's cplus_demangle (the GNU implementation perf
 * and binutils use), linked statically from libiberty-dev.
 */
#include "polyprof/kit/demangle.h"

#include <libiberty/demangle.h>
#include <stdlib.h>
#include <string.h>

const char *pp_demangle(const char *name, char *buf, size_t cap) {
  if (!name || cap == 0) return NULL;
  /* Itanium C++ and both Rust schemes start with _Z / _R; skipping the
   * rest avoids a demangler call per plain C name. */
  if (name[0] != '_' || (name[1] != 'Z' && name[1] != 'R')) return NULL;
  /* libiberty recurses on nested names; absurdly long input is refused
   * rather than demangled (DMGL_NO_RECURSE_LIMIT is not set, so its own
   * recursion limit applies too). */
  if (strlen(name) > 4096) return NULL;
  /* DMGL_AUTO: Rust (legacy "_ZN...17h<hash>E" and v0 "_R...") first, then
   * C++. Without DMGL_PARAMS, as perf prints by default. */
  char *d = cplus_demangle(name, DMGL_AUTO);
  if (!d) return NULL;
  size_t n = strlen(d);
  if (n >= cap) n = cap - 1;
  memcpy(buf, d, n);
  buf[n] = '\0';
  free(d);
  return buf;
}
