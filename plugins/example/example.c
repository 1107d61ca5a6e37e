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
 * the plugin ABI (include/polyprof/plugin.h): declared options and modes,
 * declarative target matching, a host-driven tick, a bounded aggregation
 * table with no allocation per sample, per-pid metadata / status / appid,
 * counters, and logging through the host. docs/plugin-sdk.md walks through it.
 *
 * It depends on nothing but libc and the public header, as a third-party
 * plugin would.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "polyprof/plugin.h"

#define COMM_LEN 16
#define WCHAN_LEN 64

/* One aggregated observation: this thread name of this pid was in this state
 * waiting in this kernel function, `count` times. */
struct entry {
  uint32_t pid;
  uint32_t used;
  char comm[COMM_LEN];
  char wchan[WCHAN_LEN];
  char state;
  uint64_t count;
};

struct target {
  uint32_t pid;
  uint64_t start_time;
  uint32_t threads; /* seen at the last tick */
  int error;        /* errno of the last failed read, 0 if fine */
};

struct state {
  const struct pp_host *host;
  bool include_running;
  bool tag_appid;
  char only_states[32]; /* empty: every state */
  int64_t frequency;

  struct entry *table; /* open addressing, capacity = max_entries (power of two) */
  size_t cap, used;
  uint64_t dropped, samples, vanished;

  struct target *targets;
  size_t ntargets, targets_cap;
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

#define LOG(st, lvl, ...) (st)->host->log((st)->host, (lvl), __VA_ARGS__)

static int example_init(const struct pp_host *host, void **out) {
  if (host->abi_major != PP_ABI_MAJOR || !PP_HOST_HAS(host, scratch_dir)) return -ENOTSUP;
  struct state *st = calloc(1, sizeof(*st));
  if (!st) return -ENOMEM;
  st->host = host;

  int b = 1;
  if (host->config_bool(host, "include_running", &b) == 0) st->include_running = b;
  b = 0;
  if (host->config_bool(host, "tag_appid", &b) == 0) st->tag_appid = b;
  const char *const *items = NULL;
  size_t n = 0;
  if (host->config_list(host, "only_states", &items, &n) == 0) {
    for (size_t i = 0; i < n && i + 1 < sizeof(st->only_states); i++)
      st->only_states[i] = items[i][0];
  }
  int64_t max_entries = 65536;
  host->config_int(host, "max_entries", &max_entries);
  host->config_int(host, "frequency", &st->frequency);

  st->cap = 16;
  while (st->cap < (size_t)max_entries)
    st->cap *= 2;
  st->table = calloc(st->cap, sizeof(*st->table));
  if (!st->table) {
    free(st);
    return -ENOMEM;
  }
  LOG(st, PP_LOG_DEBUG, "aggregation table: %zu entries (%zu KiB)", st->cap,
      st->cap * sizeof(struct entry) / 1024);
  *out = st;
  return 0;
}

static int example_start(void *state, struct pp_session *session) {
  struct state *st = state;
  if (st->frequency > 0) session->tick_interval_ns = 1000000000ull / (uint64_t)st->frequency;
  LOG(st, PP_LOG_INFO, "sampling thread states every %.1f ms (mode %s)",
      session->tick_interval_ns / 1e6, session->mode ? session->mode : "states");
  return 0;
}

static int example_add_targets(void *state, const struct pp_target *t, size_t n) {
  struct state *st = state;
  for (size_t i = 0; i < n; i++) {
    /* the host may re-announce a pid that was reused by a new process */
    size_t j;
    for (j = 0; j < st->ntargets; j++)
      if (st->targets[j].pid == t[i].pid) break;
    if (j == st->ntargets) {
      if (st->ntargets == st->targets_cap) {
        size_t ncap = st->targets_cap ? st->targets_cap * 2 : 64;
        struct target *g = realloc(st->targets, ncap * sizeof(*g));
        if (!g) return -ENOMEM;
        st->targets = g;
        st->targets_cap = ncap;
      }
      st->ntargets++;
    }
    st->targets[j] = (struct target){.pid = t[i].pid, .start_time = t[i].start_time};
  }
  return 0;
}

static uint64_t hash_entry(uint32_t pid, const char *comm, char state, const char *wchan) {
  uint64_t h = 1469598103934665603ull ^ pid;
  for (const char *p = comm; *p; p++)
    h = (h ^ (unsigned char)*p) * 1099511628211ull;
  h = (h ^ (unsigned char)state) * 1099511628211ull;
  for (const char *p = wchan; *p; p++)
    h = (h ^ (unsigned char)*p) * 1099511628211ull;
  return h;
}

static void count(struct state *st, uint32_t pid, const char *comm, char state, const char *wchan) {
  size_t mask = st->cap - 1;
  for (size_t pos = hash_entry(pid, comm, state, wchan) & mask, probes = 0; probes < st->cap;
       pos = (pos + 1) & mask, probes++) {
    struct entry *e = &st->table[pos];
    if (!e->used) {
      /* keep the table at most 3/4 full so probes stay short */
      if (st->used + 1 > st->cap / 4 * 3) break;
      e->used = 1;
      e->pid = pid;
      e->state = state;
      snprintf(e->comm, sizeof(e->comm), "%s", comm);
      snprintf(e->wchan, sizeof(e->wchan), "%s", wchan);
      e->count = 1;
      st->used++;
      return;
    }
    if (e->pid == pid && e->state == state && strcmp(e->comm, comm) == 0 &&
        strcmp(e->wchan, wchan) == 0) {
      e->count++;
      return;
    }
  }
  st->dropped++;
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
  count(st, pid, comm, state, wchan);
  st->samples++;
}

static void sample_target(struct state *st, struct target *t) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/task", t->pid);
  DIR *d = opendir(path);
  if (!d) {
    t->error = errno;
    return;
  }
  t->error = 0;
  t->threads = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
    sample_thread(st, t->pid, de->d_name);
    t->threads++;
  }
  closedir(d);
}

static int example_tick(void *state, uint64_t now_ns) {
  struct state *st = state;
  for (size_t i = 0; i < st->ntargets;) {
    struct target *t = &st->targets[i];
    uint64_t start = 0;
    /* identity check: a vanished or reused pid is dropped, never sampled */
    if (st->host->proc_start_time(st->host, t->pid, &start) < 0 || start != t->start_time) {
      st->vanished++;
      st->targets[i] = st->targets[--st->ntargets];
      continue;
    }
    sample_target(st, t);
    i++;
  }
  return 0;
}

static int example_snapshot(void *state, struct pp_sink *sink) {
  struct state *st = state;
  const struct pp_host *h = st->host;
  for (size_t i = 0; i < st->cap; i++) {
    struct entry *e = &st->table[i];
    if (!e->used) continue;
    char state_frame[32];
    snprintf(state_frame, sizeof(state_frame), "[thread-state %c]", e->state);
    struct pp_frame frames[2]; /* leaf first */
    uint32_t n = 0;
    if (e->wchan[0]) frames[n++] = (struct pp_frame){.name = e->wchan, .kind = PP_FRAME_KERNEL};
    frames[n++] = (struct pp_frame){.name = state_frame, .kind = PP_FRAME_PSEUDO};
    struct pp_sample s = {
        .pid = e->pid, .comm = e->comm, .frames = frames, .nframes = n, .count = e->count};
    h->emit(sink, &s);
  }
  for (size_t i = 0; i < st->ntargets; i++) {
    struct target *t = &st->targets[i];
    if (t->error) {
      char reason[96];
      snprintf(reason, sizeof(reason), "cannot read /proc/%u/task: %s", t->pid, strerror(t->error));
      h->set_pid_status(sink, t->pid, PP_PID_ERROR, reason);
      continue;
    }
    char meta[64];
    snprintf(meta, sizeof(meta), "{\"example_threads\": %u}", t->threads);
    h->set_app_metadata(sink, t->pid, meta);
    if (st->tag_appid) {
      char comm[64], appid[96];
      if (h->proc_comm(h, t->pid, comm, sizeof(comm)) == 0) {
        snprintf(appid, sizeof(appid), "example: %s", comm);
        h->set_appid(sink, t->pid, appid);
      }
    }
  }
  h->add_counter(sink, "samples", st->samples);
  h->add_counter(sink, "dropped_entries", st->dropped);
  h->add_counter(sink, "vanished_targets", st->vanished);
  if (st->dropped)
    LOG(st, PP_LOG_WARNING, "aggregation table full: %llu observations dropped (max_entries)",
        (unsigned long long)st->dropped);
  memset(st->table, 0, st->cap * sizeof(*st->table));
  st->used = 0;
  st->samples = st->dropped = st->vanished = 0;
  return 0;
}

static int example_stop(void *state) {
  struct state *st = state;
  st->ntargets = 0;
  return 0;
}

static void example_fini(void *state) {
  struct state *st = state;
  if (!st) return;
  free(st->table);
  free(st->targets);
  free(st);
}

static const struct pp_plugin descriptor = {
    PP_PLUGIN_HEADER,
    .name = "example",
    .version = "1.0.0",
    .description = "thread states and kernel wait channels of every process (SDK sample)",
    .capabilities = PP_CAP_RUNTIME | PP_CAP_PERFLESS,
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
