/* SPDX-License-Identifier: Apache-2.0 */
#include "polyprof/kit/heap.h"

#include <stdlib.h> /* before the test below: defines __GLIBC__ on glibc */
#ifdef __GLIBC__
#include <malloc.h>
#endif

void pp_release_heap(void) {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}
