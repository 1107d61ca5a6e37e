/*
 * A third-party plugin as a user of polyprof-dev writes it: built by
 * test_debian_packages.py outside the tree with only the installed SDK
 *   gcc $(pkg-config --cflags polyprof-plugin) -shared -fPIC -o oot_probe.so
 * It matches `sleep` processes and reports one stack per target and
 * snapshot whose leaf, "oot_probe_marker", the test looks for in the
 * installed agent's profile.
 */
#include <errno.h>
#include <stdlib.h>

#include <polyprof/plugin.h>

#define MAX_TARGETS 16

struct oot_state {
  const struct pp_host *host;
  struct pp_target targets[MAX_TARGETS];
  size_t ntargets;
};

static int oot_init(const struct pp_host *host, void **state) {
  struct oot_state *s = calloc(1, sizeof(*s));
  if (!s) return -ENOMEM;
  s->host = host;
  *state = s;
  return 0;
}

static int oot_start(void *state, struct pp_session *session) {
  return 0;
}

static int oot_add_targets(void *state, const struct pp_target *t, size_t n) {
  struct oot_state *s = state;
  for (size_t i = 0; i < n && s->ntargets < MAX_TARGETS; i++)
    s->targets[s->ntargets++] = t[i];
  return 0;
}

static int oot_snapshot(void *state, struct pp_sink *sink) {
  struct oot_state *s = state;
  struct pp_frame frames[] = {{"oot_probe_marker", NULL, 0, PP_FRAME_NATIVE},
                              {"oot_probe_root", NULL, 0, PP_FRAME_NATIVE}};
  for (size_t i = 0; i < s->ntargets; i++) {
    char comm[64] = "";
    if (s->host->proc_comm(s->host, s->targets[i].pid, comm, sizeof(comm)) != 0) continue;
    struct pp_sample smp = {.pid = s->targets[i].pid,
                            .tid = s->targets[i].pid,
                            .comm = comm,
                            .frames = frames,
                            .nframes = 2,
                            .count = 3};
    s->host->emit(sink, &smp);
  }
  return 0;
}

static int oot_stop(void *state) {
  return 0;
}

static void oot_fini(void *state) {
  free(state);
}

static const char *const exe_patterns[] = {"sleep", NULL};

static const struct pp_plugin plugin = {
    PP_PLUGIN_HEADER,
    .name = "oot_probe",
    .version = "0.1",
    .description = "out-of-tree plugin built from polyprof-dev",
    .capabilities = PP_CAP_RUNTIME | PP_CAP_PERFLESS | PP_CAP_NEEDS_NOTHING,
    .match_exe = exe_patterns,
    .init = oot_init,
    .start = oot_start,
    .add_targets = oot_add_targets,
    .snapshot = oot_snapshot,
    .stop = oot_stop,
    .fini = oot_fini,
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void) {
  return &plugin;
}
