/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The runtime's sample profiler in short bursts (see dotnet.h). Each burst
 * is an EventPipe session with the sampler as its only provider, started,
 * left to sweep for burst_ns and stopped without a rundown: the method map
 * is kept from the attach rundown and the target's methods session (live
 * MethodLoad and R2RGetEntryPoint events), so a burst costs the target a
 * session start and stop and its sweeps, nothing more.
 *
 * Plan: the runtime sweeps every p ns once sampling (p measured from the
 * gaps between a thread's consecutive samples of earlier bursts; 1 ms
 * until then). A burst lasts one tick (10 ms; the stop is sent from the
 * tick after the runtime accepted the start) and the cycle makes the
 * sweeps per second f, the rate asked (11 Hz: a burst every ~0.6-0.9 s,
 * 100 Hz: every 0.1 s, as the duty cap allows). A sample then stands for the
 * thread's gap to its previous sample times cycle / burst, in units of the
 * session interval: the counts are time in stack x f, as in continuous
 * sampling.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dotnet.h"

#define CYCLE_TARGET_NS 1000000000ull
#define MIN_BURST_TICKS 1
#define MAX_BURST_TICKS 1
#define SWEEP_GUESS_NS 1000000ull
#define SWEEP_MIN_NS 100000ull
#define SWEEP_MAX_NS 100000000ull
#define PUMP_BYTES (8u << 20)
#define REPORT_AFTER_NS 2000000000ull

struct dotnet_bursts {
  const struct dotnet_cfg *cfg;
  uint32_t pid;
  struct dotnet_session *s;
  bool starting;           /* asked to start, the runtime has not answered */
  bool active;             /* sweeping now: the stream is left unread */
  uint64_t asked_ns;       /* when the start was asked */
  uint64_t start_ns;       /* this burst's start */
  uint64_t stop_at_ns;     /* when to stop it */
  uint64_t next_ns;        /* next burst */
  uint64_t cycle_ns;       /* this burst's cycle */
  uint64_t sweep_ns;       /* the runtime's sweep period, measured */
  uint64_t gaps0, gap_ns0; /* the session's gap counters at this burst's start */
  /* since the first burst: for the achieved rate and the cost */
  uint64_t first_ns, bursts, swept_ns, failures;
  bool reported;
  /* since the last report */
  uint64_t r_bursts, r_swept_ns, r_since_ns, r_ep_cpu_ns;
};

struct dotnet_bursts *dotnet_bursts_new(const struct dotnet_cfg *cfg, uint32_t pid, bool thread_ids,
                                        bool type_unreliable) {
  struct dotnet_bursts *b = calloc(1, sizeof(*b));
  if (!b) return NULL;
  b->cfg = cfg;
  b->pid = pid;
  b->sweep_ns = SWEEP_GUESS_NS;
  b->s = dotnet_session_new(cfg, pid, thread_ids);
  if (!b->s) {
    free(b);
    return NULL;
  }
  b->s->type_unreliable = type_unreliable;
  b->s->keep_threads = true;
  return b;
}

void dotnet_bursts_free(struct dotnet_bursts *b) {
  if (!b) return;
  dotnet_session_free(b->s);
  free(b);
}

struct dotnet_session *dotnet_bursts_session(struct dotnet_bursts *b) {
  return b->s;
}

/* CPU time (ns) of the target's threads named ".NET EventPipe" (the
 * sessions' streaming threads) or ".NET Sample..." (the sampler, where the
 * runtime names it; current runtimes do not): a part of what the sessions
 * cost the target besides the suspensions. */
static uint64_t eventpipe_cpu_ns(uint32_t pid) {
  return dotnet_thread_cpu_ns(pid, ".NET EventPipe") + dotnet_thread_cpu_ns(pid, ".NET Sample");
}

/* Burst length and cycle for the rate asked and the sweep period known. */
static void plan(struct dotnet_bursts *b, uint64_t *burst_ns, uint64_t *cycle_ns) {
  uint64_t hz = b->cfg->frequency_hz ? b->cfg->frequency_hz : 100;
  uint64_t burst = CYCLE_TARGET_NS / 1000000ull * hz * b->sweep_ns / 1000ull; /* f * p per s */
  uint64_t tick = b->cfg->tick_ns ? b->cfg->tick_ns : 10000000ull;
  /* many short bursts rather than a few long ones: a burst's sweeps are
   * close in time, so the number of bursts is what makes the statistics
   * (with 40 ms bursts a 3:1 split measured in 16 s strayed by 8 points);
   * each costs the target a session start and stop */
  if (burst > MAX_BURST_TICKS * tick) burst = MAX_BURST_TICKS * tick;
  if (burst < MIN_BURST_TICKS * tick) burst = MIN_BURST_TICKS * tick;
  /* sweeps per cycle = burst / p must be f per second of cycle */
  uint64_t cycle = burst * 1000000000ull / hz / b->sweep_ns;
  /* each sweep costs the target a suspension of its managed threads,
   * dearer on a loaded host (where the sweeps also slow down): the duty
   * cap bounds the cost at a share of continuous sampling's, at the price
   * of fewer sweeps than asked (reported) */
  uint64_t duty = b->cfg->max_duty_pct ? b->cfg->max_duty_pct : 100;
  if (cycle < burst * 100 / duty) cycle = burst * 100 / duty;
  *burst_ns = burst;
  *cycle_ns = cycle;
}

static void burst_failed(struct dotnet_bursts *b, const struct pp_host *host, int rc) {
  dotnet_session_close(b->s);
  b->starting = false;
  if (b->failures++ == 0)
    PP_INFO(host, "pid %u: sampling burst not started (%s): tried again every cycle", b->pid,
            rc == -EPROTO ? "refused by the runtime" : strerror(-rc));
}

/* The start is asked for without waiting: a runtime slow to answer (a
 * loaded host, a rundown being written) must not hold up the other
 * targets or the snapshot. */
static void start_burst(struct dotnet_bursts *b, const struct pp_host *host, const char *sock,
                        struct dotnet_methods *m, uint64_t now) {
  b->gaps0 = b->s->sampler_intervals;
  b->gap_ns0 = b->s->sampler_interval_ns;
  uint64_t burst, cycle;
  plan(b, &burst, &cycle);
  /* a failed burst is tried again a cycle later, like a sampler that
   * missed its time; the methods session says whether the target lives */
  b->next_ns = now + cycle;
  b->cycle_ns = cycle;
  int rc = dotnet_session_start_async(b->s, sock, m, DOTNET_SESSION_BURST);
  if (rc < 0) {
    burst_failed(b, host, rc);
    return;
  }
  b->starting = true;
  b->asked_ns = now;
}

/* The runtime accepted: the sweeps begin now. */
static void burst_started(struct dotnet_bursts *b, uint64_t now) {
  uint64_t burst, cycle;
  plan(b, &burst, &cycle);
  b->starting = false;
  b->active = true;
  b->start_ns = now;
  b->stop_at_ns = now + burst;
  b->s->from_ts = now;
  if (b->next_ns < b->stop_at_ns) b->next_ns = now + cycle; /* a slow start: keep the duty */
  if (!b->first_ns) {
    b->first_ns = b->r_since_ns = now;
    b->r_ep_cpu_ns = eventpipe_cpu_ns(b->pid);
  }
}

static void stop_burst(struct dotnet_bursts *b, const char *sock, uint64_t now) {
  b->active = false;
  uint64_t swept = now > b->start_ns ? now - b->start_ns : 1;
  /* a late tick (a loaded host) made the burst longer than planned: the
   * next one waits longer, so the duty cap holds */
  uint64_t duty = b->cfg->max_duty_pct ? b->cfg->max_duty_pct : 100;
  if (swept * 100 / duty > b->cycle_ns) {
    b->cycle_ns = swept * 100 / duty;
    if (b->next_ns < b->start_ns + b->cycle_ns) b->next_ns = b->start_ns + b->cycle_ns;
  }
  /* the stream is read after this: its samples are weighted by the duty
   * cycle they were taken at */
  uint64_t hz = b->cfg->frequency_hz ? b->cfg->frequency_hz : 100;
  uint64_t ivl = 1000000000ull / hz * swept / b->cycle_ns;
  b->s->interval_ns = ivl ? ivl : 1;
  /* a runtime slow to act on the stop sweeps on: those sweeps are past
   * the window the weights are for */
  b->s->cutoff_ts = now;
  b->bursts++;
  b->r_bursts++;
  b->swept_ns += swept;
  b->r_swept_ns += swept;
  if (dotnet_session_request_stop(b->s, sock) < 0) {
    b->s->eof = b->s->closed_by_us = true;
    dotnet_session_close(b->s);
  }
}

/* After a burst's stream ended: the sweep period it showed. */
static void learn_sweep(struct dotnet_bursts *b) {
  uint64_t gaps = b->s->sampler_intervals - b->gaps0;
  uint64_t ns = b->s->sampler_interval_ns - b->gap_ns0;
  /* drained meanwhile (see dotnet_bursts_report), or too few */
  if (b->s->sampler_intervals < b->gaps0 || b->s->sampler_interval_ns < b->gap_ns0 || gaps < 4)
    return;
  uint64_t p = ns / gaps;
  if (p < SWEEP_MIN_NS) p = SWEEP_MIN_NS;
  if (p > SWEEP_MAX_NS) p = SWEEP_MAX_NS;
  b->sweep_ns = (b->sweep_ns + p) / 2;
}

void dotnet_bursts_tick(struct dotnet_bursts *b, const struct pp_host *host, const char *sock,
                        struct dotnet_methods *m, uint64_t now) {
  if (b->starting) {
    uint32_t hr = 0;
    int rc = dotnet_session_poll_start(b->s, &hr);
    if (rc == 0 && now - b->asked_ns >= (uint64_t)DOTNET_IPC_TIMEOUT_MS * 1000000ull)
      rc = -ETIMEDOUT;
    if (rc < 0) burst_failed(b, host, rc);
    if (rc <= 0) return;
    burst_started(b, now);
  }
  if (b->active) {
    if (now >= b->stop_at_ns) stop_burst(b, sock, now);
    return;
  }
  if (dotnet_session_busy(b->s)) {
    dotnet_session_pump(b->s, PUMP_BYTES);
    if (dotnet_session_busy(b->s) && now >= b->s->stop_deadline_ns) {
      b->s->eof = b->s->closed_by_us = true;
      dotnet_session_close(b->s);
    }
    if (!dotnet_session_busy(b->s)) learn_sweep(b);
    return;
  }
  if (now >= b->next_ns) start_burst(b, host, sock, m, now);
}

void dotnet_bursts_report(struct dotnet_bursts *b, const struct pp_host *host, struct pp_sink *sink,
                          const char *version) {
  uint64_t now = pp_clock_ns();
  /* the session's gap counters were just drained: a burst being read
   * learns its sweep period from what is left of it */
  b->gaps0 = b->gap_ns0 = 0;
  host->add_counter(sink, "sampling_bursts", b->r_bursts);
  host->add_counter(sink, "sampling_burst_us", b->r_swept_ns / 1000u);
  if (!b->first_ns || now <= b->r_since_ns) return;
  uint64_t ep = eventpipe_cpu_ns(b->pid);
  double secs = (double)(now - b->r_since_ns) / 1e9;
  double sweeps = (double)b->r_swept_ns / (double)b->sweep_ns / secs;
  double duty = (double)b->r_swept_ns / (double)(now - b->r_since_ns) * 100.0;
  double ep_ms = ep >= b->r_ep_cpu_ns ? (double)(ep - b->r_ep_cpu_ns) / 1e6 / secs : 0;
  bool first = !b->reported && now - b->first_ns >= REPORT_AFTER_NS;
  PP_LOG(host, first ? PP_LOG_INFO : PP_LOG_DEBUG,
         "pid %u: .NET %s sampled in bursts: %.1f sweeps/s (asked %u Hz), the runtime sweeping "
         "every %.2f ms for %.1f %% of the time (%llu bursts); its EventPipe threads used %.2f ms "
         "CPU/s besides",
         b->pid, version[0] ? version : "?", sweeps, b->cfg->frequency_hz,
         (double)b->sweep_ns / 1e6, duty, (unsigned long long)b->r_bursts, ep_ms);
  if (first) b->reported = true;
  b->r_bursts = b->r_swept_ns = 0;
  b->r_since_ns = now;
  b->r_ep_cpu_ns = ep;
}

void dotnet_bursts_stop(struct dotnet_bursts *b, const char *sock) {
  if (b->starting) { /* the runtime ends a session whose reader is gone */
    dotnet_session_close(b->s);
    b->starting = false;
  }
  if (b->active) stop_burst(b, sock, pp_clock_ns());
}

void dotnet_bursts_close(struct dotnet_bursts *b) {
  b->active = b->starting = false;
  dotnet_session_close(b->s);
}
