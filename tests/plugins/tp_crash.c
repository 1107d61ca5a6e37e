/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test plugin: crashes with a real SIGSEGV in the call named by option
 * crash_on (init | start | snapshot | tick | never; refuse_init returns
 * -ENOENT from init instead). With crash_once_file
 * set it crashes only if that file does not exist yet (and creates it
 * first), so a restarted worker behaves. Otherwise it emits one stack per
 * target, which proves targets are replayed after a restart.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "polyprof/plugin.h"

struct st {
  const struct pp_host *host;
  char crash_on[16];
  const char *once_file;
  struct pp_target targets[64];
  size_t ntargets;
};

static void maybe_crash(struct st *s, const char *where) {
  if (strcmp(s->crash_on, where) != 0) return;
  if (s->once_file) {
    int fd = open(s->once_file, O_CREAT | O_EXCL | O_WRONLY, 0600);
    if (fd < 0) return; /* already crashed once */
    close(fd);
  }
  /* A genuine invalid access (not raise()): what a buggy plugin does. A
   * non-NULL address so UBSan builds still fault rather than abort. */
  volatile uintptr_t addr = 16;
  *(volatile int *)addr = 1;
}

static int c_init(const struct pp_host *host, void **state) {
  struct st *s = calloc(1, sizeof(*s));
  if (!s) return -ENOMEM;
  s->host = host;
  const char *v;
  strcpy(s->crash_on, "snapshot");
  if (host->config_string(host, "crash_on", &v) == 0)
    strncpy(s->crash_on, v, sizeof(s->crash_on) - 1);
  if (host->config_string(host, "crash_once_file", &v) == 0) s->once_file = v;
  if (strcmp(s->crash_on, "refuse_init") == 0) {
    /* Not a crash: the polite way to say "cannot run here". */
    host->log(host, PP_LOG_WARNING, "no runtime here");
    free(s);
    return -ENOENT;
  }
  *state = s;
  maybe_crash(s, "init");
  return 0;
}

static int c_start(void *state, struct pp_session *session) {
  session->tick_interval_ns = 5000000;
  maybe_crash(state, "start");
  return 0;
}

static int c_add_targets(void *state, const struct pp_target *t, size_t n) {
  struct st *s = state;
  for (size_t i = 0; i < n && s->ntargets < 64; i++)
    s->targets[s->ntargets++] = t[i];
  return 0;
}

static int c_tick(void *state, uint64_t now) {
  maybe_crash(state, "tick");
  return 0;
}

static int c_snapshot(void *state, struct pp_sink *sink) {
  struct st *s = state;
  maybe_crash(s, "snapshot");
  struct pp_frame f = {"tp_crash_alive", NULL, 0, PP_FRAME_NATIVE};
  for (size_t i = 0; i < s->ntargets; i++) {
    struct pp_sample smp = {.pid = s->targets[i].pid, .frames = &f, .nframes = 1, .count = 1};
    s->host->emit(sink, &smp);
  }
  return 0;
}

static int c_stop(void *state) {
  return 0;
}

static void c_fini(void *state) {
  free(state);
}

static const char *const crash_choices[] = {"never", "init",        "start", "snapshot",
                                            "tick",  "refuse_init", NULL};
static const struct pp_option options[] = {
    {.key = "crash_on", .type = PP_OPT_ENUM, .default_value = "snapshot", .choices = crash_choices},
    {.key = "crash_once_file", .type = PP_OPT_STRING},
};

static const struct pp_plugin plugin = {
    PP_PLUGIN_HEADER,
    .name = "tp_crash",
    .version = "1.0",
    .description = "crashes on purpose",
    .capabilities = PP_CAP_RUNTIME | PP_CAP_NEEDS_NOTHING,
    .options = options,
    .option_count = 2,
    .init = c_init,
    .start = c_start,
    .add_targets = c_add_targets,
    .tick = c_tick,
    .snapshot = c_snapshot,
    .stop = c_stop,
    .fini = c_fini,
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void) {
  return &plugin;
}
