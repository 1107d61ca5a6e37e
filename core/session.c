/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's run loop (see session.h).
 */
#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "cloud_metadata.h"
#include "k8s_labels.h"
#include "log.h"
#include "output/files.h"
#include "pidfile.h"
#include "pidns.h"
#include "polyprof/kit/proc.h"
#include "proc_events.h"
#include "profile_mode.h"
#include "rootless.h"
#include "sd_notify.h"
#include "upload/uploader.h"

/* --- signals ------------------------------------------------------------ */

static volatile sig_atomic_t stop_requested;
static volatile sig_atomic_t reload_requested;
static int signal_pipe[2] = {-1, -1};
static volatile sig_atomic_t forward_pidfd = -1;

static void on_signal(int sig, siginfo_t *info, void *uctx) {
  (void)uctx;
  int saved = errno;
  /* a pidfd names the process itself: never a recycled pid */
  if (forward_pidfd >= 0 && (sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT)) {
    syscall(SYS_pidfd_send_signal, (int)forward_pidfd, sig, NULL, 0);
  } else if (sig == SIGINT && forward_pidfd >= 0) {
    /* Ctrl-C: the terminal (SI_KERNEL) gave the program its own already;
     * one sent to polyprof alone (kill, SI_USER) is passed on. Either way
     * profiling stops and the profile is printed. */
    if (info && info->si_code != SI_KERNEL)
      syscall(SYS_pidfd_send_signal, (int)forward_pidfd, sig, NULL, 0);
    stop_requested = sig;
  } else if (sig == SIGHUP)
    reload_requested = 1;
  else if (sig != SIGCHLD) /* only a wake-up: a one-program run looks at its child */
    stop_requested = sig;
  if (signal_pipe[1] >= 0) {
    char c = 0;
    ssize_t r = write(signal_pipe[1], &c, 1);
    (void)r; /* a full pipe already wakes the loop */
  }
  errno = saved;
}

static int install_signals(const struct pp_agent_hooks *hooks) {
  if (signal_pipe[0] < 0 && pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) < 0) return -errno;
  bool child_wakes = hooks != NULL;
  if (hooks && hooks->forward_signals) forward_pidfd = hooks->forward_pidfd;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  /* no SA_RESTART: poll() must return so the loop notices at once */
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  if (child_wakes) sigaction(SIGCHLD, &sa, NULL);
  if (forward_pidfd >= 0) sigaction(SIGQUIT, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  if (hooks) {
    /* run blocks them from its fork until here (cmd_run.c): one that came
     * in between is delivered, and passed on, now */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGQUIT);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
  }
  return 0;
}

static void drain_signal_pipe(void) {
  char buf[64];
  while (read(signal_pipe[0], buf, sizeof(buf)) > 0) {
  }
}

/* --- clocks ------------------------------------------------------------- */

static uint64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* --- plugins ------------------------------------------------------------ */

int pp_agent_load_plugins(struct pp_config *cfg, struct pp_plugin_info **infos, size_t *count,
                          char err[PP_MAX_ERR]) {
  *infos = NULL;
  *count = 0;
  int rc = pp_registry_scan(cfg->plugin_dir, infos, count);
  if (rc < 0) {
    snprintf(err, PP_MAX_ERR, "plugin directory %s: %s", cfg->plugin_dir, strerror(-rc));
    return -1;
  }
  const char *loaded[PP_TARGETS_MAX_PLUGINS + 1];
  size_t nloaded = 0;
  for (size_t i = 0; i < *count; i++) {
    struct pp_plugin_info *pi = &(*infos)[i];
    if (pi->error) continue;
    if (pp_config_bind_plugin(cfg, &pi->desc, err) < 0) return -1;
    if (nloaded < PP_TARGETS_MAX_PLUGINS) loaded[nloaded++] = pi->desc.name;
  }
  loaded[nloaded] = NULL;
  if (pp_config_check_orphans(cfg, loaded, err) > 0) return -1;
  for (size_t i = 0; i < cfg->section_count; i++) {
    const char *name = cfg->sections[i].name;
    bool is_loaded = false;
    for (size_t j = 0; j < nloaded; j++)
      is_loaded |= strcmp(loaded[j], name) == 0;
    if (!is_loaded)
      pp_log(PP_LOG_INFO, "polyprof", "%s: plugin not installed, section ignored", name);
  }
  return 0;
}

/* --pids restricts runtime plugins through target matching; a system-wide
 * plugin samples everything itself, so it gets the list as its own "pids"
 * option (unless its section sets one explicitly). */
static void pass_pid_filter(struct pp_config *cfg, const char *plugin) {
  if (!cfg->pid_count) return;
  for (size_t i = 0; i < cfg->plugin_count; i++) {
    struct pp_plugin_config *pc = &cfg->plugins[i];
    if (strcmp(pc->name, plugin) != 0) continue;
    for (size_t k = 0; k < pc->option_count; k++) {
      struct pp_bound_option *bo = &pc->options[k];
      if (!bo->opt || strcmp(bo->opt->key, "pids") != 0 || bo->opt->type != PP_OPT_LIST) continue;
      if (bo->item_count) return; /* configured explicitly */
      char **items = calloc(cfg->pid_count + 1, sizeof(char *));
      if (!items) return;
      for (size_t j = 0; j < cfg->pid_count; j++) {
        if (asprintf(&items[j], "%u", cfg->pids[j]) < 0) items[j] = NULL;
      }
      if (bo->items) {
        for (char **it = bo->items; *it; it++)
          free(*it);
        free(bo->items);
      }
      bo->items = items;
      bo->item_count = cfg->pid_count;
      return;
    }
  }
}

/* Every process the scan looks at, runtime or not, is remembered while it
 * is alive: its samples must name it even if it exits before the session
 * is written. */
static void remember_process(void *ctx, uint32_t pid, uint64_t start_time) {
  struct pp_agent *a = ctx;
  pp_enrich_remember(a->enricher, pid, start_time);
}

static int setup_plugins(struct pp_agent *a) {
  const struct pp_config *cfg = a->cfg;
  a->plugins = calloc(a->ninfos ? a->ninfos : 1, sizeof(*a->plugins));
  if (!a->plugins) return -ENOMEM;
  const struct pp_plugin *descs[PP_TARGETS_MAX_PLUGINS];
  for (size_t i = 0; i < a->ninfos && a->nplugins < PP_TARGETS_MAX_PLUGINS; i++) {
    const struct pp_plugin_info *pi = &a->infos[i];
    if (pi->error) continue;
    /* --mode: wall knobs set, types it cannot give said (profile_mode.h) */
    pp_profile_types_apply(a->cfg, pi->desc.name,
                           (pi->desc.capabilities & PP_CAP_SYSTEM_WIDE) != 0);
    const struct pp_plugin_config *pc = pp_config_plugin(cfg, pi->desc.name);
    if (!pc || !pc->enabled) {
      pp_log(PP_LOG_INFO, "polyprof", "%s: disabled (%s)", pi->desc.name,
             pc && pc->disabled_by ? pc->disabled_by : "configuration");
      continue;
    }
    struct agent_plugin *ap = &a->plugins[a->nplugins];
    ap->info = pi;
    ap->pcfg = pc;
    ap->system_wide = (pi->desc.capabilities & PP_CAP_SYSTEM_WIDE) != 0;
    if (ap->system_wide) pass_pid_filter(a->cfg, pi->desc.name);
    ap->snap = pp_profile_new();
    const char *iso = pc->isolation ? pc->isolation : cfg->isolation;
    struct pp_worker_opts wo = {
        .inline_mode = iso && strcmp(iso, "inline") == 0,
        .memory_limit_mb = cfg->worker_memory_limit_mb,
        .timeout_s = cfg->worker_timeout_s,
        .backoff_max_s = cfg->worker_restart_backoff_max_s,
        .worker_path = cfg->worker_path,
    };
    ap->worker = pp_worker_new(pi, pc, &wo);
    if (!ap->snap || !ap->worker) return -ENOMEM;
    descs[a->nplugins] = &pi->desc;
    a->nplugins++;
  }
  const char *type_names[PP_TARGETS_MAX_PLUGINS];
  bool type_sw[PP_TARGETS_MAX_PLUGINS];
  for (size_t i = 0; i < a->nplugins; i++) {
    type_names[i] = a->plugins[i].info->desc.name;
    type_sw[i] = a->plugins[i].system_wide;
  }
  pp_profile_types_check_sources(cfg, type_names, type_sw, a->nplugins);
  a->targets = pp_targets_new(descs, a->nplugins);
  if (!a->targets) return -ENOMEM;
  if (cfg->pid_count) pp_targets_set_filter(a->targets, cfg->pids, cfg->pid_count);
  pp_targets_set_observer(a->targets, remember_process, a);
  return 0;
}

static void teardown_plugins(struct pp_agent *a) {
  for (size_t i = 0; i < a->nplugins; i++) {
    struct agent_plugin *ap = &a->plugins[i];
    if (ap->worker) {
      pp_worker_stop(ap->worker);
      pp_worker_free(ap->worker);
    }
    pp_profile_free(ap->snap);
    free(ap->pending);
  }
  free(a->plugins);
  a->plugins = NULL;
  a->nplugins = 0;
  pp_targets_free(a->targets);
  a->targets = NULL;
  pp_registry_free(a->infos, a->ninfos);
  a->infos = NULL;
  a->ninfos = 0;
}

/* Keeps the agent's own processes out of every target list. */
static void update_exclusions(struct pp_agent *a) {
  pid_t pids[PP_TARGETS_MAX_PLUGINS + 1];
  size_t n = 0;
  pids[n++] = getpid();
  for (size_t i = 0; i < a->nplugins; i++) {
    pid_t w = pp_worker_pid(a->plugins[i].worker);
    if (w > 0) pids[n++] = w;
  }
  pp_targets_set_excluded(a->targets, pids, n);
}

static void queue_target(void *ctx, size_t plugin, const struct pp_target *t) {
  struct pp_agent *a = ctx;
  struct agent_plugin *ap = &a->plugins[plugin];
  /* its comm and appid, while it is alive: it may exit before the session
   * ends, and its samples must still name it */
  pp_enrich_remember(a->enricher, t->pid, t->start_time);
  /* --containers: a runtime plugin never hears of the other processes */
  if (a->cfg->containers_select &&
      !pp_enrich_selected(a->enricher, t->pid, t->start_time, a->cfg->containers_select))
    return;
  if (ap->npending == ap->pending_cap) {
    size_t ncap = ap->pending_cap ? ap->pending_cap * 2 : 64;
    struct pp_target *g = realloc(ap->pending, ncap * sizeof(*g));
    if (!g) return; /* the pid is retried at the next session's full list */
    ap->pending = g;
    ap->pending_cap = ncap;
  }
  ap->pending[ap->npending++] = *t;
}

static void flush_targets(struct pp_agent *a) {
  for (size_t i = 0; i < a->nplugins; i++) {
    struct agent_plugin *ap = &a->plugins[i];
    if (!ap->npending || !ap->started) continue;
    if (pp_worker_off(ap->worker)) { /* said once when it went off */
      ap->npending = 0;
      continue;
    }
    char err[256] = "";
    if (pp_worker_add_targets(ap->worker, ap->pending, ap->npending, err, sizeof(err)) < 0) {
      pp_log(PP_LOG_WARNING, "polyprof", "%s: add_targets failed: %s", ap->info->desc.name, err);
    } else {
      /* the first few pids: when each process reached its plugin */
      char pids[128] = "";
      size_t at = 0;
      for (size_t k = 0; k < ap->npending && k < 8 && at < sizeof(pids); k++) {
        int w = snprintf(pids + at, sizeof(pids) - at, "%s%u", k ? " " : "", ap->pending[k].pid);
        if (w < 0) break;
        at += (size_t)w;
      }
      pp_log(PP_LOG_DEBUG, "polyprof", "%s: %zu new target(s): pid %s%s", ap->info->desc.name,
             ap->npending, pids, ap->npending > 8 ? " ..." : "");
    }
    ap->npending = 0;
  }
}

/* With process events, a scan applies what the kernel said since the last
 * one, and /proc is listed only every proc_rescan_interval_s (a safety net),
 * at session boundaries (recheck) and at once when events were lost. */
static void scan_targets(struct pp_agent *a, bool recheck) {
  update_exclusions(a);
  int rc = 0;
  bool listing = true;
  a->last_update_ms = mono_ms();
  a->events_due_ms = 0;
  if (a->proc_events) {
    uint64_t now = a->last_update_ms;
    bool lost = pp_proc_events_drain(a->proc_events) != 0;
    const uint32_t *changed, *gone;
    size_t nchanged, ngone;
    pp_proc_events_take(a->proc_events, &changed, &nchanged, &gone, &ngone);
    if (lost) {
      pp_log(PP_LOG_INFO, "polyprof", "process events were lost: listing /proc now");
      recheck = true; /* an exec may be among them */
    } else {
      rc = pp_targets_update(a->targets, changed, nchanged, gone, ngone, queue_target, a);
      if (rc < 0) recheck = true;
    }
    listing = recheck || now >= a->next_listing_ms;
    if (listing) a->next_listing_ms = now + (uint64_t)a->cfg->proc_rescan_interval_s * 1000;
  }
  if (listing) rc = pp_targets_scan(a->targets, recheck, queue_target, a);
  if (rc < 0) pp_log(PP_LOG_WARNING, "polyprof", "/proc scan failed: %s", strerror(-rc));
  flush_targets(a);
  /* an update classifies only the processes that changed: the young ones
   * keep their own schedule, which a stream of execs must not push back */
  if (!pp_targets_young(a->targets))
    a->young_due_ms = 0;
  else if (!a->young_due_ms)
    a->young_due_ms = a->last_update_ms + PP_TARGETS_YOUNG_TICK_MS;
}

/* Between scans, a process that started (or exec'd) moments ago and is no
 * runtime yet is looked at again every tick: its runtime library may be
 * mapped any millisecond now (targets.h). The loop wakes for it only while
 * there is such a process. */
static void recheck_young(struct pp_agent *a) {
  uint64_t now = mono_ms();
  size_t left = pp_targets_recheck_young(a->targets, queue_target, a);
  flush_targets(a);
  a->young_due_ms = left ? now + PP_TARGETS_YOUNG_TICK_MS : 0;
}

/* The kernel's process events, when it will give them (see proc_events.h). */
static void open_proc_events(struct pp_agent *a) {
  const struct pp_config *cfg = a->cfg;
  if (!cfg->proc_events) {
    pp_log(PP_LOG_INFO, "polyprof", "process events off: listing /proc every %d ms",
           cfg->proc_scan_interval_ms);
    return;
  }
  if (cfg->pid_count) return; /* --pids: the scan visits only those, no listing to save */
  char why[256] = "";
  a->proc_events = pp_proc_events_open(why, sizeof(why));
  if (a->proc_events)
    pp_log(PP_LOG_INFO, "polyprof",
           "following the kernel's process events; /proc listed every %d s as a safety net",
           cfg->proc_rescan_interval_s);
  else
    pp_log(PP_LOG_INFO, "polyprof", "process events unavailable (%s): listing /proc every %d ms",
           why, cfg->proc_scan_interval_ms);
}

/* Starts the plugins not running yet; returns how many it started.
 * System-wide plugins go first: a runtime plugin is told (PERFLESS) when
 * none of them is sampling, because none is configured or because each
 * refused for good (no perf_event_open), so that it can do the sampling
 * itself (a runtime whose default leaves it to perf, such as .NET's). */
static size_t start_plugins(struct pp_agent *a) {
  size_t started = 0;
  bool have_base = false;
  for (size_t i = 0; i < a->nplugins; i++)
    have_base |=
        a->plugins[i].system_wide && a->plugins[i].started && !pp_worker_off(a->plugins[i].worker);
  for (int pass = 0; pass < 2; pass++)
    for (size_t i = 0; i < a->nplugins; i++) {
      struct agent_plugin *ap = &a->plugins[i];
      if (ap->started || ap->system_wide != (pass == 0)) continue;
      struct pp_session s = {
          .struct_size = sizeof(s),
          .frequency_hz = (uint32_t)a->cfg->frequency,
          .duration_s = (uint32_t)a->cfg->duration,
          .flags = (a->cfg->continuous ? PP_SESSION_CONTINUOUS : 0) |
                   (have_base ? 0 : PP_SESSION_PERFLESS) |
                   pp_profile_types_session_flags(a->cfg->profile_types),
          .mode = ap->pcfg->mode,
          .tick_interval_ns =
              1000000000ull / (uint64_t)(a->cfg->frequency > 0 ? a->cfg->frequency : 1),
      };
      char err[256] = "";
      int rc = pp_worker_start(ap->worker, &s, err, sizeof(err));
      if (rc < 0 && !PP_IS_PERMANENT(rc)) {
        /* the worker restarts on its own backoff; its pids get error stacks */
        pp_log(PP_LOG_WARNING, "polyprof", "%s: start failed: %s", ap->info->desc.name, err);
      }
      /* a refusal for good (or a worker already off) samples nothing */
      if (ap->system_wide && !PP_IS_PERMANENT(rc) && !pp_worker_off(ap->worker)) have_base = true;
      ap->started = true;
      started++;
      /* the whole current target list: start() forgets nothing on restarts */
      const struct pp_target *t;
      size_t n = pp_targets_of(a->targets, i, &t);
      ap->npending = 0;
      for (size_t k = 0; k < n; k++)
        queue_target(a, i, &t[k]);
    }
  flush_targets(a);
  return started;
}

/* Waits up to timeout_ms for a signal or worker traffic, then services
 * every worker (logs, deaths, restarts, memory caps). */
/* A process that exec'd is announced to its plugin within this much, not
 * at the next scan interval: a short-lived runtime (a PHP or Python
 * command of a fraction of a second) is otherwise over before its plugin
 * hears of it. The socket is looked at no more than twice per
 * EVENTS_WAKE_GAP_MS and the targets updated no more than once per
 * EVENTS_UPDATE_GAP_MS, so a host that forks and execs all the time costs
 * a bounded number of wake-ups, and an idle host none. */
#define EVENTS_WAKE_GAP_MS 20
#define EVENTS_UPDATE_GAP_MS 50

/* When the loop must wake for process events (UINT64_MAX: only when the
 * socket has data, or never). */
static uint64_t events_wake_ms(const struct pp_agent *a, uint64_t now) {
  if (!a->proc_events) return UINT64_MAX;
  if (a->events_due_ms) return a->events_due_ms;
  if (now < a->events_quiet_until_ms) return a->events_quiet_until_ms;
  return UINT64_MAX;
}

static void wait_and_service(struct pp_agent *a, int timeout_ms) {
  struct pollfd fds[PP_TARGETS_MAX_PLUGINS + 2];
  nfds_t n = 0;
  fds[n++] = (struct pollfd){.fd = signal_pipe[0], .events = POLLIN};
  for (size_t i = 0; i < a->nplugins; i++) {
    int fd = pp_worker_fd(a->plugins[i].worker);
    if (fd >= 0) fds[n++] = (struct pollfd){.fd = fd, .events = POLLIN};
  }
  uint64_t now = mono_ms();
  nfds_t ev = 0; /* the index of the events socket, 0: not polled */
  if (a->proc_events && !a->events_due_ms && now >= a->events_quiet_until_ms) {
    ev = n;
    fds[n++] = (struct pollfd){.fd = pp_proc_events_fd(a->proc_events), .events = POLLIN};
  }
  if (timeout_ms < 0) timeout_ms = 0;
  poll(fds, n, timeout_ms);
  if (fds[0].revents & POLLIN) drain_signal_pipe();
  if (ev && (fds[ev].revents & (POLLIN | POLLERR))) {
    now = mono_ms();
    /* the fork that precedes an exec wakes us alone: a second wake so
     * soon is let through, and only then does the socket go quiet */
    if (now < a->events_last_wake_ms + EVENTS_WAKE_GAP_MS)
      a->events_quiet_until_ms = now + EVENTS_WAKE_GAP_MS;
    a->events_last_wake_ms = now;
    if (pp_proc_events_read(a->proc_events)) {
      uint64_t due = a->last_update_ms + EVENTS_UPDATE_GAP_MS;
      a->events_due_ms = due > now ? due : now;
    }
  }
  for (size_t i = 0; i < a->nplugins; i++)
    pp_worker_service(a->plugins[i].worker);
}

static void snapshot_all(struct pp_agent *a) {
  for (size_t i = 0; i < a->nplugins; i++) {
    struct agent_plugin *ap = &a->plugins[i];
    ap->snap_err[0] = '\0';
    ap->snap_rc = pp_worker_snapshot_begin(ap->worker, ap->snap_err, sizeof(ap->snap_err));
  }
  for (size_t i = 0; i < a->nplugins; i++) {
    struct agent_plugin *ap = &a->plugins[i];
    if (ap->snap_rc == 0)
      ap->snap_rc =
          pp_worker_snapshot_end(ap->worker, ap->snap, ap->snap_err, sizeof(ap->snap_err));
    if (ap->snap_rc < 0) {
      pp_profile_clear(ap->snap);
      if (!ap->snap_err[0])
        snprintf(ap->snap_err, sizeof(ap->snap_err), "%s", strerror(-ap->snap_rc));
      /* a plugin that is off was reported once, when it went off */
      if (!pp_worker_off(ap->worker))
        pp_log(PP_LOG_WARNING, "polyprof", "%s: no data this session: %s", ap->info->desc.name,
               ap->snap_err);
    }
  }
}

/* --- setup / teardown --------------------------------------------------- */

static int agent_setup(struct pp_agent *a, char err[PP_MAX_ERR]) {
  if (pp_agent_load_plugins(a->cfg, &a->infos, &a->ninfos, err) < 0) return -1;
  if (setup_plugins(a) < 0) {
    snprintf(err, PP_MAX_ERR, "out of memory setting up plugins");
    return -1;
  }
  if (a->nplugins == 0) {
    snprintf(err, PP_MAX_ERR,
             "no plugin enabled: %zu plugin(s) found in %s; see `polyprof plugins`", a->ninfos,
             a->cfg->plugin_dir);
    return -1;
  }
  return 0;
}

static void agent_log_plugins(const struct pp_agent *a) {
  char list[1024] = "";
  size_t at = 0;
  for (size_t i = 0; i < a->nplugins && at < sizeof(list); i++) {
    const struct agent_plugin *ap = &a->plugins[i];
    int n = snprintf(list + at, sizeof(list) - at, "%s%s %s%s%s", i ? ", " : "",
                     ap->info->desc.name, ap->info->desc.version, ap->pcfg->mode ? " mode=" : "",
                     ap->pcfg->mode ? ap->pcfg->mode : "");
    if (n < 0) break;
    at += (size_t)n;
  }
  pp_log(PP_LOG_INFO, "polyprof", "plugins: %s", list);
}

/* The uploader copied its settings (server, token, TLS, spool...) when it
 * was made, so a reload makes a new one. The old one gets its usual exit:
 * a last attempt within its grace period, the rest to the spool, which the
 * new one resends (to the new server if the URL changed: a profile is
 * never dropped because the destination moved). */
static void reload_uploader(struct pp_agent *a) {
  const struct pp_config *cfg = a->cfg;
  bool was_on = a->uploader != NULL;
  pp_uploader_free(a->uploader);
  a->uploader = pp_uploader_new(cfg, a->spawn_time);
  if (a->uploader)
    pp_log(PP_LOG_INFO, "polyprof", "upload after reload: %s%s%s%s%s", cfg->upload ? "studio " : "",
           cfg->upload && cfg->server_host ? cfg->server_host : "",
           cfg->upload && cfg->pyroscope_url ? ", " : "", cfg->pyroscope_url ? "pyroscope " : "",
           cfg->pyroscope_url ? cfg->pyroscope_url : "");
  else if (cfg->upload || cfg->pyroscope_url || cfg->otlp_endpoint)
    pp_log(PP_LOG_ERROR, "polyprof", "upload after reload: cannot start the uploader");
  else if (was_on)
    pp_log(PP_LOG_INFO, "polyprof", "upload after reload: off");
}

static int reload_agent(struct pp_agent *a, pp_config_loader reload, void *ctx) {
  struct pp_config *ncfg = calloc(1, sizeof(*ncfg));
  char err[PP_MAX_ERR] = "";
  if (!ncfg) return -1;
  if (reload(ctx, ncfg, err) < 0) {
    pp_log(PP_LOG_ERROR, "polyprof", "reload rejected, keeping the running configuration: %s", err);
    pp_config_free(ncfg);
    free(ncfg);
    return -1;
  }
  /* validate the new plugin set before touching the running one */
  struct pp_plugin_info *infos = NULL;
  size_t ninfos = 0;
  if (pp_agent_load_plugins(ncfg, &infos, &ninfos, err) < 0) {
    pp_log(PP_LOG_ERROR, "polyprof", "reload rejected, keeping the running configuration: %s", err);
    pp_registry_free(infos, ninfos);
    pp_config_free(ncfg);
    free(ncfg);
    return -1;
  }
  teardown_plugins(a);
  pp_config_free(a->cfg);
  free(a->cfg);
  a->cfg = ncfg;
  a->infos = infos;
  a->ninfos = ninfos;
  if (setup_plugins(a) < 0 || a->nplugins == 0) {
    pp_log(PP_LOG_ERROR, "polyprof", "after reload no plugin is enabled; continuing idle");
  }
  agent_log_plugins(a);
  reload_uploader(a);
  pp_log(PP_LOG_INFO, "polyprof", "configuration and plugins reloaded");
  return 0;
}

/* systemd: STATUS= shows in `systemctl status`; READY=1 may ride along. */
static void notify_status(const struct pp_agent *a, const char *extra) {
  char msg[256];
  snprintf(msg, sizeof(msg), "%sSTATUS=%u session(s) written, %zu plugin(s) enabled",
           extra ? extra : "", a->session_no, a->nplugins);
  pp_sd_notify(msg);
}

/* Rootless mode: what works and what needs root, once at start. */
static void log_rootless_line(void *arg, bool ok, const char *text) {
  pp_log(ok ? PP_LOG_INFO : PP_LOG_WARNING, "rootless", "%s", text);
}

static int agent_run(struct pp_config *cfg, pp_config_loader reload, void *reload_ctx,
                     const struct pp_agent_hooks *hooks) {
  struct pp_agent agent;
  struct pp_agent *a = &agent;
  memset(a, 0, sizeof(*a));
  a->cfg = cfg;
  a->hooks = hooks;
  bool program_done = false;
  a->spawn_time = time(NULL);
  char err[PP_MAX_ERR] = "";
  int exit_code = 0;
  int pid_fd = -1;

  if (cfg->rootless) {
    /* refused before anything is written: a root-owned pid or a missing
     * --pids is a usage mistake */
    if (pp_rootless_validate(cfg, err) < 0) {
      pp_log(PP_LOG_ERROR, "polyprof", "%s", err);
      exit_code = 2;
      goto out;
    }
    char dir[4096];
    pp_rootless_user_dir(dir, sizeof(dir));
    int rc = pp_rootless_make_user_dir(dir);
    if (rc < 0)
      pp_log(PP_LOG_WARNING, "polyprof",
             "rootless: cannot use %s for the log and pid file: %s (not created by you?)", dir,
             strerror(-rc));
  }
  if (cfg->log_file && *cfg->log_file) {
    int rc = pp_log_open_file(cfg->log_file, cfg->log_max_bytes, cfg->log_backups);
    if (rc < 0)
      pp_log(PP_LOG_WARNING, "polyprof", "cannot open log file %s: %s (logging to stderr only)",
             cfg->log_file,
             rc == -EPERM ? "not a regular file of the agent's user (planted?)" : strerror(-rc));
  }
  pp_log(PP_LOG_INFO, "polyprof", "polyprof %s starting (pid %d)", POLYPROF_VERSION, (int)getpid());
  if (!cfg->output_dir && !cfg->upload && !hooks) {
    pp_log(PP_LOG_ERROR, "polyprof", "no output: give -o/--output-dir (output.dir) or -u");
    exit_code = 2;
    goto out;
  }
  if ((cfg->output_dir || cfg->upload || !hooks) && pp_config_check_run(cfg, err) < 0) {
    pp_log(PP_LOG_ERROR, "polyprof", "%s", err);
    exit_code = 2;
    goto out;
  }
  if (cfg->output_dir) {
    err[0] = '\0';
    if (pp_output_check_dir(cfg->output_dir, err, sizeof(err)) < 0) {
      pp_log(PP_LOG_ERROR, "polyprof", "%s", err);
      exit_code = 1;
      goto out;
    }
    if (err[0]) pp_log(PP_LOG_INFO, "polyprof", "%s", err); /* temp files of a crash swept */
  }
  if (cfg->pidns_check && !pp_pidns_is_init()) {
    pp_log(PP_LOG_ERROR, "polyprof",
           "polyprof must run in the init pid namespace to see every process (Docker: "
           "--pid=host, Kubernetes: hostPID: true), or pass --disable-pidns-check");
    exit_code = 1;
    goto out;
  }
  if (cfg->rootless)
    pp_rootless_report(cfg, log_rootless_line, NULL);
  else if (geteuid() != 0)
    pp_log(PP_LOG_WARNING, "polyprof",
           "not running as root: plugins that need privileges will report what they miss "
           "(see `polyprof check`)");
  if (cfg->pid_file && *cfg->pid_file) {
    pid_fd = pp_pidfile_acquire(cfg->pid_file, err, sizeof(err));
    if (pid_fd < 0) {
      pp_log(PP_LOG_ERROR, "polyprof", "%s", err);
      exit_code = 1;
      goto out;
    }
  }
  if (pp_sd_notify_init() < 0)
    pp_log(PP_LOG_WARNING, "polyprof",
           "NOTIFY_SOCKET is not an absolute path or @abstract name: no systemd notifications");
  if (install_signals(hooks) < 0) {
    pp_log(PP_LOG_ERROR, "polyprof", "cannot install signal handlers");
    exit_code = 1;
    goto out;
  }
  if (agent_setup(a, err) < 0) {
    pp_log(PP_LOG_ERROR, "polyprof", "%s", err);
    exit_code = err[0] && strstr(err, "no plugin enabled") ? 1 : 2;
    goto out;
  }
  agent_log_plugins(a);

  char why[256] = "";
  if (pp_k8s_labels_configure(cfg->k8s_labels, why, sizeof(why)) < 0) {
    pp_log(PP_LOG_ERROR, "polyprof", "--k8s-labels (enrichment.k8s_labels): %s", why);
    exit_code = 2;
    goto out;
  }
  if (cfg->containers_select && !cfg->container_names)
    pp_log(PP_LOG_WARNING, "polyprof",
           "--containers with --disable-container-names: no container is named, so no process "
           "is profiled");
  struct pp_enrich_opts eo = {
      .appids = cfg->app_identifiers,
      .containers = cfg->container_names,
      .app_metadata = cfg->application_metadata,
      .app_id_args_filters = (const char *const *)cfg->app_id_args_filters,
      .app_id_args_filter_count = cfg->app_id_args_filter_count,
      .cache_size = cfg->appid_cache_size,
      .java_spark_appid = cfg->java_spark_appid,
      .k8s_runtime_root = cfg->k8s_runtime_root,
      .k8s_api = cfg->k8s_api,
      .k8s_node_name = cfg->k8s_node_name,
      .k8s_sa_dir = cfg->k8s_serviceaccount_dir,
  };
  a->enricher = pp_enricher_new(&eo);
  a->metrics = pp_metrics_new();
  a->system_metadata = pp_metadata_system(cfg, a->spawn_time);
  a->merged = pp_profile_new();
  a->failed = pp_profile_new();
  a->uploader = pp_uploader_new(cfg, a->spawn_time);
  pp_cloud_metadata_apply(cfg, a->system_metadata);
  if (!a->enricher || !a->metrics || !a->merged || !a->failed) {
    pp_log(PP_LOG_ERROR, "polyprof", "out of memory");
    exit_code = 1;
    goto out;
  }

  /* the plugins are loaded and the first session starts now */
  notify_status(a, "READY=1\n");

  open_proc_events(a);
  scan_targets(a, true);
  /* A session covers what the plugins sampled in it: it begins once they
   * have started (perf loads kallsyms and opens its rings first, a runtime
   * plugin may attach), and the next one begins at the snapshot that ended
   * it, since sampling never stops in between (writing the outputs takes
   * time that belongs to the next session's samples). */
  struct session_times st;
  uint64_t t0 = 0;
  for (;;) {
    if (start_plugins(a) > 0 || a->session_no == 0) {
      st.start = time(NULL);
      t0 = mono_ms();
    }
    uint64_t deadline = t0 + (uint64_t)a->cfg->duration * 1000;
    const uint64_t scan_ms = (uint64_t)a->cfg->proc_scan_interval_ms;
    uint64_t next_scan = t0 + scan_ms;
    bool metrics_sampled = false;
    while (!stop_requested) {
      uint64_t now = mono_ms();
      if (now >= deadline) break;
      uint64_t until = next_scan < deadline ? next_scan : deadline;
      uint64_t ev_wake = events_wake_ms(a, now);
      if (ev_wake < until) until = ev_wake > now ? ev_wake : now;
      if (a->young_due_ms && a->young_due_ms < until)
        until = a->young_due_ms > now ? a->young_due_ms : now;
      wait_and_service(a, (int)(until - now));
      now = mono_ms();
      if (now >= next_scan) {
        scan_targets(a, false);
        pp_metrics_sample(a->metrics);
        metrics_sampled = true;
        next_scan = now + scan_ms;
      } else if (a->events_due_ms && now >= a->events_due_ms) {
        scan_targets(a, false); /* an exec: its plugin hears of it now */
      }
      if (a->young_due_ms && now >= a->young_due_ms) recheck_young(a);
      if (hooks && hooks->poll(hooks->ctx, a)) {
        program_done = true;
        break;
      }
    }
    if (stop_requested) {
      pp_sd_notify("STOPPING=1");
      pp_log(PP_LOG_INFO, "polyprof", "signal %d: ending the session early", (int)stop_requested);
    }
    /* a scan interval longer than the session leaves no memory sample */
    if (!metrics_sampled) pp_metrics_sample(a->metrics);
    uint64_t t_snap = mono_ms();
    time_t wall_snap = time(NULL);
    snapshot_all(a);
    st.end = wall_snap;
    st.duration_s = (double)(t_snap - t0) / 1000.0;
    a->session_no++;
    pp_agent_write_session(a, &st);
    if (hooks) hooks->session(hooks->ctx, a, &st);
    st.start = wall_snap;
    t0 = t_snap;

    if (stop_requested || !a->cfg->continuous || program_done) break;
    if (reload_requested) {
      reload_requested = 0;
      /* a rejected reload keeps the running set: READY=1 either way */
      pp_sd_notify("RELOADING=1");
      if (reload) reload_agent(a, reload, reload_ctx);
      notify_status(a, "READY=1\n");
    } else {
      notify_status(a, NULL);
    }
    scan_targets(a, true);
  }
  if (!stop_requested) pp_sd_notify("STOPPING=1"); /* a signal already said so */
  pp_log(PP_LOG_INFO, "polyprof", "stopping after %u session(s)", a->session_no);

out:
  pp_agent_flush_pending_at_exit(a);
  pp_uploader_free(a->uploader); /* flushes, spools what is left */
  teardown_plugins(a);
  pp_proc_events_close(a->proc_events);
  pp_enricher_free(a->enricher);
  pp_metrics_free(a->metrics);
  json_decref(a->system_metadata);
  pp_profile_free(a->merged);
  pp_profile_free(a->failed);
  pp_pidfile_release(pid_fd, a->cfg->pid_file);
  pp_config_free(a->cfg);
  free(a->cfg);
  pp_log_close_file();
  return exit_code;
}

int pp_agent_run(struct pp_config *cfg, pp_config_loader reload, void *reload_ctx) {
  return agent_run(cfg, reload, reload_ctx, NULL);
}

int pp_agent_run_hooked(struct pp_config *cfg, const struct pp_agent_hooks *hooks) {
  return agent_run(cfg, NULL, NULL, hooks);
}
