/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared body of the agent-level isolation test plugins (ta_ok, ta_crash,
 * ta_hang). Each matches one executable name and, per target and snapshot,
 * emits "ta_main;<name>_work" counted once per tick, so a test knows exactly
 * which pids each plugin covered. The fault (crash / hang) happens in
 * snapshot(), only while the file named by option fault_file does not exist
 * yet, so a restarted worker behaves and the next session has data again.
 * The file lies in the plugin's runtime directory (the only place a worker
 * may write): a relative fault_file is taken from there.
 */
#ifndef TA_COMMON_H
#define TA_COMMON_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "polyprof/plugin.h"

#ifndef TA_NAME
#error "define TA_NAME and TA_EXE before including"
#endif
#ifndef TA_TICK_FN
#define TA_TICK_FN ta_tick /* a plugin may wrap the shared tick (ta_tickhang) */
#endif

enum { TA_FAULT_NONE, TA_FAULT_CRASH, TA_FAULT_HANG, TA_FAULT_SYSCALL };

struct ta_state {
  const struct pp_host *host;
  const char *fault_file;
  struct pp_target targets[64];
  uint64_t ticks[64];
  size_t n;
};

static const char *const ta_exe[] = {TA_EXE, NULL};
static const struct pp_option ta_options[] = {
    {.key = "fault_file", .type = PP_OPT_STRING, .help = "fault only while this file is absent"},
};

static int ta_init(const struct pp_host *host, void **state) {
  struct ta_state *s = calloc(1, sizeof(*s));
  if (!s) return -ENOMEM;
  s->host = host;
  const char *v;
  if (host->config_string(host, "fault_file", &v) == 0 && v && *v) s->fault_file = v;
  *state = s;
  return 0;
}

static int ta_start(void *state, struct pp_session *session) {
  (void)state;
  session->tick_interval_ns = 50 * 1000000ull;
  return 0;
}

static int ta_add_targets(void *state, const struct pp_target *t, size_t n) {
  struct ta_state *s = state;
  for (size_t i = 0; i < n && s->n < 64; i++)
    s->targets[s->n++] = t[i];
  return 0;
}

static int ta_tick(void *state, uint64_t now) {
  struct ta_state *s = state;
  (void)now;
  for (size_t i = 0; i < s->n; i++)
    s->ticks[i]++;
  return 0;
}

/* Returns true the first time only (the marker file records it). */
/* fault_file + suffix, a relative one in the runtime directory; 0 or -1
 * if it does not fit. */
static int ta_fault_path(const struct ta_state *s, const char *suffix, char *path, size_t cap) {
  const char *dir = s->fault_file[0] == '/' ? NULL : s->host->scratch_dir(s->host);
  int n = dir ? snprintf(path, cap, "%s/%s%s", dir, s->fault_file, suffix)
              : snprintf(path, cap, "%s%s", s->fault_file, suffix);
  return n > 0 && (size_t)n < cap ? 0 : -1;
}

static int ta_fault_now(struct ta_state *s) {
  if (!s->fault_file) return 1;
  char path[4096];
  if (ta_fault_path(s, "", path, sizeof(path)) < 0) return 0;
  int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0600);
  if (fd < 0) return 0;
  close(fd);
  return 1;
}

static void ta_fault(struct ta_state *s, int fault) {
  if (fault == TA_FAULT_NONE || !ta_fault_now(s)) return;
  if (fault == TA_FAULT_CRASH) {
    volatile uintptr_t addr = 16; /* a real invalid access, as a buggy plugin makes */
    *(volatile int *)addr = 1;
  }
  if (fault == TA_FAULT_SYSCALL) {
    /* A harmless query, but outside every allow-list: the worker must be
     * stopped for it. */
    syscall(SYS_personality, 0xffffffffUL);
  }
  for (;;)
    pause();
}

static int ta_snapshot_impl(void *state, struct pp_sink *sink, int fault) {
  struct ta_state *s = state;
  ta_fault(s, fault);
  for (size_t i = 0; i < s->n; i++) {
    if (!s->ticks[i]) continue;
    struct pp_frame f[2] = {{.name = TA_NAME "_work", .kind = PP_FRAME_NATIVE},
                            {.name = "ta_main", .kind = PP_FRAME_NATIVE}};
    struct pp_sample smp = {
        .pid = s->targets[i].pid, .frames = f, .nframes = 2, .count = s->ticks[i]};
    s->host->emit(sink, &smp);
    s->ticks[i] = 0;
  }
  return 0;
}

static int ta_stop(void *state) {
  (void)state;
  return 0;
}

static void ta_fini(void *state) {
  free(state);
}

#define TA_DESCRIPTOR(snapshot_fn)                                             \
  static const struct pp_plugin ta_descriptor = {                              \
      PP_PLUGIN_HEADER,                                                        \
      .name = TA_NAME,                                                         \
      .version = "0",                                                          \
      .description = "agent isolation test plugin",                            \
      .capabilities = PP_CAP_RUNTIME | PP_CAP_PERFLESS | PP_CAP_NEEDS_NOTHING, \
      .match_exe = ta_exe,                                                     \
      .options = ta_options,                                                   \
      .option_count = 1,                                                       \
      .init = ta_init,                                                         \
      .start = ta_start,                                                       \
      .add_targets = ta_add_targets,                                           \
      .tick = TA_TICK_FN,                                                      \
      .snapshot = snapshot_fn,                                                 \
      .stop = ta_stop,                                                         \
      .fini = ta_fini,                                                         \
  };                                                                           \
  PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void) {              \
    return &ta_descriptor;                                                     \
  }

#endif
