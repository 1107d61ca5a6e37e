/* SPDX-License-Identifier: Apache-2.0 */
/* Giving the process's free heap pages back to the kernel. */
#ifndef POLYPROF_KIT_HEAP_H
#define POLYPROF_KIT_HEAP_H

/* Once a session, after its transient buffers are freed (the core's .col
 * frame buffer and HTML, a worker's snapshot encode and plugin tables).
 * glibc raises its mmap threshold after the first large free, so later
 * large buffers come from the heap and their pages stay resident among
 * long-lived blocks: the core's RSS crept up ~20 KiB a minute in the
 * one-hour soak while its heap (massif) stayed flat. A no-op without glibc. */
void pp_release_heap(void);

#endif
