/*
 * java plugin: internal interfaces between its files.
 *
 *   java.c         descriptor, options, per-JVM state machine, vtable
 *   jvm_target.c   is this pid a HotSpot JVM we may signal? nspid, uid/gid
 *   attach.c       HotSpot dynamic attach (forked helper with the target's creds)
 *   agent_files.c  the agent .so inside the target's filesystem, result files
 *   collect.c      parse the agent's dump and emit stacks
 *   metadata.c     properties / VM.flags -> application metadata
 */
#ifndef POLYPROF_JAVA_H
#define POLYPROF_JAVA_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "polyprof/plugin.h"

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
/* Opens /proc/<pid>/root/tmp without following links the target planted. */
int java_open_target_tmp(uint32_t pid);

/* ---- attach.c ---- */
struct java_attach_reply {
  int status; /* the JVM's op status (first line), or -1 */
  char *body; /* the rest (NUL-terminated, malloc'd) */
  size_t len;
};
/* One attach operation (cmd + up to 3 args) on the JVM described by ti.
 * Runs in a forked child with the target's uid/gid; signals the JVM (once
 * it is re-identified) only if allow_signal and the socket is missing.
 * Returns 0 with *reply filled, or a negative errno with err set. */
int java_attach(const struct java_target_info *ti, int allow_signal, int timeout_ms,
                const char *cmd, const char *a0, const char *a1, const char *a2,
                struct java_attach_reply *reply, char *err, size_t errlen);
void java_attach_reply_free(struct java_attach_reply *r);
/* `load` result: 0 if the agent returned 0, else -1 with a reason. */
int java_load_result(const struct java_attach_reply *r, int *rc, char *err, size_t errlen);
int java_socket_exists(uint32_t pid, uint32_t nspid);

/* ---- agent_files.c ---- */
/* Where our agent .so is on this host (next to the plugin, or agent_path). */
int java_agent_host_path(const char *configured, char *out, size_t len);
/* The path to pass to `load`, as the target sees it; copies the library
 * into the target's /tmp when the target has another mount namespace. */
int java_agent_target_path(const char *host_path, uint32_t pid, char *out, size_t len, char *err,
                           size_t errlen);
/* A fresh result-file name (inside the target's /tmp). */
void java_result_name(uint32_t nspid, char *name, size_t len);
/* Reads and unlinks <target tmp>/<name>; malloc'd, NUL-terminated. */
char *java_read_result(uint32_t pid, const char *name, size_t max, size_t *len);
/* perfmap mode: copy /tmp/perf-<nspid>.map of a container to the host's
 * /tmp/perf-<pid>.map so perf finds it. */
int java_publish_perfmap(uint32_t pid, uint32_t nspid, char *err, size_t errlen);

/* ---- collect.c ---- */
struct java_collect_stats {
  uint64_t stacks, samples, dropped, bad_lines;
};
int java_collect_emit(const struct pp_host *host, struct pp_sink *sink, uint32_t pid,
                      const char *text, size_t len, int thread_names,
                      struct java_collect_stats *st);
/* The agent's "E" line, if any (for failed loads). */
int java_collect_error(const char *text, char *err, size_t errlen);

/* ---- metadata.c ---- */
/* From `properties` and `jcmd VM.flags` output: {"java_version": ..., "jvm_flags": [...]} */
char *java_metadata_json(const char *properties, const char *flags);
/* The value of key in Properties text (unescaped), or "" */
void java_property(const char *properties, const char *key, char *out, size_t len);
int java_major_version(const char *properties);

#endif
