/* SPDX-License-Identifier: Apache-2.0 */
/*
 * java plugin: internal interfaces between its files.
 *
 *   java.c           descriptor, options, vtable
 *   jvm_lifecycle.c  the target table's attach/release of a JVM, arming the
 *                    agent each session, the snapshot's dump, stop
 *   jvm_target.c     is this pid a HotSpot JVM we may signal? nspid, uid/gid
 *   attach.c         HotSpot dynamic attach (forked helper with the target's creds)
 *   agent_files.c    the agent .so inside the target's filesystem, result files,
 *                    perf maps
 *   collect.c        parse the agent's dump and emit stacks
 *   java_metadata.c  properties / VM.flags -> application metadata
 */
#ifndef POLYPROF_JAVA_H
#define POLYPROF_JAVA_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "polyprof/kit.h"

/* ---- java.c / jvm_lifecycle.c: the plugin's state ---- */
struct java_state {
  const struct pp_host *host;
  struct pp_target_table *targets;
  int perfmap;   /* this session's mode */
  int64_t alloc; /* --mode alloc: sampling interval in bytes; 0: off this session */
  int64_t alloc_interval;
  int wall;   /* java.wall: the agent's timers on wall-clock time */
  int offcpu; /* --mode offcpu: blocked threads' stacks as off-CPU time */
  uint32_t frequency;
  uint32_t duration_s;
  int64_t attach_timeout_s, max_memory_mb, max_depth, min_age_ms;
  int thread_names, collect_metadata;
  size_t perfmap_copy_max; /* perfmap mode: largest map copied to the host's /tmp */
  char agent_host[1024];
  const char *agent_path_opt;
  int in_tick;     /* attaching is allowed (never from add_targets or snapshot) */
  int tick_busy;   /* this tick already talked to a JVM */
  uint64_t exited; /* JVMs seen exiting at a dump, since the last snapshot */
  /* stacks dumped early (jvm_lifecycle.c) from JVMs that exited before the
   * snapshot, kept for it: bounded in count and bytes */
  struct java_exited_dump {
    uint32_t pid;
    char *text;
    size_t len;
  } gone[16];
  size_t ngone;
  uint64_t early_dropped; /* early dumps dropped (bounds), since the last snapshot */
  uint64_t exit_dumps;    /* JVMs whose stacks at their end were read, since the last snapshot */
};

/* What the plugin holds for one JVM (the target table entry's data). No
 * descriptor: every attach operation opens and closes its own. */
struct java_jvm;

/* ---- jvm_lifecycle.c ---- */
int java_jvm_attach(void *plugin, struct pp_target_entry *t);
void java_jvm_release(void *plugin, struct pp_target_entry *t);
/* tick(): re-arms one JVM whose agent is dormant (a new session), or whose
 * mode changed, unless this tick already attached one. */
void java_jvm_rearm_one(struct java_state *st);
/* tick(): re-arms one JVM, or else takes one young JVM's stacks early (a
 * JVM that exits before the snapshot keeps them), unless this tick
 * already talked to a JVM. */
void java_jvm_tick_work(struct java_state *st);
/* fini(): what exited JVMs left for a snapshot that never came. */
void java_jvm_free_gone(struct java_state *st);
/* snapshot(): the agent's dump (or Compiler.perfmap) of every attached JVM. */
void java_jvm_collect_all(struct java_state *st, struct pp_sink *sink);
/* stop(): makes every armed agent dormant. */
void java_jvm_stop_all(struct java_state *st);

/* ---- jvm_target.c ---- */
struct java_target_info {
  uint32_t pid, nspid;
  uint64_t start_time;
  uid_t uid;
  gid_t gid;
  int has_libjvm;        /* libjvm.so mapped */
  int openj9;            /* OpenJ9 / J9 libraries mapped */
  int signal_dispatcher; /* a "Signal Dispatcher" thread exists */
  int xrs;               /* -Xrs / -XX:+ReduceSignalUsage */
  int attach_disabled;   /* -XX:+DisableAttachMechanism */
  int musl;              /* ld-musl mapped */
  char libjvm_path[512];
};
/* Reads /proc facts; 0, or -ESRCH if gone / start time differs. */
int java_target_inspect(uint32_t pid, uint64_t start_time, struct java_target_info *ti);
/* NULL if we may attach (and signal if needed), else the skip reason. */
const char *java_target_refusal(const struct java_target_info *ti, int socket_exists);
int java_target_alive(uint32_t pid, uint64_t start_time);
/* Milliseconds since the process started (start_time in clock ticks). */
double java_target_age_ms(uint64_t start_time);
/* The JVM's /tmp (a directory, resolved inside its root), or -errno with
 * a reason. */
int java_open_target_tmp(uint32_t pid, char *reason, size_t cap);
/* "a FIFO", "a symbolic link"...: what was found where a file of ours
 * should be, for a status. */
const char *java_file_kind(mode_t mode);

/* ---- attach.c ---- */
struct java_attach_reply {
  int status; /* the JVM's op status (first line), or -1 */
  char *body; /* the rest (NUL-terminated, malloc'd) */
  size_t len;
};
/* One attach operation (cmd + up to 3 args) on the JVM described by ti.
 * Runs in a forked child that connects with the target's uid/gid; signals
 * the JVM (once it is re-identified) only if allow_signal and the socket is
 * missing. Returns 0 with *reply filled, or a negative errno with err set. */
int java_attach(const struct java_target_info *ti, int allow_signal, int timeout_ms,
                const char *cmd, const char *a0, const char *a1, const char *a2,
                struct java_attach_reply *reply, char *err, size_t errlen);
void java_attach_reply_free(struct java_attach_reply *r);
/* The JVM's reply (len bytes in buf, malloc'd with room for a NUL after
 * them, taken over): status line, then the body. 0, or -EPROTO with err. */
int java_attach_parse_reply(char *buf, size_t len, struct java_attach_reply *reply, char *err,
                            size_t errlen);
/* `load` result: 0 if the agent returned 0, else -1 with a reason. */
int java_load_result(const struct java_attach_reply *r, int *rc, char *err, size_t errlen);
/* Whether the JVM's attach socket is there (a socket owned by the JVM's
 * user, checked as the connect will be). */
int java_socket_exists(uint32_t pid, uint32_t nspid);

/* ---- agent_files.c ---- */
/* Where our agent .so is on this host (next to the plugin, or agent_path). */
int java_agent_host_path(const char *configured, char *out, size_t len);
/* The path to pass to `load`, as the target sees it; copies the library
 * into the target's /tmp when the target has another mount namespace. */
int java_agent_target_path(const char *host_path, const struct java_target_info *ti, char *out,
                           size_t len, char *err, size_t errlen);
/* A fresh result-file name (inside the target's /tmp). */
void java_result_name(uint32_t nspid, char *name, size_t len);
/* Reads and unlinks <target tmp>/<name>; malloc'd, NUL-terminated, or NULL
 * with a reason (a refused or missing file). */
/* The dump an armed agent wrote when its JVM ended (exit=), read from the
 * JVM's /tmp held open since arming (dir) once the process is gone: a
 * regular file of the JVM's user (uid) with one link, at most max bytes;
 * removed. The text (malloc'd) or NULL. */
char *java_read_exit_dump(int dir, const char *name, uid_t uid, size_t max, size_t *len);
char *java_read_result(uint32_t pid, const char *name, size_t max, size_t *len, char *err,
                       size_t errlen);
/* perfmap mode: copy /tmp/perf-<pid>.map of a JVM of the host's pid
 * namespace in another mount namespace to dir (the plugin's runtime
 * directory; NULL: no copy), where perf looks once the JVM is gone; a map
 * larger than max_bytes (0: any) is not copied. 1 if a copy was made, 0 if
 * none is needed, or a negative errno with err set. */
int java_publish_perfmap(const char *dir, uint32_t pid, uint32_t nspid, size_t max_bytes, char *err,
                         size_t errlen);
/* The copy java_publish_perfmap made in dir, removed when its JVM is
 * released (only a regular file of ours is). */
void java_unpublish_perfmap(const char *dir, uint32_t pid);

/* ---- collect.c ---- */
struct java_collect_stats {
  uint64_t stacks, samples, dropped, bad_lines;
  uint64_t alloc_stacks, alloc_bytes, alloc_dropped; /* --mode alloc */
  uint64_t offcpu_stacks;                            /* --mode offcpu */
  int warned;                                        /* a W line was logged */
};
int java_collect_emit(const struct pp_host *host, struct pp_sink *sink, uint32_t pid,
                      const char *text, size_t len, int thread_names,
                      struct java_collect_stats *st);
/* The agent's "E" line, if any (for failed loads). */
int java_collect_error(const char *text, char *err, size_t errlen);

/* ---- java_metadata.c ---- */
/* From `properties` and `jcmd VM.flags` output: {"java_version": ..., "jvm_flags": [...]} */
char *java_metadata_json(const char *properties, const char *flags);
/* The value of key in Properties text (unescaped), or "" */
void java_property(const char *properties, const char *key, char *out, size_t len);
int java_major_version(const char *properties);

#endif
