/*
 * One EventPipe session on one target: the streaming socket, its nettrace
 * parser and the stacks aggregated from it. A target has one live sampling
 * session; at each snapshot the next session is started before the previous
 * one is stopped, so consecutive profiles have no gap (samples of the short
 * overlap are cut by timestamp so nothing is counted twice). A stopped
 * session keeps streaming (its last buffers, a rundown if it asked for one)
 * while the next one samples: nothing waits for it.
 */
#ifndef DOTNET_SESSION_H
#define DOTNET_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "agg.h"
#include "methods.h"
#include "nettrace.h"

struct dotnet_cfg {
  uint32_t frequency_hz;
  uint32_t buffer_mb;
  uint32_t max_block;
  uint32_t max_stacks;
  uint32_t max_depth;
  uint32_t stop_timeout_ms;    /* a stopped session may stream this long */
  bool wall;                   /* count threads outside managed code too */
  bool rundown;                /* rundown at all (else live JIT events only) */
  uint32_t rundown_interval_s; /* again this often after attach; 0: never */
};

/* What a session asks the runtime for. */
enum dotnet_session_kind {
  DOTNET_SESSION_SAMPLING = 0, /* sample profiler + live method loads */
  DOTNET_SESSION_RUNDOWN_ONLY, /* stopped at once: only the rundown */
};

struct dotnet_thread_due {
  uint64_t tid;
  uint64_t due; /* timestamp of this thread's previous sample */
};

#define DOTNET_MAX_THREADS 4096 /* downsampling state; more threads share slots */

struct dotnet_session {
  int fd;      /* nettrace stream, -1 when closed */
  int stop_fd; /* StopTracing reply pending, -1 if none */
  uint64_t id;
  bool eof, stopping;
  bool rundown;      /* asked for a rundown at stop */
  bool closed_by_us; /* stream cut before its end tag: truncated */
  bool end_counted;  /* a truncated/malformed end was counted */
  bool end_logged;   /* the end of a rundown was logged */
  /* dotnet_session_now_ts() times: start, StopTracing sent, stream ended,
   * and when to give up on a stopped stream */
  uint64_t started_ns, stop_ns, ended_ns, stop_deadline_ns;
  uint64_t cutoff_ts; /* drop samples after this QPC time (0: none) */
  uint64_t interval_ns;
  const struct dotnet_cfg *cfg;
  struct dotnet_methods *methods; /* the target's map (not owned) */
  struct dotnet_nt *nt;
  struct dotnet_agg *agg;
  /* since the last dotnet_session_drained() */
  uint64_t samples, external, unknown_stack, method_events;
  uint64_t drained_bytes;   /* this stream's bytes at the last drain */
  uint64_t undrained_bytes; /* of earlier streams, since the last drain */
  /* the runtime's own sampling period, from consecutive samples of a
   * thread: shows whether SampleProfilerIntervalMS was honoured */
  uint64_t sampler_intervals, sampler_interval_ns;
  uint64_t rng;
  struct dotnet_thread_due due[DOTNET_MAX_THREADS];
};

struct dotnet_session *dotnet_session_new(const struct dotnet_cfg *cfg);
void dotnet_session_free(struct dotnet_session *s);
/* Starts tracing on the socket path; on success s->fd streams. Samples
 * and counters not drained yet are kept (late samples add up until a snapshot).
 * Returns 0 or -errno; *hresult holds the runtime's error code for -EPROTO. */
int dotnet_session_start(struct dotnet_session *s, const char *sock, struct dotnet_methods *m,
                         enum dotnet_session_kind kind, bool rundown, uint32_t *hresult);
/* Reads what is available without blocking (up to max_bytes). Returns 1 if
 * the stream ended (EOF, end tag or parse error), else 0. */
int dotnet_session_pump(struct dotnet_session *s, size_t max_bytes);
/* Sends StopTracing on a second connection; the reply is read by pump.
 * The stream then has cfg->stop_timeout_ms to end (stop_deadline_ns). */
int dotnet_session_request_stop(struct dotnet_session *s, const char *sock);
/* True while the stream or the StopTracing reply is still open. */
bool dotnet_session_busy(const struct dotnet_session *s);
/* Closes the sockets (the runtime ends the session when writes fail). */
void dotnet_session_close(struct dotnet_session *s);
/* Forgets the samples and counters handed out so far; the stream goes on. */
void dotnet_session_drained(struct dotnet_session *s);
/* Stream bytes received since the last drain. */
uint64_t dotnet_session_undrained_bytes(const struct dotnet_session *s);
/* Back to an empty, closed session ready for dotnet_session_start(). */
void dotnet_session_reset(struct dotnet_session *s);
/* Monotonic time in QPC units (CLOCK_MONOTONIC ns, as the runtime uses). */
uint64_t dotnet_session_now_ts(void);

#endif
