/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test plugin: well-behaved. Declares one option of every type, reads them
 * through the host's config getters at init and puts their values into frame
 * names, so a test can prove the values crossed the process boundary. Each
 * snapshot emits a fixed stack per target plus appid, app metadata, a pid
 * status and counters.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "polyprof/plugin.h"

#define MAX_TARGETS 64

struct tp_state {
  const struct pp_host *host;
  char greeting[64], tags[128], mode[32];
  int64_t depth, extra, extra_len;
  int loud;
  uint64_t ticks, tick_interval;
  struct pp_target targets[MAX_TARGETS];
  size_t ntargets;
  unsigned snapshots;
  int scratch_ok;
};

static int tp_init(const struct pp_host *host, void **state) {
  struct tp_state *s = calloc(1, sizeof(*s));
  if (!s) return -ENOMEM;
  s->host = host;
  const char *str;
  if (host->config_string(host, "greeting", &str) == 0)
    snprintf(s->greeting, sizeof(s->greeting), "%s", str);
  if (host->config_string(host, "mode", &str) == 0) snprintf(s->mode, sizeof(s->mode), "%s", str);
  host->config_int(host, "depth", &s->depth);
  host->config_int(host, "extra_stacks", &s->extra);
  host->config_int(host, "extra_name_len", &s->extra_len);
  host->config_bool(host, "loud", &s->loud);
  const char *const *items;
  size_t n;
  if (host->config_list(host, "tags", &items, &n) == 0) {
    for (size_t i = 0; i < n; i++) {
      size_t len = strlen(s->tags);
      snprintf(s->tags + len, sizeof(s->tags) - len, "%s%s", i ? "+" : "", items[i]);
    }
  }
  /* -ENOENT for an undeclared key is part of the contract. */
  int64_t dummy;
  if (host->config_int(host, "no_such_key", &dummy) != -ENOENT) return -EINVAL;
  /* The private scratch directory exists and is 0700. */
  const char *dir = host->scratch_dir(host);
  struct stat st;
  s->scratch_ok = dir && stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700;
  host->log(host, PP_LOG_INFO, "tp_ok init greeting=%s depth=%lld", s->greeting,
            (long long)s->depth);
  *state = s;
  return 0;
}

static int tp_start(void *state, struct pp_session *session) {
  struct tp_state *s = state;
  s->tick_interval = session->tick_interval_ns;
  session->tick_interval_ns = 1000000; /* 1 ms: the test checks ticks happen */
  return 0;
}

static int tp_add_targets(void *state, const struct pp_target *t, size_t n) {
  struct tp_state *s = state;
  for (size_t i = 0; i < n && s->ntargets < MAX_TARGETS; i++)
    s->targets[s->ntargets++] = t[i];
  return 0;
}

static int tp_tick(void *state, uint64_t now) {
  ((struct tp_state *)state)->ticks++;
  return 0;
}

static int tp_snapshot(void *state, struct pp_sink *sink) {
  struct tp_state *s = state;
  const struct pp_host *h = s->host;
  char leaf[128], depth[32], loud[32], tags[160], mode[64];
  snprintf(leaf, sizeof(leaf), "leaf_%s", s->greeting);
  snprintf(depth, sizeof(depth), "depth_%lld", (long long)s->depth);
  snprintf(loud, sizeof(loud), "loud_%d", s->loud);
  snprintf(tags, sizeof(tags), "tags_%s", s->tags);
  snprintf(mode, sizeof(mode), "mode_%s", s->mode);
  struct pp_frame frames[] = {
      {leaf, "tp_ok.c", 42, PP_FRAME_PYTHON}, {depth, NULL, 0, PP_FRAME_NATIVE},
      {loud, NULL, 0, PP_FRAME_NATIVE},       {tags, NULL, 0, PP_FRAME_NATIVE},
      {mode, NULL, 0, PP_FRAME_NATIVE},       {NULL, NULL, 0, PP_FRAME_NATIVE},
      {"root", NULL, 0, PP_FRAME_KERNEL},
  };
  for (size_t i = 0; i < s->ntargets; i++) {
    uint32_t pid = s->targets[i].pid;
    char comm[64] = "";
    h->proc_comm(h, pid, comm, sizeof(comm));
    struct pp_sample smp = {.pid = pid,
                            .comm = comm,
                            .tid = pid,
                            .frames = frames,
                            .nframes = sizeof(frames) / sizeof(frames[0]),
                            .count = 7};
    h->emit(sink, &smp);
    char appid[64];
    snprintf(appid, sizeof(appid), "appid-%u", pid);
    h->set_appid(sink, pid, appid);
    h->set_app_metadata(sink, pid, "{\"k\":\"v\"}");
    h->set_app_metadata(sink, pid, "{\"n\":1}");
    if (i == 1) h->set_pid_status(sink, pid, PP_PID_ERROR, "tp_ok says no");
  }
  /* Bulk, to make the profile bigger than any socket buffer. */
  for (int64_t i = 0; i < s->extra && s->ntargets; i++) {
    char name[8192];
    int len = snprintf(name, sizeof(name), "extra_%lld", (long long)i);
    while (len < s->extra_len && len < (int)sizeof(name) - 1)
      name[len++] = '.';
    name[len] = 0;
    struct pp_frame f[2] = {{name, "extra.c", (uint32_t)i, PP_FRAME_NATIVE},
                            {"extra_root", NULL, 0, PP_FRAME_NATIVE}};
    struct pp_sample smp = {.pid = s->targets[0].pid, .frames = f, .nframes = 2, .count = 1};
    h->emit(sink, &smp);
  }
  /* A broken sample: refused and counted as invalid_samples. */
  struct pp_frame bad = {"bad", NULL, 0, 999};
  struct pp_sample smp = {.pid = 1, .frames = &bad, .nframes = 1, .count = 1};
  h->emit(sink, &smp);
  h->add_counter(sink, "snapshots", 1);
  h->add_counter(sink, "ticked", s->ticks ? 1 : 0);
  h->add_counter(sink, "scratch_ok", (uint64_t)s->scratch_ok);
  s->snapshots++;
  return 0;
}

static int tp_stop(void *state) {
  return 0;
}

static void tp_fini(void *state) {
  free(state);
}

static const char *const mode_choices[] = {"fast", "slow", NULL};
static const struct pp_option options[] = {
    {.key = "greeting", .type = PP_OPT_STRING, .default_value = "hello", .help = "word"},
    {.key = "depth", .type = PP_OPT_INT, .default_value = "3", .min = 1, .max = 64},
    {.key = "loud", .type = PP_OPT_BOOL, .default_value = "false"},
    {.key = "tags", .type = PP_OPT_LIST, .default_value = "a,b"},
    {.key = "extra_stacks", .type = PP_OPT_INT, .default_value = "0", .min = 0, .max = 10000000},
    {.key = "extra_name_len", .type = PP_OPT_INT, .default_value = "0", .min = 0, .max = 8000},
    {.key = "mode", .type = PP_OPT_ENUM, .default_value = "fast", .choices = mode_choices},
};

static const char *const exe_patterns[] = {"tp_ok_target*", NULL};

static const struct pp_plugin plugin = {
    PP_PLUGIN_HEADER,
    .name = "tp_ok",
    .version = "1.0",
    .description = "well-behaved test plugin",
    .capabilities = PP_CAP_RUNTIME | PP_CAP_NEEDS_NOTHING,
    .match_exe = exe_patterns,
    .options = options,
    .option_count = sizeof(options) / sizeof(options[0]),
    .init = tp_init,
    .start = tp_start,
    .add_targets = tp_add_targets,
    .tick = tp_tick,
    .snapshot = tp_snapshot,
    .stop = tp_stop,
    .fini = tp_fini,
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void) {
  return &plugin;
}
