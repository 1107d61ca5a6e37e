/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the python plugin's parser of CPython 3.14+'s
 * _Py_AsyncioModuleDebugOffsets (plugins/python/asyncio_debug.c), the
 * thirteen uint64 sizes and offsets the _asyncio module exports as
 * _AsyncioDebug, all hostile. A struct that is accepted must leave every
 * field the chain reader reads inside the bytes it reads of a task
 * (task_size, at most PA_DBG_TASK_MAX) or of a thread state, past the
 * object header, with no two fields overlapping; a refusal names the
 * field. Both object headers (default 16, free-threaded 32) are tried.
 */
#include <stdlib.h>
#include <string.h>

#include "asyncio_internal.h"
#include "fuzz_input.h"

static void check(const struct pa_dbg *d, uint32_t hdr) {
  if (d->task_size > PA_DBG_TASK_MAX || d->task_size < hdr + 8) abort();
  const uint32_t f[] = {d->task_name, d->task_awaited_by, d->task_coro};
  for (size_t i = 0; i < 3; i++)
    if (f[i] < hdr || f[i] + 8 > d->task_size) abort();
  if (d->task_is_task < hdr || d->task_is_task >= d->task_size) abort();
  if (d->task_awaited_by_is_set < hdr || d->task_awaited_by_is_set >= d->task_size) abort();
  if (d->task_is_task == d->task_awaited_by_is_set) abort();
  if (d->task_node + 16 > d->task_size) abort();
  if (d->ts_size > PA_DBG_STATE_MAX || d->ts_running_task + 8 > d->ts_size ||
      d->ts_running_loop + 8 > d->ts_size || d->ts_tasks_head + 16 > d->ts_size)
    abort();
  if (d->is_size > PA_DBG_STATE_MAX || d->is_tasks_head + 16 > d->is_size) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const uint32_t hdrs[] = {16, 32};
  for (size_t i = 0; i < 2; i++) {
    struct pa_dbg d;
    char why[160];
    why[0] = '\0';
    if (pa_dbg_parse(data, size, hdrs[i], &d, why, sizeof(why)) == 0)
      check(&d, hdrs[i]);
    else if (!why[0])
      abort();
  }
  return 0;
}
