/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The .NET plugin's internal header: what its files share.
 *
 *   dotnet.c          descriptor, options, vtable
 *   dotnet_target.c   the target table's attach/release, and per target:
 *                     reading the streams, rotating sessions at a snapshot,
 *                     the polite stop
 *   dotnet_ipc.c      the diagnostic socket (found and connected through the
 *                     kit's target files) and the IPC framing
 *   dotnet_session.c  one EventPipe session: stream, parser, sample intake
 *   dotnet_bursts.c   the sample profiler in short bursts whose duty cycle
 *                     gives the rate asked
 *   dotnet_perfmap.c  the perf-based modes: the runtime's perf map enabled
 *                     and disabled, what it costs the target reported
 *   dotnet_mapfiles.c the perf-map files the runtime wrote at our request,
 *                     removed once perf needs them no more
 *   dotnet_stacks.c   sampled IP stacks in the kit's stack table, named at
 *                     snapshot from the method map
 *   dotnet_runshare.c whether sampled threads ran, where the runtime's
 *                     sample type cannot tell
 *   dotnet_appid.c    appid of a .NET process
 *   methods.c/.h      code address -> method name map
 *   nettrace.c/.h     the nettrace stream parser
 *
 * Everything read from a target (IPC replies, the stream, its environment)
 * is untrusted and bounded; see docs/dotnet.md.
 */
#ifndef DOTNET_H
#define DOTNET_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "methods.h"
#include "nettrace.h"
#include "polyprof/kit.h"
#include "polyprof/plugin.h"

/* ---- plugin state (dotnet.c, dotnet_target.c) ---------------------- */

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
  bool bursts;                 /* the sample profiler runs in bursts (dotnet_bursts.c) */
  uint32_t max_duty_pct;       /* of the time the sampler may run in bursts */
  uint64_t tick_ns;            /* how often tick() runs */
};

struct dotnet_state {
  const struct pp_host *host;
  struct dotnet_cfg cfg;
  bool trace_mode, perfmap_mode;
  /* mode "auto": perfmap while a system-wide plugin (perf) samples, else
   * dotnet-trace with the sampler in bursts; what was chosen and why goes
   * to the log once and to each target's application metadata */
  bool auto_mode;
  bool bursts_opt;       /* sampling: bursts (auto falls back to bursts whatever it says) */
  bool perfless_bursts;  /* perfless: bursts (auto without perf samples in bursts) */
  bool perfless_skip;    /* this session: auto without perf, perfless none: targets skipped */
  const char *mode_name; /* "perfmap", "dotnet-trace" */
  char mode_reason[256];
  uint32_t max_methods;
  uint32_t attach_timeout_s;
  uint32_t socket_attempts; /* attach() calls that cover attach_timeout_s */
  struct pp_target_table *targets;
  /* perf-map files the runtime wrote at our request (dotnet_mapfiles.c):
   * they outlive the targets, until removed */
  struct dotnet_mapfiles **mapfiles;
  size_t n_mapfiles;
  uint64_t mapfiles_swept_ns;
  /* counters since the last snapshot */
  uint64_t truncated, parse_errors, unknown_frames;
};

/* What the perf map costs a target and how perf samples it (perfmap). */
struct dotnet_perfmap_cost {
  uint64_t first_ns, since_ns;           /* enabled; last report */
  uint64_t cpu_ns0, diag_cpu_ns0;        /* process and diagnostics-thread CPU at since_ns */
  uint64_t map_offset, map_lines;        /* the map counted so far (bytes, lines) */
  uint64_t lines_reported;               /* at the last log line */
  uint64_t lines_counted, bytes_counted; /* at the last snapshot's counters */
  bool reported;                         /* the first report (at info) was made */
};

/* One file the runtime writes in its /tmp at EnablePerfMap. */
struct dotnet_mapfile {
  bool ours; /* absent before EnablePerfMap: to be removed */
  bool seen; /* looked at since it appeared: dev/ino recorded (if ours) */
  dev_t dev;
  ino_t ino;
};

/* perf-<nspid>.map and perfinfo-<nspid>.map */
#define DOTNET_MAPFILES 2

/* The perf-map files of one process that the plugin caused, and the way
 * to remove them: its /tmp opened in its root while it lived. */
struct dotnet_mapfiles {
  int tmp;   /* the target's /tmp (O_DIRECTORY, in its root) */
  uid_t uid; /* the target's effective uid: the files' owner */
  uint32_t pid, nspid;
  uint64_t start_time;
  bool released;        /* the target was released (exited, exec'd, stopped) */
  uint64_t released_ns; /* when */
  struct dotnet_mapfile f[DOTNET_MAPFILES];
};

/* What the target table holds for an attached process (t->data). */
struct dotnet_target {
  uint32_t pid, nspid;
  char sock[PATH_MAX]; /* the diagnostic socket, a path in the target's root */
  struct dotnet_session *cur, *old;
  struct dotnet_methods *methods;
  bool perfmap;
  struct dotnet_perfmap_cost pm;
  struct dotnet_mapfiles *mapfiles; /* owned by the state's list; NULL: none to remove */
  bool logged_eof;
  uint64_t last_rundown_ns;
  uint64_t rundown_resets; /* method-map clears already answered by a rundown */
  bool rate_logged;
  struct dotnet_bursts *bursts; /* burst sampling state, NULL if continuous */
  char version[64];
  char appid[512];
};

/* dotnet_target.c */
extern const struct pp_target_ops dotnet_target_ops;
/* tick(): reads every target's streams. */
void dotnet_targets_pump(struct dotnet_state *st);
/* snapshot(): per target, its samples and facts (and the next session). */
void dotnet_targets_snapshot(struct dotnet_state *st, struct pp_sink *sink);
/* stop(): ends every session politely (a second at most), DisablePerfMap. */
void dotnet_targets_stop(struct dotnet_state *st);

/* ---- perf-based modes (dotnet_perfmap.c) --------------------------- */

struct pp_target_entry;
/* EnablePerfMap on the target (a table attach() result: 0, -errno to
 * retry, PP_ATTACH_FAIL for a runtime before .NET 8). */
int dotnet_perfmap_enable(struct dotnet_state *st, struct pp_target_entry *e,
                          struct dotnet_target *t);
/* The achieved rate and the target's cost logged: from tick() (sink
 * NULL) once, at info, when it has run a few seconds; at each snapshot at
 * debug level, with the counters. */
void dotnet_perfmap_report(struct dotnet_state *st, struct dotnet_target *t, struct pp_sink *sink,
                           bool exited);
/* DisablePerfMap (the process still runs). */
void dotnet_perfmap_disable(struct dotnet_state *st, struct dotnet_target *t);
/* ---- the perf-map files polyprof caused (dotnet_mapfiles.c) ---------- */

/* Before EnablePerfMap: the record of what is there already, with the
 * target's /tmp held open; NULL when nothing will be removed (its own
 * PerfMapEnabled, /tmp not reachable). Attached again: the same record. */
struct dotnet_mapfiles *dotnet_mapfiles_before_enable(struct dotnet_state *st, uint32_t pid,
                                                      uint32_t nspid, uint64_t start_time);
/* Records the files that appeared since (each checked once). */
void dotnet_mapfiles_note(struct dotnet_state *st, struct dotnet_mapfiles *mf);
/* The target was released: its files go once its process is gone. */
void dotnet_mapfiles_release(struct dotnet_mapfiles *mf);
/* Removes the files of released processes gone for a while; all: every
 * record's files, now (the plugin stops). */
void dotnet_mapfiles_sweep(struct dotnet_state *st, bool all);

/* CPU time (ns) of a process, and of its threads named prefix... */
uint64_t dotnet_process_cpu_ns(uint32_t pid);
uint64_t dotnet_thread_cpu_ns(uint32_t pid, const char *prefix);

/* ---- diagnostic IPC (dotnet_ipc.c) --------------------------------- */

#define DOTNET_IPC_SET_EVENTPIPE 0x02
#define DOTNET_IPC_SET_PROCESS 0x04
#define DOTNET_IPC_EP_STOP 0x01
#define DOTNET_IPC_EP_COLLECT2 0x03
#define DOTNET_IPC_PROC_INFO2 0x04
#define DOTNET_IPC_PROC_ENABLE_PERFMAP 0x05
#define DOTNET_IPC_PROC_DISABLE_PERFMAP 0x06
#define DOTNET_PERFMAP_TYPE_PERFMAP 3
#define DOTNET_IPC_TIMEOUT_MS 3000

#define DOTNET_IPC_MAX_PAYLOAD 65535 /* the u16 size field bounds every reply */

/* Finds the diagnostic socket of host pid `pid` (its namespace pid nspid,
 * start time `start`) in the directory the runtime uses (TMPDIR of its
 * environment, else /tmp), as a path in the target's root, and checks it
 * is a socket the target owns. -ENOENT: none yet (reason empty); another -errno:
 * refused (a link, a FIFO, a socket of another user...), reason says why. */
int dotnet_ipc_find_socket(uint32_t pid, uint32_t nspid, uint64_t start, char *out, size_t outlen,
                           char *reason, size_t cap);

/* Connects to the target's socket (checked by the kit: resolved in its
 * root, owner checked; never blocking) and sends one command with a
 * deadline; returns the fd, non-blocking. */
int dotnet_ipc_send_command(uint32_t pid, const char *sock, uint8_t set, uint8_t id,
                            const void *payload, size_t len, int timeout_ms);
/* Reads one reply header + payload. Returns 0 if the reply is OK (payload
 * copied, *len set), -EPROTO with *hresult for an error reply, or -errno. */
int dotnet_ipc_read_reply(int fd, int timeout_ms, uint8_t *payload, size_t cap, size_t *len,
                          uint32_t *hresult);
/* One command, one reply, connection closed. */
int dotnet_ipc_call(uint32_t pid, const char *sock, uint8_t set, uint8_t id, const void *payload,
                    size_t len, uint8_t *reply, size_t cap, size_t *reply_len, uint32_t *hresult,
                    int timeout_ms);

/* Builds a CollectTracing2 payload; returns its length or -ENOSPC. */
struct dotnet_provider_cfg {
  uint64_t keywords;
  uint32_t level;
  const char *name;
  const char *args; /* "k=v;..." or NULL */
};
long dotnet_ipc_collect2_payload(uint8_t *buf, size_t cap, uint32_t buffer_mb, int rundown,
                                 const struct dotnet_provider_cfg *p, size_t n);

/* ProcessInfo2 reply: fields we use, converted to UTF-8. */
struct dotnet_proc_info {
  uint64_t pid;
  char command_line[1024];
  char arch[32];
  char entrypoint[256];
  char version[64];
};
int dotnet_ipc_parse_info2(const uint8_t *p, size_t len, struct dotnet_proc_info *out);

/* ---- EventPipe sessions (dotnet_session.c) ------------------------- */

/*
 * One EventPipe session on one target: the streaming socket, its nettrace
 * parser and the stacks sampled from it. A target has one live sampling
 * session; at each snapshot the next session is started before the previous
 * one is stopped, so consecutive profiles have no gap (samples of the short
 * overlap are cut by timestamp so nothing is counted twice). A stopped
 * session keeps streaming (its last buffers, a rundown if it asked for one)
 * while the next one samples: nothing waits for it.
 */

/* What a session asks the runtime for. */
enum dotnet_session_kind {
  DOTNET_SESSION_SAMPLING = 0, /* sample profiler + live method loads */
  DOTNET_SESSION_RUNDOWN_ONLY, /* stopped at once: only the rundown */
  DOTNET_SESSION_METHODS,      /* live method loads only (burst sampling) */
  DOTNET_SESSION_BURST,        /* the sample profiler only, for one burst */
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
  uint32_t pid;    /* the target (host pid), whose socket this is */
  bool thread_ids; /* the stream's thread ids are host tids (no pid namespace) */
  /* the runtime marks threads running managed code "External" (.NET 9,
   * 10.0 before 10.0.4): whether a thread ran is read from its schedstat */
  bool type_unreliable;
  struct dotnet_runshare *runshare; /* allocated at the first such sample */
  bool keep_threads;                /* a new stream keeps the run share (bursts: same process) */
  bool eof, stopping;
  bool starting;     /* CollectTracing2 sent, its reply not read yet */
  bool rundown;      /* asked for a rundown at stop */
  bool closed_by_us; /* stream cut before its end tag: truncated */
  bool end_counted;  /* a truncated/malformed end was counted */
  bool end_logged;   /* the end of a rundown was logged */
  /* pp_clock_ns() times (QPC units: CLOCK_MONOTONIC ns, as the runtime
   * uses on Linux): start, StopTracing sent, stream ended, and when to give
   * up on a stopped stream */
  uint64_t started_ns, stop_ns, ended_ns, stop_deadline_ns;
  uint64_t cutoff_ts; /* drop samples after this QPC time (0: none) */
  uint64_t from_ts;   /* and before this one (0: none) */
  uint64_t interval_ns;
  const struct dotnet_cfg *cfg;
  struct dotnet_methods *methods; /* the target's map (not owned) */
  struct dotnet_nt *nt;
  struct pp_stack_table *stacks; /* IP stacks (dotnet_stacks.c) */
  /* since the last dotnet_session_drained() */
  uint64_t samples, external, unknown_stack, method_events;
  uint64_t r2r_entries;     /* of method_events: R2RGetEntryPoint */
  uint64_t cpu_looks;       /* schedstat reads for type_unreliable */
  uint64_t drained_bytes;   /* this stream's bytes at the last drain */
  uint64_t undrained_bytes; /* of earlier streams, since the last drain */
  /* the runtime's own sampling period, from consecutive samples of a
   * thread: shows whether SampleProfilerIntervalMS was honoured */
  uint64_t sampler_intervals, sampler_interval_ns;
  uint64_t rng;
  struct dotnet_thread_due due[DOTNET_MAX_THREADS];
};

struct dotnet_session *dotnet_session_new(const struct dotnet_cfg *cfg, uint32_t pid,
                                          bool thread_ids);
void dotnet_session_free(struct dotnet_session *s);
/* True for runtime versions ("9.0.20") whose SampleProfiler marks every
 * thread External, running managed code or not. */
bool dotnet_sample_type_unreliable(const char *version);

/* ---- burst sampling (dotnet_bursts.c) ----------------------------- */

/* The runtime's sampler suspends every managed thread at each sweep and
 * sweeps every ~1-4 ms whatever rate is asked: run continuously it costs
 * the target ~10 %. In bursts it sweeps for burst_ns out of every cycle_ns,
 * chosen from the sweep period measured in earlier bursts so that the
 * sweeps per second match the rate asked; samples are weighted by the duty
 * cycle. Method names come from the target's long-lived method session and
 * the attach rundown, so a burst needs no rundown. */
struct dotnet_bursts *dotnet_bursts_new(const struct dotnet_cfg *cfg, uint32_t pid, bool thread_ids,
                                        bool type_unreliable);
void dotnet_bursts_free(struct dotnet_bursts *b);
/* From tick(): starts a burst when one is due, stops it when it has run
 * its time, reads a stopped burst's stream. */
void dotnet_bursts_tick(struct dotnet_bursts *b, const struct pp_host *host, const char *sock,
                        struct dotnet_methods *m, uint64_t now);
/* The session holding the bursts' samples (drained at snapshot). */
struct dotnet_session *dotnet_bursts_session(struct dotnet_bursts *b);
/* Logs the achieved rate and the target's cost (once after a few seconds
 * of bursts, then at debug level per snapshot); adds counters. */
void dotnet_bursts_report(struct dotnet_bursts *b, const struct pp_host *host, struct pp_sink *sink,
                          const char *version);
/* Ends a burst in progress and reads the stream for up to a second. */
void dotnet_bursts_stop(struct dotnet_bursts *b, const char *sock);
/* Closes the stream at once (the process exited). */
void dotnet_bursts_close(struct dotnet_bursts *b);

/* ---- run share of sampled threads (dotnet_runshare.c) -------------- */

struct dotnet_runshare;
/* For process pid, whose stream names threads by host tid (host_tids) or
 * by their tid in its pid namespace. */
struct dotnet_runshare *dotnet_runshare_new(uint32_t pid, bool host_tids);
void dotnet_runshare_free(struct dotnet_runshare *r);
/* Forgets every thread (a new stream). NULL is fine. */
void dotnet_runshare_reset(struct dotnet_runshare *r);
/* The weight an External sample of thread tid keeps: its weight times the
 * share of time the thread ran over its latest window (schedstat run time
 * over wall time between two looks, at most every 50 ms per thread), the
 * fraction carried to the thread's next sample (no coin flips: less noise
 * on few samples). A busy thread keeps every sample, a blocked one none;
 * the counts are the thread's CPU time spread over the stacks it was
 * sampled in. 0 until the thread's first window is known. *looks counts
 * the schedstat reads. */
uint32_t dotnet_runshare_weight(struct dotnet_runshare *r, uint64_t tid, uint32_t weight,
                                uint64_t *looks);
/* Starts tracing on the target's socket; on success s->fd streams. Samples
 * and counters not drained yet are kept (late samples add up until a snapshot).
 * Returns 0 or -errno; *hresult holds the runtime's error code for -EPROTO. */
int dotnet_session_start(struct dotnet_session *s, const char *sock, struct dotnet_methods *m,
                         enum dotnet_session_kind kind, bool rundown, uint32_t *hresult);
/* The same without waiting for the runtime: the command is sent (s->fd
 * set, s->starting) and dotnet_session_poll_start() takes the reply. No
 * rundown. 0 or -errno. */
int dotnet_session_start_async(struct dotnet_session *s, const char *sock, struct dotnet_methods *m,
                               enum dotnet_session_kind kind);
/* 1 once the runtime accepted the session started by
 * dotnet_session_start_async() (the stream follows), 0 while its reply is
 * not there, -errno (-EPROTO with *hresult) if refused (connection closed). */
int dotnet_session_poll_start(struct dotnet_session *s, uint32_t *hresult);
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

/* ---- sampled stacks (dotnet_stacks.c) ------------------------------ */

/* A table for IP stacks of at most max_stacks distinct stacks of up to
 * max_depth frames. */
struct pp_stack_table *dotnet_stacks_new(uint32_t max_stacks, uint32_t max_depth);
/* Counts one stack of code addresses (leaf first). 0 or -ENOSPC (dropped). */
int dotnet_stacks_add(struct pp_stack_table *t, uint32_t pid, uint32_t tid, const uint64_t *ips,
                      uint32_t n, uint64_t count);
/* Emits every stack with its addresses named from `m` (runs of unnamed
 * frames fold into one "[unknown]"; *unknown_frames counts the unnamed
 * ones) and empties the table. Returns the number of stacks emitted. */
size_t dotnet_stacks_emit(struct pp_stack_table *t, struct dotnet_methods *m,
                          const struct pp_host *host, struct pp_sink *sink,
                          uint64_t *unknown_frames);

/* ---- appid (dotnet_appid.c) ---------------------------------------- */

/* "dotnet: app.dll (/srv/app/app.dll)" for `dotnet [exec] [opts] app.dll`,
 * "dotnet: App (/srv/app/App)" for an apphost executable; "" if neither. */
void dotnet_appid(uint32_t pid, char *out, size_t cap);

#endif
