/* SPDX-License-Identifier: Apache-2.0 */
/*
 * polyprof example plugin: thread states and kernel wait channels.
 *
 * For each target process, every tick reads each thread's state
 * (/proc/PID/task/TID/stat) and wait channel (/proc/PID/task/TID/wchan) and
 * counts the pair, producing stacks such as
 *
 *   nginx;[thread-state S];do_epoll_wait_[k]
 *
 * It needs neither perf nor ptrace attach, which makes it a good sample of
 * a runtime plugin built on the kit (include/polyprof/kit.h), exactly as a
 * third-party plugin is: declared options whose defaults live only in the
 * options table, declarative target matching, the kit's target table (one
 * lifecycle: attach, retry, exec, exit, statuses), its stack table (bounded,
 * no allocation per sample once warm), per-pid metadata and appid, counters,
 * and logging through the host. docs/plugin-sdk.md walks through it.
 *
 * It builds from the installed polyprof-dev alone:
 *   cc -shared -fPIC example.c $(pkg-config --cflags --libs polyprof-plugin)
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "polyprof/kit.h"

#define COMM_LEN 16
#define WCHAN_LEN 64

/* What the plugin keeps per target process (the table's t->data). */
struct target {
  uint32_t threads; /* seen at the last tick */
  int error;        /* errno of the last failed read, 0 if fine */
};

struct state {
  const struct pp_host *host;
  bool include_running;
  bool tag_appid;
  char only_states[32]; /* empty: every state */
  struct pp_target_table *targets;
  struct pp_stack_table *stacks;
  uint64_t samples;
};

static const char *const mode_choices[] = {"states", NULL};
static const char *const match_all[] = {"*", NULL};

static const struct pp_option options[] = {
    /* opt-in: it matches every process, so when on it would replace perf's
     * stacks everywhere; "disabled" as the default makes it off until asked */
    {.key = "mode",
     .type = PP_OPT_ENUM,
     .default_value = "disabled",
     .choices = mode_choices,
     .help = "what to sample: 'states' (thread state + wait channel)"},
    {.key = "include_running",
     .type = PP_OPT_BOOL,
     .default_value = "true",
     .help = "also count running threads (state R)"},
    {.key = "only_states",
     .type = PP_OPT_LIST,
     .default_value = NULL,
     .help = "count only these states, e.g. [D, S]; empty: all"},
    {.key = "max_entries",
     .type = PP_OPT_INT,
     .default_value = "65536",
     .min = 16,
     .max = 1 << 22,
     .help = "bound of the aggregation table; overflow is counted as dropped"},
    {.key = "frequency",
     .type = PP_OPT_INT,
     .default_value = "0",
     .min = 0,
     .max = 1000,
     .help = "own sampling rate in Hz; 0: the session frequency"},
    {.key = "tag_appid",
     .type = PP_OPT_BOOL,
     .default_value = "false",
     .help = "set the appid of each process to 'example: <comm>'"},
};

/* The target table's attach(): a closer look at a process it was handed.
 * Everything it needs is readable /proc, so the only failure is a process
 * that is already gone (-ESRCH: the table forgets it). */
static int example_attach(void *plugin, struct pp_target_entry *t) {
  (void)plugin;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/task", t->pid);
  if (access(path, R_OK) != 0) return errno == ENOENT ? -ESRCH : -errno;
  t->data = calloc(1, sizeof(struct target));
  return t->data ? 0 : -ENOMEM;
}

static void example_release(void *plugin, struct pp_target_entry *t) {
  (void)plugin;
  free(t->data); /* nothing else is held per target: no descriptor stays open */
}

static const struct pp_target_ops target_ops = {example_attach, example_release};

static int example_init(const struct pp_host *host, void **out) {
  if (host->abi_major != PP_ABI_MAJOR || !PP_HOST_HAS(host, scratch_dir)) return -ENOTSUP;
  struct state *st = calloc(1, sizeof(*st));
  if (!st) return -ENOMEM;
  st->host = host;
  st->include_running = pp_opt_bool(host, PP_OPTIONS(options), "include_running");
  st->tag_appid = pp_opt_bool(host, PP_OPTIONS(options), "tag_appid");
  const char *const *items = NULL;
  size_t n = 0;
  if (host->config_list(host, "only_states", &items, &n) == 0) {
    for (size_t i = 0; i < n && i + 1 < sizeof(st->only_states); i++)
      st->only_states[i] = items[i][0];
  }
  struct pp_stack_table_limits lim = {
      .max_stacks = (size_t)pp_opt_int(host, PP_OPTIONS(options), "max_entries"), .max_depth = 2};
  st->stacks = pp_stack_table_new(&lim);
  st->targets = pp_target_table_new(host, &target_ops, st, NULL);
  if (!st->stacks || !st->targets) {
    pp_stack_table_free(st->stacks);
    pp_target_table_free(st->targets);
    free(st);
    return -ENOMEM;
  }
  PP_DEBUG(host, "aggregation table: at most %zu stacks", lim.max_stacks);
  *out = st;
  return 0;
}

static int example_start(void *state, struct pp_session *session) {
  struct state *st = state;
  int64_t hz = pp_opt_int(st->host, PP_OPTIONS(options), "frequency");
  if (hz > 0) session->tick_interval_ns = 1000000000ull / (uint64_t)hz;
  PP_INFO(st->host, "sampling thread states every %.1f ms (mode %s)",
          session->tick_interval_ns / 1e6, session->mode ? session->mode : "states");
  return 0;
}

static int example_add_targets(void *state, const struct pp_target *t, size_t n) {
  struct state *st = state;
  return pp_target_table_add(st->targets, t, n);
}

/* Reads a small /proc file into buf; returns bytes or -errno. */
static ssize_t read_small(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  ssize_t n = read(fd, buf, cap - 1);
  int e = errno;
  close(fd);
  if (n < 0) return -e;
  buf[n] = '\0';
  return n;
}

/* Samples one thread. Thread names are whatever the program set: copy them
 * bounded and never trust the text to be well formed. */
static void sample_thread(struct state *st, uint32_t pid, const char *tid) {
  char path[96], stat[512], wchan[WCHAN_LEN];
  snprintf(path, sizeof(path), "/proc/%u/task/%s/stat", pid, tid);
  if (read_small(path, stat, sizeof(stat)) <= 0) return; /* thread just exited */
  char *open_paren = strchr(stat, '(');
  char *close_paren = strrchr(stat, ')');
  if (!open_paren || !close_paren || close_paren < open_paren || close_paren[1] != ' ') return;
  char comm[COMM_LEN];
  size_t clen = (size_t)(close_paren - open_paren - 1);
  if (clen >= sizeof(comm)) clen = sizeof(comm) - 1;
  memcpy(comm, open_paren + 1, clen);
  comm[clen] = '\0';
  char state = close_paren[2];
  if (state == 'R' && !st->include_running) return;
  if (st->only_states[0] && !strchr(st->only_states, state)) return;

  snprintf(path, sizeof(path), "/proc/%u/task/%s/wchan", pid, tid);
  if (read_small(path, wchan, sizeof(wchan)) < 0 || strcmp(wchan, "0") == 0) wchan[0] = '\0';
  char state_frame[32];
  snprintf(state_frame, sizeof(state_frame), "[thread-state %c]", state);
  struct pp_frame frames[2]; /* leaf first */
  uint32_t n = 0;
  if (wchan[0]) frames[n++] = (struct pp_frame){.name = wchan, .kind = PP_FRAME_KERNEL};
  frames[n++] = (struct pp_frame){.name = state_frame, .kind = PP_FRAME_PSEUDO};
  pp_stack_table_add(st->stacks, pid, 0, comm, frames, n, 1);
  st->samples++;
}

static void sample_target(struct state *st, struct pp_target_entry *e) {
  struct target *t = e->data;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/task", e->pid);
  DIR *d = opendir(path);
  if (!d) {
    t->error = errno;
    if (errno == ENOENT) pp_target_table_gone(st->targets, e);
    return;
  }
  t->error = 0;
  t->threads = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
    sample_thread(st, e->pid, de->d_name);
    t->threads++;
  }
  closedir(d);
}

static int example_tick(void *state, uint64_t now_ns) {
  struct state *st = state;
  pp_target_table_poll(st->targets, now_ns);
  struct pp_target_entry *e;
  PP_TARGETS_FOREACH(st->targets, e, PP_TARGET_ATTACHED) sample_target(st, e);
  return 0;
}

static int example_snapshot(void *state, struct pp_sink *sink) {
  struct state *st = state;
  const struct pp_host *h = st->host;
  uint64_t dropped = pp_stack_table_dropped(st->stacks);
  pp_stack_table_emit(st->stacks, h, sink);
  struct pp_target_entry *e;
  PP_TARGETS_FOREACH(st->targets, e, PP_TARGET_ATTACHED) {
    struct target *t = e->data;
    if (t->error) {
      char reason[96];
      snprintf(reason, sizeof(reason), "cannot read /proc/%u/task: %s", e->pid, strerror(t->error));
      h->set_pid_status(sink, e->pid, PP_PID_ERROR, reason);
      continue;
    }
    char meta[64];
    snprintf(meta, sizeof(meta), "{\"example_threads\": %u}", t->threads);
    h->set_app_metadata(sink, e->pid, meta);
    if (st->tag_appid) {
      char comm[64], appid[96];
      if (h->proc_comm(h, e->pid, comm, sizeof(comm)) == 0) {
        snprintf(appid, sizeof(appid), "example: %s", comm);
        h->set_appid(sink, e->pid, appid);
      }
    }
  }
  /* statuses of the targets not profiled, exits, counters */
  pp_target_table_report(st->targets, sink);
  h->add_counter(sink, "samples", st->samples);
  if (dropped)
    PP_WARNING(h, "aggregation table full: %llu observations dropped (max_entries)",
               (unsigned long long)dropped);
  st->samples = 0;
  return 0;
}

static int example_stop(void *state) {
  (void)state;
  return 0;
}

static void example_fini(void *state) {
  struct state *st = state;
  if (!st) return;
  pp_target_table_free(st->targets);
  pp_stack_table_free(st->stacks);
  free(st);
}

static const struct pp_plugin descriptor = {
    PP_PLUGIN_HEADER,
    .name = "example",
    .version = "1.1.0",
    .description = "thread states and kernel wait channels of every process (SDK sample)",
    /* ptrace read access: the wait channel of a process more privileged than
     * the worker (a root daemon) reads as "0" without CAP_SYS_PTRACE */
    .capabilities = PP_CAP_RUNTIME | PP_CAP_PERFLESS | PP_CAP_NEEDS_PTRACE,
    .match_exe = match_all,
    .match_maps = NULL,
    .options = options,
    .option_count = sizeof(options) / sizeof(options[0]),
    .init = example_init,
    .start = example_start,
    .add_targets = example_add_targets,
    .tick = example_tick,
    .snapshot = example_snapshot,
    .stop = example_stop,
    .fini = example_fini,
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void) {
  return &descriptor;
}
