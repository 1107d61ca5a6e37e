/* SPDX-License-Identifier: Apache-2.0 */
/* EventPipe session lifecycle and sample intake (see dotnet.h). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dotnet.h"

#define IPC_TIMEOUT_MS DOTNET_IPC_TIMEOUT_MS
#define MAX_DEPTH_LIMIT 512

/* Runtime provider keywords: Loader 0x8 | Jit 0x10 | NGen 0x20, at Verbose
 * so MethodLoadVerbose carries names, and CompilationDiagnostic
 * 0x2000000000 for R2RGetEntryPoint: ReadyToRun code bound after attach
 * gets no load event of its own (see methods.h). */
#define RUNTIME_KEYWORDS (0x38ull | 0x2000000000ull)
#define SAMPLE_PROFILER_KEYWORDS 0xF00000000000ull
#define EV_METHOD_LOAD_VERBOSE 143
#define EV_R2R_GET_ENTRY_POINT 159
#define EV_RUNDOWN_DC_START_VERBOSE 143
#define EV_RUNDOWN_DC_END_VERBOSE 144
#define EV_THREAD_SAMPLE 0
#define SAMPLE_TYPE_MANAGED 2
#define SAMPLER_GAP_MAX_NS 1000000000ull

/* How many profile samples one runtime sample stands for: each sample of
 * a thread stands for the time since that thread's previous sample (dt;
 * one interval for its first), in units of the session interval. The
 * integer part is counted and the fraction kept with that probability, so
 * the expected count is time-in-stack x frequency whatever rate the runtime
 * sampled at: faster (~1 kHz: .NET 10 ignores SampleProfilerIntervalMS) or
 * slower than asked (a sampler thread starved on a loaded machine), and a
 * workload with a period close to the interval is not sampled in lock-step
 * (a fixed "every Nth sample" rule aliased a 30 ms/10 ms workload into
 * 50/50). Called for every sample, managed or not, so that time spent
 * outside managed code is not folded into the next managed sample. */
static uint32_t sample_weight(struct dotnet_session *s, uint64_t tid, uint64_t ts) {
  struct dotnet_thread_due *d = &s->due[(tid * 0x9e3779b97f4a7c15ull >> 52) % DOTNET_MAX_THREADS];
  uint64_t dt = s->interval_ns;
  /* every sweep samples every managed thread, running managed code or
   * not, so a thread's gap is the sweep period however slow it got; a gap
   * over a second is the slot's previous thread or a stalled stream */
  if (d->tid == tid && d->due && ts > d->due && ts - d->due < SAMPLER_GAP_MAX_NS) {
    dt = ts - d->due;
    s->sampler_intervals++;
    s->sampler_interval_ns += dt;
  }
  *d = (struct dotnet_thread_due){.tid = tid, .due = ts};
  uint32_t n = (uint32_t)(dt / s->interval_ns);
  uint64_t rem = dt % s->interval_ns;
  if (rem == 0) return n;
  /* xorshift64: cheap, and a fixed seed keeps runs reproducible */
  uint64_t x = s->rng;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  s->rng = x;
  return n + ((x >> 11) % s->interval_ns < rem);
}

/* .NET 9 took the thread suspension of NativeAOT and with it lost the
 * thread's mode at suspension: every sample says External. Fixed in .NET
 * 10.0.4 (and not in 9.0 as of 9.0.23, measured). */
bool dotnet_sample_type_unreliable(const char *version) {
  unsigned major = 0, minor = 0, patch = 0;
  if (sscanf(version, "%u.%u.%u", &major, &minor, &patch) < 1) return false;
  return major == 9 || (major == 10 && minor == 0 && patch < 4);
}

static void on_sample(struct dotnet_session *s, const struct dotnet_nt_event *ev) {
  uint32_t type = ev->payload_len >= 4 ? ev->payload[0] : 0;
  /* the next session has samples after the cutoff; a target whose clock is
   * not ours (time namespace: its session began "after" our cutoff) keeps all */
  if (s->cutoff_ts && ev->timestamp > s->cutoff_ts && dotnet_nt_sync_qpc(s->nt) < s->cutoff_ts)
    return;
  /* a burst keeps the sweeps of the window its weights are computed for
   * (the runtime may start sweeping before its reply reaches us); only
   * when the target's clock is ours (its session began around our start) */
  if (s->from_ts && ev->timestamp < s->from_ts &&
      dotnet_nt_sync_qpc(s->nt) + 1000000000ull > s->from_ts)
    return;
  uint32_t weight = sample_weight(s, ev->thread_id, ev->timestamp);
  if (type != SAMPLE_TYPE_MANAGED && !s->cfg->wall) {
    if (s->type_unreliable && weight && !s->runshare)
      s->runshare = dotnet_runshare_new(s->pid, s->thread_ids);
    if (s->type_unreliable && weight && s->runshare)
      weight = dotnet_runshare_weight(s->runshare, ev->thread_id, weight, &s->cpu_looks);
    else
      weight = 0;
    if (weight == 0) {
      s->external++;
      return;
    }
  }
  if (weight == 0) return;
  const uint8_t *raw;
  uint32_t nbytes;
  if (!dotnet_nt_stack(s->nt, ev->stack_id, &raw, &nbytes)) {
    s->unknown_stack++;
    return;
  }
  uint32_t ps = dotnet_nt_pointer_size(s->nt);
  uint32_t n = nbytes / ps;
  if (n > s->cfg->max_depth) n = s->cfg->max_depth; /* keep the leaf end */
  uint64_t ips[MAX_DEPTH_LIMIT];
  if (n > MAX_DEPTH_LIMIT) n = MAX_DEPTH_LIMIT;
  for (uint32_t i = 0; i < n; i++) {
    uint64_t v = 0;
    for (uint32_t b = ps; b-- > 0;)
      v = (v << 8) | raw[i * ps + b];
    ips[i] = v;
  }
  s->samples += weight;
  dotnet_stacks_add(s->stacks, s->pid, s->thread_ids ? (uint32_t)ev->thread_id : 0, ips, n, weight);
}

static void on_event(void *ctx, const struct dotnet_nt_event *ev) {
  struct dotnet_session *s = ctx;
  switch (ev->provider) {
    case DOTNET_PROV_SAMPLE_PROFILER:
      if (ev->event_id == EV_THREAD_SAMPLE) on_sample(s, ev);
      break;
    case DOTNET_PROV_RUNTIME:
      if (ev->event_id == EV_METHOD_LOAD_VERBOSE && s->methods) {
        s->method_events++;
        dotnet_methods_add_event(s->methods, ev->payload, ev->payload_len);
      } else if (ev->event_id == EV_R2R_GET_ENTRY_POINT && s->methods) {
        s->method_events++;
        s->r2r_entries++;
        dotnet_methods_add_r2r_event(s->methods, ev->payload, ev->payload_len);
      }
      break;
    case DOTNET_PROV_RUNDOWN:
      if ((ev->event_id == EV_RUNDOWN_DC_START_VERBOSE ||
           ev->event_id == EV_RUNDOWN_DC_END_VERBOSE) &&
          s->methods) {
        s->method_events++;
        dotnet_methods_add_event(s->methods, ev->payload, ev->payload_len);
      }
      break;
  }
}

struct dotnet_session *dotnet_session_new(const struct dotnet_cfg *cfg, uint32_t pid,
                                          bool thread_ids) {
  struct dotnet_session *s = calloc(1, sizeof(*s));
  if (!s) return NULL;
  s->cfg = cfg;
  s->pid = pid;
  s->thread_ids = thread_ids;
  s->fd = s->stop_fd = -1;
  struct dotnet_nt_limits lim = {.max_block = cfg->max_block,
                                 .max_metadata = 1u << 16,
                                 .max_stack_bytes = 8u << 20,
                                 .max_stacks = 1u << 18};
  s->nt = dotnet_nt_new(&lim, on_event, s);
  s->stacks = dotnet_stacks_new(cfg->max_stacks, cfg->max_depth);
  if (!s->nt || !s->stacks) {
    dotnet_session_free(s);
    return NULL;
  }
  dotnet_session_reset(s);
  return s;
}

void dotnet_session_close(struct dotnet_session *s) {
  if (s->fd >= 0) close(s->fd);
  if (s->stop_fd >= 0) close(s->stop_fd);
  s->fd = s->stop_fd = -1;
}

/* A new stream: everything but the samples and counters not drained yet. */
static void reset_stream(struct dotnet_session *s) {
  dotnet_session_close(s);
  s->undrained_bytes += dotnet_nt_stats(s->nt)->bytes - s->drained_bytes;
  dotnet_nt_reset(s->nt);
  s->eof = s->stopping = s->rundown = s->closed_by_us = s->starting = false;
  s->end_counted = s->end_logged = false;
  s->started_ns = s->stop_ns = s->ended_ns = s->stop_deadline_ns = 0;
  s->cutoff_ts = s->from_ts = 0;
  s->id = 0;
  s->drained_bytes = 0;
  memset(s->due, 0, sizeof(s->due));
  if (!s->keep_threads) dotnet_runshare_reset(s->runshare);
}

void dotnet_session_reset(struct dotnet_session *s) {
  reset_stream(s);
  pp_stack_table_clear(s->stacks);
  s->undrained_bytes = 0;
  s->methods = NULL;
  s->samples = s->external = s->unknown_stack = s->method_events = s->r2r_entries = 0;
  s->cpu_looks = 0;
  s->sampler_intervals = s->sampler_interval_ns = 0;
  s->rng = 0x2545f4914f6cdd1dull;
}

void dotnet_session_free(struct dotnet_session *s) {
  if (!s) return;
  dotnet_session_close(s);
  dotnet_nt_free(s->nt);
  pp_stack_table_free(s->stacks);
  dotnet_runshare_free(s->runshare);
  free(s);
}

/* Sends CollectTracing2 for `kind`; the reply (the session id) is read by
 * take_reply(). Returns the connection or -errno. */
static int send_start(struct dotnet_session *s, const char *sock, struct dotnet_methods *m,
                      enum dotnet_session_kind kind, bool rundown) {
  reset_stream(s);
  s->methods = m;
  uint32_t hz = s->cfg->frequency_hz ? s->cfg->frequency_hz : 100;
  s->interval_ns = 1000000000ull / hz;
  /* The runtime's sampler sleeps this long after each sweep, where it takes
   * the argument (.NET 10 does not: 1 ms; see sample_weight()). */
  uint32_t interval_ms = 1000 / hz ? 1000 / hz : 1;
  if (kind == DOTNET_SESSION_BURST) interval_ms = 1; /* the duty cycle sets the rate */
  char args[64];
  snprintf(args, sizeof(args), "SampleProfilerIntervalMS=%u", interval_ms);
  struct dotnet_provider_cfg prov[] = {
      {RUNTIME_KEYWORDS, 5, "Microsoft-Windows-DotNETRuntime", NULL},
      {SAMPLE_PROFILER_KEYWORDS, 4, "Microsoft-DotNETCore-SampleProfiler", args},
  };
  /* a rundown-only session still needs a provider: the runtime one, whose
   * MethodLoadVerbose events are harmless duplicates of the sampling one's;
   * a burst takes only the sampler (names come from the methods session) */
  const struct dotnet_provider_cfg *p = prov;
  size_t nprov = 2;
  if (kind == DOTNET_SESSION_RUNDOWN_ONLY || kind == DOTNET_SESSION_METHODS) nprov = 1;
  if (kind == DOTNET_SESSION_BURST) p = prov + 1, nprov = 1;
  uint8_t payload[512];
  long len =
      dotnet_ipc_collect2_payload(payload, sizeof(payload), s->cfg->buffer_mb, rundown, p, nprov);
  if (len < 0) return (int)len;
  s->rundown = rundown;
  return dotnet_ipc_send_command(s->pid, sock, DOTNET_IPC_SET_EVENTPIPE, DOTNET_IPC_EP_COLLECT2,
                                 payload, (size_t)len, IPC_TIMEOUT_MS);
}

/* Reads the reply to send_start(): on success the connection streams. */
static int take_reply(struct dotnet_session *s, int fd, int timeout_ms, uint32_t *hresult) {
  uint8_t reply[8];
  size_t rlen = 0;
  int rc = dotnet_ipc_read_reply(fd, timeout_ms, reply, sizeof(reply), &rlen, hresult);
  if (rc == 0 && rlen < 8) rc = -EBADMSG;
  if (rc < 0) {
    close(fd);
    s->fd = -1;
    s->starting = false;
    return rc;
  }
  s->id = 0;
  for (int i = 7; i >= 0; i--)
    s->id = (s->id << 8) | reply[i];
  s->fd = fd;
  s->starting = false;
  s->started_ns = pp_clock_ns();
  return 0;
}

int dotnet_session_start(struct dotnet_session *s, const char *sock, struct dotnet_methods *m,
                         enum dotnet_session_kind kind, bool rundown, uint32_t *hresult) {
  int fd = send_start(s, sock, m, kind, rundown);
  if (fd < 0) return fd;
  return take_reply(s, fd, IPC_TIMEOUT_MS, hresult);
}

int dotnet_session_start_async(struct dotnet_session *s, const char *sock, struct dotnet_methods *m,
                               enum dotnet_session_kind kind) {
  int fd = send_start(s, sock, m, kind, false);
  if (fd < 0) return fd;
  s->fd = fd;
  s->starting = true;
  s->started_ns = pp_clock_ns();
  return 0;
}

int dotnet_session_poll_start(struct dotnet_session *s, uint32_t *hresult) {
  if (!s->starting) return s->fd >= 0 ? 1 : -ENOTCONN;
  struct pollfd p = {.fd = s->fd, .events = POLLIN};
  if (poll(&p, 1, 0) <= 0) return 0;
  /* the reply is one small write: once readable it is all there */
  int rc = take_reply(s, s->fd, 100, hresult);
  return rc < 0 ? rc : 1;
}

int dotnet_session_pump(struct dotnet_session *s, size_t max_bytes) {
  if (s->stop_fd >= 0) { /* the StopTracing reply: read and discard */
    uint8_t tmp[64];
    ssize_t r = recv(s->stop_fd, tmp, sizeof(tmp), MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
      close(s->stop_fd);
      s->stop_fd = -1;
    }
  }
  if (s->fd < 0) return 1;
  if (s->starting) return 0; /* the reply to the start comes first */
  size_t total = 0;
  while (total < max_bytes) {
    size_t room = 0;
    uint8_t *dst = dotnet_nt_space(s->nt, &room);
    if (!dst) break; /* end tag or malformed: the stream is over for us */
    ssize_t r = recv(s->fd, dst, room, MSG_DONTWAIT);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return 0;
      break;
    }
    if (r == 0) break;
    dotnet_nt_commit(s->nt, (size_t)r);
    total += (size_t)r;
  }
  if (total >= max_bytes) return 0;
  s->eof = true;
  s->ended_ns = pp_clock_ns();
  close(s->fd);
  s->fd = -1;
  return 1;
}

int dotnet_session_request_stop(struct dotnet_session *s, const char *sock) {
  uint8_t p[8];
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(s->id >> (8 * i));
  s->stopping = true;
  s->stop_ns = pp_clock_ns();
  s->stop_deadline_ns = s->stop_ns + (uint64_t)s->cfg->stop_timeout_ms * 1000000ull;
  int fd = dotnet_ipc_send_command(s->pid, sock, DOTNET_IPC_SET_EVENTPIPE, DOTNET_IPC_EP_STOP, p,
                                   sizeof(p), IPC_TIMEOUT_MS);
  if (fd < 0) return fd;
  s->stop_fd = fd;
  return 0;
}

bool dotnet_session_busy(const struct dotnet_session *s) {
  return s->fd >= 0 || s->stop_fd >= 0;
}

void dotnet_session_drained(struct dotnet_session *s) {
  pp_stack_table_clear(s->stacks);
  s->samples = s->external = s->unknown_stack = s->method_events = s->r2r_entries = 0;
  s->cpu_looks = 0;
  s->sampler_intervals = s->sampler_interval_ns = 0;
  s->drained_bytes = dotnet_nt_stats(s->nt)->bytes;
  s->undrained_bytes = 0;
}

uint64_t dotnet_session_undrained_bytes(const struct dotnet_session *s) {
  return s->undrained_bytes + dotnet_nt_stats(s->nt)->bytes - s->drained_bytes;
}
