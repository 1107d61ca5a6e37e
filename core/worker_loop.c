/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker side: host one plugin and serve the core's requests (ipc.h).
 *
 * Runs in a forked worker process or, in inline mode, in a thread of the
 * agent. It is single-threaded by design: tick() and snapshot() are called
 * from this loop only, so they never run concurrently (plugin.h promises
 * that). Ticks are scheduled between requests with ppoll() so a tick
 * interval below a millisecond is still honoured.
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ipc.h"
#include "log.h"
#include "polyprof/kit/heap.h"
#include "profile_codec.h"
#include "worker_loop.h"

struct wloop {
  struct pp_worker_ctx *ctx;
  struct pp_ipc_rx rx;
  pthread_mutex_t send_lock; /* plugin threads may log while we reply */
  bool broken;               /* the core is gone: stop sending */

  char *path, *name;         /* from INIT: the .so, its expected descriptor name */
  struct pp_host_config cfg; /* from INIT; served to the plugin's config_*() */
  void *dl;
  struct pp_plugin vt; /* copy of the descriptor, zero past its struct_size */
  void *state;
  bool inited, started, exit;

  struct pp_host host;
  struct pp_host_ctx hctx;
  struct pp_session session;
  char *mode;
  uint64_t tick_ns, next_tick;

  struct pp_profile *prof;
  struct pp_sink *sink;
  struct pp_wbuf out;
};

/* ---- sending ---- */

static int send_msg(struct wloop *l, uint32_t type, const void *p, size_t len) {
  pthread_mutex_lock(&l->send_lock);
  int rc = l->broken ? -EPIPE : pp_ipc_send(l->ctx->fd, type, p, len, 0, NULL, NULL, NULL);
  if (rc) l->broken = true;
  pthread_mutex_unlock(&l->send_lock);
  return rc;
}

static void log_to_core(void *arg, int level, const char *text) {
  struct wloop *l = arg;
  struct pp_wbuf b;
  pp_wbuf_init(&b);
  pp_wbuf_u32(&b, (uint32_t)level);
  pp_wbuf_str(&b, text);
  if (!b.err) send_msg(l, PP_MSG_LOG, b.data, b.len);
  pp_wbuf_free(&b);
}

/* pp_log() calls made by core code inside a worker process land here. */
static void forward_core_log(int level, const char *tag, const char *msg, void *arg) {
  char buf[PP_HOST_MAX_LOG];
  snprintf(buf, sizeof(buf), "%s", msg);
  log_to_core(arg, level, buf);
}

static int reply(struct wloop *l, int rc, const char *msg) {
  struct pp_wbuf b;
  pp_wbuf_init(&b);
  pp_wbuf_u32(&b, (uint32_t)rc);
  pp_wbuf_str(&b, msg ? msg : "");
  int s = b.err ? b.err : send_msg(l, PP_MSG_REPLY, b.data, b.len);
  pp_wbuf_free(&b);
  return s;
}

/* A reply for a failed plugin call: what the plugin logged, else errno text. */
static int reply_failed(struct wloop *l, int rc, const char *call) {
  char problem[512], msg[700];
  pp_host_last_problem(&l->hctx, problem, sizeof(problem));
  if (problem[0])
    snprintf(msg, sizeof(msg), "%s failed: %s", call, problem);
  else
    snprintf(msg, sizeof(msg), "%s failed: %s (%d)", call,
             strerror(PP_IS_PERMANENT(rc) ? PP_PERMANENT_ERRNO(rc)
                      : rc < 0            ? -rc
                                          : rc),
             rc);
  return reply(l, rc < 0 ? rc : -EIO, msg);
}

/* ---- requests ---- */

static int do_init(struct wloop *l, const uint8_t *p, uint32_t len) {
  char msg[600];
  /* One INIT per worker: after a failed one the supervisor starts a new
   * worker, and the plugin may still hold pointers into this config. */
  if (l->inited || l->path) return reply(l, -EALREADY, "already initialised");
  struct pp_rbuf r;
  pp_rbuf_init(&r, p, len);
  int rc = pp_rbuf_strdup(&r, 4096, true, &l->path);
  if (!rc) rc = pp_rbuf_strdup(&r, 256, true, &l->name);
  if (!rc) rc = pp_host_config_decode(&r, &l->cfg);
  if (!rc && pp_rbuf_left(&r)) rc = -EINVAL;
  if (rc) return reply(l, rc == -ENOMEM ? -ENOMEM : -EPROTO, "malformed INIT");
  if (l->ctx->before_load) {
    char why[500] = "";
    rc = l->ctx->before_load(l->ctx->fd, l->path, l->name, why, sizeof(why));
    if (rc) {
      /* A list that is unusable, or a kernel without seccomp, stays so
       * until an operator acts: not worth a restart every backoff. */
      snprintf(msg, sizeof(msg), "sandbox: %s", why);
      return reply(l, PP_PERMANENT(rc < 0 && -rc < PP_PERMANENT_FLAG ? -rc : EINVAL), msg);
    }
  }
  l->dl = dlopen(l->path, RTLD_NOW | RTLD_LOCAL);
  if (!l->dl) {
    const char *e = dlerror();
    snprintf(msg, sizeof(msg), "dlopen: %s", e ? e : "unknown error");
    return reply(l, -ENOEXEC, msg);
  }
  pp_plugin_entry_fn entry;
  *(void **)&entry = dlsym(l->dl, PP_PLUGIN_ENTRY_SYMBOL);
  const struct pp_plugin *d = entry ? entry() : NULL;
  /* The file may have been replaced since the registry looked at it: check
   * the basics again rather than trusting the scan. */
  if (!d) return reply(l, -ENOEXEC, "no descriptor (entry symbol missing or returned NULL)");
  if (d->abi_major != PP_ABI_MAJOR || d->struct_size < PP_PLUGIN_V1_0_SIZE)
    return reply(l, -ENOEXEC, "descriptor changed since the scan (ABI or size)");
  memcpy(&l->vt, d, d->struct_size < sizeof(l->vt) ? d->struct_size : sizeof(l->vt));
  if (!l->vt.name || strcmp(l->vt.name, l->name) != 0 || !l->vt.init || !l->vt.start ||
      !l->vt.snapshot || !l->vt.stop || !l->vt.fini)
    return reply(l, -ENOEXEC, "descriptor changed since the scan (name or functions)");
  pp_host_clear_problem(&l->hctx);
  rc = l->vt.init(&l->host, &l->state);
  if (rc) return reply_failed(l, rc, "init");
  l->inited = true;
  return reply(l, 0, NULL);
}

static int do_start(struct wloop *l, const uint8_t *p, uint32_t len) {
  struct pp_rbuf r;
  pp_rbuf_init(&r, p, len);
  uint32_t freq = pp_rbuf_u32(&r), duration = pp_rbuf_u32(&r), flags = pp_rbuf_u32(&r);
  uint64_t tick = pp_rbuf_u64(&r);
  char *mode = NULL;
  if (pp_rbuf_strdup(&r, 256, false, &mode) || pp_rbuf_left(&r)) {
    free(mode);
    return reply(l, -EPROTO, "malformed START");
  }
  if (!l->inited || l->started) {
    free(mode);
    return reply(l, l->inited ? -EALREADY : -EPROTO,
                 l->inited ? "already started" : "not initialised");
  }
  free(l->mode);
  l->mode = mode;
  l->session = (struct pp_session){.struct_size = sizeof(struct pp_session),
                                   .frequency_hz = freq,
                                   .duration_s = duration,
                                   .flags = flags,
                                   .mode = mode,
                                   .tick_interval_ns = tick};
  if (!l->session.tick_interval_ns && freq) l->session.tick_interval_ns = 1000000000ull / freq;
  pp_host_clear_problem(&l->hctx);
  int rc = l->vt.start(l->state, &l->session);
  if (rc) return reply_failed(l, rc, "start");
  l->started = true;
  l->tick_ns = 0;
  if (l->vt.tick && l->session.tick_interval_ns) {
    l->tick_ns = l->session.tick_interval_ns;
    if (l->tick_ns < PP_MIN_TICK_NS) l->tick_ns = PP_MIN_TICK_NS;
    l->next_tick = pp_ipc_now_ns() + l->tick_ns;
  }
  return reply(l, 0, NULL);
}

static int do_add_targets(struct wloop *l, const uint8_t *p, uint32_t len) {
  struct pp_rbuf r;
  pp_rbuf_init(&r, p, len);
  uint32_t n = pp_rbuf_u32(&r);
  if (r.err || n > pp_rbuf_left(&r) / sizeof(struct pp_target) ||
      pp_rbuf_left(&r) != (size_t)n * sizeof(struct pp_target))
    return reply(l, -EPROTO, "malformed ADD_TARGETS");
  if (!l->started) return reply(l, -EPROTO, "not started");
  if (!l->vt.add_targets || n == 0) return reply(l, 0, NULL);
  struct pp_target *t = malloc((size_t)n * sizeof(*t));
  if (!t) return reply(l, -ENOMEM, "out of memory");
  memcpy(t, pp_rbuf_bytes(&r, (size_t)n * sizeof(*t)), (size_t)n * sizeof(*t));
  pp_host_clear_problem(&l->hctx);
  int rc = l->vt.add_targets(l->state, t, n);
  free(t);
  return rc ? reply_failed(l, rc, "add_targets") : reply(l, 0, NULL);
}

/* snapshot(), or dump() (each thread once, its tid kept): the reply is a
 * PROFILE either way. */
static int do_collect(struct wloop *l, bool dump) {
  int rc = -EPROTO;
  char msg[700] = "not started";
  if (!l->prof) l->prof = pp_profile_new();
  if (!l->sink) l->sink = calloc(1, sizeof(*l->sink));
  if (!l->prof || !l->sink) {
    rc = -ENOMEM;
    snprintf(msg, sizeof(msg), "out of memory");
  } else {
    pp_profile_clear(l->prof);
  }
  if (dump && !l->vt.dump) {
    rc = -ENOTSUP;
    snprintf(msg, sizeof(msg), "the plugin has no dump()");
  } else if (l->started && l->prof && l->sink) {
    pp_host_clear_problem(&l->hctx);
    pp_sink_begin(l->sink, l->prof, &l->host);
    l->sink->keep_tid = dump;
    rc = dump ? l->vt.dump(l->state, l->sink) : l->vt.snapshot(l->state, l->sink);
    pp_sink_end(l->sink);
    msg[0] = 0;
    if (rc) {
      char problem[512];
      pp_host_last_problem(&l->hctx, problem, sizeof(problem));
      snprintf(msg, sizeof(msg), "%s failed: %s", dump ? "dump" : "snapshot",
               problem[0] ? problem : strerror(rc < 0 ? -rc : rc));
      if (rc > 0) rc = -EIO;
    }
  }
  pp_wbuf_reset(&l->out);
  pp_wbuf_u32(&l->out, (uint32_t)rc);
  pp_wbuf_str(&l->out, msg);
  int erc = l->prof ? pp_profile_encode(l->prof, &l->out) : -ENOMEM;
  if (erc) {
    /* Too big or no memory: say so with an empty profile rather than not
     * answering (which the core would take for a hang). */
    struct pp_profile *empty = pp_profile_new();
    pp_wbuf_reset(&l->out);
    pp_wbuf_u32(&l->out, (uint32_t)erc);
    pp_wbuf_str(&l->out, erc == -E2BIG ? "snapshot too large to send" : "out of memory");
    if (empty) pp_profile_encode(empty, &l->out);
    pp_profile_free(empty);
  }
  if (l->out.err) return l->out.err;
  int s = send_msg(l, PP_MSG_PROFILE, l->out.data, l->out.len);
  /* Do not keep a huge encode buffer around between snapshots. */
  if (l->out.cap > (8u << 20)) pp_wbuf_free(&l->out);
  pp_release_heap();
  return s;
}

static void plugin_stop(struct wloop *l) {
  if (l->started) l->vt.stop(l->state);
  l->started = false;
  l->tick_ns = 0;
}

static void plugin_fini(struct wloop *l) {
  plugin_stop(l);
  if (l->inited) l->vt.fini(l->state);
  l->inited = false;
  l->state = NULL;
}

static int on_request(void *arg, uint32_t type, const uint8_t *p, uint32_t len) {
  struct wloop *l = arg;
  switch (type) {
    case PP_MSG_INIT:
      return do_init(l, p, len);
    case PP_MSG_START:
      return do_start(l, p, len);
    case PP_MSG_ADD_TARGETS:
      return do_add_targets(l, p, len);
    case PP_MSG_SNAPSHOT:
      return do_collect(l, false);
    case PP_MSG_DUMP:
      return do_collect(l, true);
    case PP_MSG_STOP: {
      if (!l->started) return reply(l, 0, NULL);
      pp_host_clear_problem(&l->hctx);
      int rc = l->vt.stop(l->state);
      l->started = false;
      l->tick_ns = 0;
      return rc ? reply_failed(l, rc, "stop") : reply(l, 0, NULL);
    }
    case PP_MSG_EXIT:
      plugin_fini(l);
      l->exit = true;
      reply(l, 0, NULL);
      return 1; /* stop reading: we are done */
    case PP_MSG_PING:
      return reply(l, 0, NULL);
    default:
      return reply(l, -EPROTO, "unknown request");
  }
}

/* ---- the loop ---- */

struct pp_worker_ctx *pp_worker_ctx_new(int fd, bool inline_mode) {
  struct pp_worker_ctx *c = calloc(1, sizeof(*c));
  if (!c) return NULL;
  c->fd = fd;
  c->inline_mode = inline_mode;
  return c;
}

void pp_worker_ctx_free(struct pp_worker_ctx *c) {
  if (!c) return;
  if (c->fd >= 0) close(c->fd);
  free(c);
}

void pp_worker_init_encode(struct pp_wbuf *b, const char *path, const char *name,
                           const struct pp_host_config *cfg) {
  pp_wbuf_str(b, path);
  pp_wbuf_str(b, name);
  pp_host_config_encode(b, cfg);
}

/* The plugin may change its tick interval (plugin.h): a shorter one takes
 * effect at once, a longer one after the next tick. */
static void apply_interval(struct wloop *l, uint64_t now) {
  uint64_t want = l->session.tick_interval_ns;
  if (!l->started || !l->tick_ns || !want || want == l->tick_ns) return;
  l->tick_ns = want < PP_MIN_TICK_NS ? PP_MIN_TICK_NS : want;
  if (l->next_tick > now + l->tick_ns) l->next_tick = now + l->tick_ns;
}

static void run_tick(struct wloop *l) {
  uint64_t now = pp_ipc_now_ns();
  if (!l->tick_ns || now < l->next_tick) return;
  l->vt.tick(l->state, now);
  apply_interval(l, now);
  /* Fixed rate, but no burst of catch-up ticks after a slow one. */
  l->next_tick += l->tick_ns;
  now = pp_ipc_now_ns();
  if (l->next_tick <= now) l->next_tick = now + l->tick_ns;
}

int pp_worker_loop(struct pp_worker_ctx *ctx) {
  struct wloop *l = calloc(1, sizeof(*l));
  if (!l) return -ENOMEM;
  l->ctx = ctx;
  pthread_mutex_init(&l->send_lock, NULL);
  pp_ipc_rx_init(&l->rx);
  pp_wbuf_init(&l->out);
  pp_host_init(&l->host, &l->hctx, &l->cfg, log_to_core, l);
  /* In a worker process the agent's own log calls must reach the agent's
   * log too; in inline mode they already do (same process). */
  if (!ctx->inline_mode) pp_log_set_forward(forward_core_log, l);

  int rc = 0;
  while (!l->exit && !l->broken) {
    struct pollfd pfd = {.fd = ctx->fd, .events = POLLIN};
    struct timespec ts, *tsp = NULL;
    if (l->tick_ns) {
      uint64_t now = pp_ipc_now_ns();
      uint64_t wait = l->next_tick > now ? l->next_tick - now : 0;
      ts.tv_sec = (time_t)(wait / 1000000000ull);
      ts.tv_nsec = (long)(wait % 1000000000ull);
      tsp = &ts;
    }
    int n = ppoll(&pfd, 1, tsp, NULL);
    if (n < 0 && errno != EINTR) {
      rc = -errno;
      break;
    }
    if (n > 0) {
      rc = pp_ipc_rx_read(&l->rx, ctx->fd, on_request, l, 0);
      if (rc == 1) rc = 0; /* EXIT */
      if (rc) break;
      apply_interval(l, pp_ipc_now_ns());
    }
    if (!l->exit) run_tick(l);
  }
  /* The core went away (or broke the protocol) without EXIT: still give the
   * plugin its stop()/fini() so it can release what it holds. */
  plugin_fini(l);
  if (!ctx->inline_mode) pp_log_set_forward(NULL, NULL);
  if (l->dl && ctx->inline_mode) dlclose(l->dl);
  pp_profile_free(l->prof);
  free(l->sink);
  free(l->mode);
  pp_wbuf_free(&l->out);
  pp_ipc_rx_free(&l->rx);
  pp_host_fini(&l->hctx);
  pp_host_config_free(&l->cfg);
  free(l->path);
  free(l->name);
  pthread_mutex_destroy(&l->send_lock);
  free(l);
  return rc;
}
