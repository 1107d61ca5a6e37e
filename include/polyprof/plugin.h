/* SPDX-License-Identifier: Apache-2.0 */
/*
 * polyprof plugin ABI.
 *
 * This header is the only thing a plugin needs. A plugin is a shared object
 * that exports one symbol, PP_PLUGIN_ENTRY_SYMBOL, returning a pointer to a
 * static `struct pp_plugin` descriptor.
 *
 * Versioning rules (see docs/plugin-sdk.md):
 *  - A change that breaks existing plugins bumps PP_ABI_MAJOR; the host refuses
 *    a plugin whose abi_major differs from its own.
 *  - New fields are only ever appended to the end of a struct and bump
 *    PP_ABI_MINOR. Every struct that crosses the boundary starts with (or
 *    carries) a struct_size, and the reader only reads fields that lie inside
 *    the size the writer declared. A plugin built against an older minor keeps
 *    working with a newer host, and vice versa.
 *  - Enum values are never renumbered.
 *
 * Threading: the host calls the vtable from one thread. tick() and snapshot()
 * never run concurrently, so a plugin that samples from tick() needs no locks.
 * A plugin may start its own threads; then it owns their synchronisation and
 * must join them in stop().
 *
 * All functions returning int return 0 on success or a negative errno-style
 * code; the human-readable reason goes to host->log() once.
 *
 * Minor versions: 1.1 added PP_PERMANENT() (a failure not worth retrying);
 * 1.2 added PP_CAP_NEEDS_NOTHING, _NSENTER, _SETID and _FILE_OVERRIDE, and
 * made a privilege declaration mandatory (see the capability bits);
 * 1.3 added profile types: pp_sample.type (was reserved, 0 = CPU as before)
 * and the PP_SESSION_* bits that say which types a session asks for;
 * 1.4 added the JavaScript tier kinds PP_FRAME_JS_INTERPRETED.._BUILTIN
 * (a plugin sends them only to a host whose abi_minor is 4 or more and
 * PP_FRAME_JS otherwise; a host shows a kind it does not know as native),
 * and the step privileges PP_CAP_STEP_NSENTER and PP_CAP_STEP_SETID;
 * 1.5 added the optional dump() entry (every thread's stack, once) and
 * the step privileges PP_CAP_STEP_KILL and PP_CAP_STEP_FILE_OVERRIDE;
 * 1.6 added PP_CAP_NEEDS_FILE_OWNER and its step bit PP_CAP_STEP_FILE_OWNER.
 */
#ifndef POLYPROF_PLUGIN_H
#define POLYPROF_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PP_ABI_MAJOR 1
#define PP_ABI_MINOR 6

#define PP_PLUGIN_ENTRY_SYMBOL "polyprof_plugin_entry"

/* Permanent failure (ABI 1.1). init() or start() returning
 * PP_PERMANENT(errno) says the plugin cannot work on this host with this
 * configuration (the kernel refuses perf events, an event does not exist,
 * a required facility is missing), so restarting it would only repeat the
 * same message. The host logs it once and leaves the plugin off until its
 * configuration is reloaded (SIGHUP); the rest of the agent goes on (without
 * a system-wide plugin, perf-less). The argument is a positive errno value.
 * A host older than 1.1 sees an ordinary negative code and restarts the
 * worker with backoff as before, so returning it is always safe. Use it only
 * when nothing but an operator's change can help: a target that is not
 * ready yet or a transient resource shortage are ordinary errors. */
#define PP_PERMANENT_FLAG 0x40000000
#define PP_PERMANENT(err) (-(PP_PERMANENT_FLAG | (err)))
/* unsigned negation: no overflow for any int the plugin returns */
#define PP_IS_PERMANENT(rc) ((rc) < 0 && ((0u - (unsigned)(rc)) & PP_PERMANENT_FLAG) != 0)
#define PP_PERMANENT_ERRNO(rc) ((int)((0u - (unsigned)(rc)) & ~(unsigned)PP_PERMANENT_FLAG))

#if defined(__GNUC__)
#define PP_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#define PP_EXPORT __attribute__((visibility("default")))
#else
#define PP_PRINTF(fmt, args)
#define PP_EXPORT
#endif

/* What kind of code a frame is. Writers derive suffixes (`_[k]`, `_[p]`...)
 * and colours from this; plugins never type suffixes into names. */
enum pp_frame_kind {
  PP_FRAME_NATIVE = 0,           /* C, C++, Rust, Go: no suffix */
  PP_FRAME_KERNEL = 1,           /* _[k] */
  PP_FRAME_PYTHON = 2,           /* _[p]  "name (file:line)" */
  PP_FRAME_PYTHON_NATIVE = 3,    /* _[pn] native frame under Python */
  PP_FRAME_PYTHON_ERROR = 4,     /* _[pe] */
  PP_FRAME_JAVA_JIT = 5,         /* _[j] */
  PP_FRAME_JAVA_INLINED = 6,     /* _[i] */
  PP_FRAME_JAVA_INTERPRETED = 7, /* _[0] */
  PP_FRAME_JAVA_C1 = 8,          /* _[1] */
  PP_FRAME_RUBY = 9,             /* _[rb] "name - file:line" */
  PP_FRAME_PHP = 10,             /* _[php] "name file:line" */
  PP_FRAME_DOTNET = 11,          /* _[net] */
  PP_FRAME_JS = 12,              /* no suffix, "name (file:line)" */
  PP_FRAME_PSEUDO = 13,          /* synthetic frame: thread name, state... */
  PP_FRAME_ERROR = 14,           /* "[Profiling error: ...]" and friends */
  /* ABI 1.4: JavaScript frames whose tier is known, "name (file:line)" like
   * PP_FRAME_JS (which stays for readers that do not know the tier). */
  PP_FRAME_JS_INTERPRETED = 15, /* _[0] V8's interpreter (Ignition) */
  PP_FRAME_JS_BASELINE = 16,    /* _[1] V8's baseline compiler (Sparkplug) */
  PP_FRAME_JS_OPTIMIZED = 17,   /* _[j] Maglev or TurboFan code */
  PP_FRAME_JS_INLINED = 18,     /* _[i] inlined into optimized code */
  PP_FRAME_JS_BUILTIN = 19,     /* no suffix: a V8 builtin (no script) */
  PP_FRAME_KIND_COUNT
};

/* One frame. Strings are UTF-8 and only need to live until the call that
 * received them returns (the host copies them). A ';' or newline in a string
 * is replaced by the writers; the Java convention ';' -> '|' is applied there
 * too. */
struct pp_frame {
  const char *name; /* required */
  const char *file; /* source file or mapped object; NULL if unknown */
  uint32_t line;    /* 0 if unknown */
  uint32_t kind;    /* enum pp_frame_kind */
};

/* What a sample measures (ABI 1.3). Each type is its own profile with its
 * own unit; the host keeps them apart from sink to output. */
enum pp_profile_type {
  PP_PROFILE_CPU = 0,    /* on-CPU samples (count: samples) */
  PP_PROFILE_WALL = 1,   /* every thread whatever its state (count: samples) */
  PP_PROFILE_OFFCPU = 2, /* time blocked off the CPU (count: microseconds) */
  PP_PROFILE_ALLOC = 3,  /* allocated memory (count: bytes) */
  PP_PROFILE_TYPE_COUNT
};

/* One observed stack. */
struct pp_sample {
  uint32_t pid;                  /* host pid (thread group id) */
  uint32_t tid;                  /* host tid, 0 if unknown */
  const char *comm;              /* name for the comm frame; NULL = the process comm */
  const struct pp_frame *frames; /* frames[0] is the innermost (leaf) frame */
  uint32_t nframes;
  /* enum pp_profile_type (ABI 1.3; this field was reserved and zero before,
   * so older plugins emit CPU samples). Hosts before 1.3 ignore it: emit a
   * type other than CPU only when the session asked for it. */
  uint32_t type;
  uint64_t count; /* samples, microseconds or bytes, by type */
};

/* What set_pid_status() says of a target for one session. A process that
 * the plugin was handed and that yields no stack must get a status that
 * says why, so the profile and the log never show a silent nothing:
 *  - PP_PID_SKIPPED: the process cannot be profiled by this plugin as it is
 *    (an unsupported version, a build without the symbols needed, a file
 *    that failed the safe-access checks); retrying will not help until it
 *    changes (exec). The writers replace its stacks with
 *    "<comm>;[Profiling skipped: <reason>]".
 *  - PP_PID_ERROR: profiling it failed (attach refused, reads failing); the
 *    stacks become "<comm>;[Profiling error: <reason>]".
 *  - PP_PID_OK: clears a status set earlier in the same session.
 * A status holds for the session of the snapshot it was set in; set it
 * again in every snapshot for as long as it is true. The reason is one
 * line naming the cause (and the path or version involved). */
enum pp_pid_status {
  PP_PID_OK = 0,
  PP_PID_ERROR = 1,   /* -> "[Profiling error: <reason>]" */
  PP_PID_SKIPPED = 2, /* -> "[Profiling skipped: <reason>]" */
};

enum pp_log_level {
  PP_LOG_DEBUG = 0,
  PP_LOG_INFO = 1,
  PP_LOG_WARNING = 2,
  PP_LOG_ERROR = 3,
};

/* Capabilities and requirements (descriptor.capabilities).
 *
 * Privileges: a plugin's worker process holds exactly the Linux
 * capabilities its PP_CAP_NEEDS_* bits map to (and only those the agent
 * itself holds), runs with no_new_privs and under a seccomp allow-list
 * (docs/security.md). Every plugin must declare at least one NEEDS bit;
 * one that needs no privilege says PP_CAP_NEEDS_NOTHING. A descriptor with
 * none is refused by hosts of ABI 1.2 and later, naming the plugin. */
#define PP_CAP_SYSTEM_WIDE (1ull << 0) /* samples every process itself; gets no target list */
#define PP_CAP_RUNTIME (1ull << 1)     /* samples only the pids the host hands it */
#define PP_CAP_PERFLESS (1ull << 2)    /* its stacks stand on their own without perf */
/* Every capability the agent holds (a plugin that cannot say better; the
 * host warns about it). */
#define PP_CAP_NEEDS_ROOT (1ull << 8)
/* perf_event_open of other processes and the kernel: CAP_PERFMON (CAP_SYS_ADMIN
 * on kernels before 5.8), CAP_IPC_LOCK (ring buffers past perf_event_mlock_kb). */
#define PP_CAP_NEEDS_PERFMON (1ull << 9)
/* Reads another process (process_vm_readv, ptrace, /proc/PID/mem, maps, and
 * its files through /proc/PID/root or /proc/PID/map_files): CAP_SYS_PTRACE,
 * CAP_DAC_READ_SEARCH, CAP_CHECKPOINT_RESTORE (5.9+). */
#define PP_CAP_NEEDS_PTRACE (1ull << 10)
#define PP_CAP_NEEDS_SYSLOG (1ull << 11) /* CAP_SYSLOG: kernel addresses (kallsyms) */
#define PP_CAP_NEEDS_KILL (1ull << 12)   /* CAP_KILL: signals targets (attach protocols) */
/* ABI 1.2: the plugin needs no privilege at all (reads only what any user
 * may read). */
#define PP_CAP_NEEDS_NOTHING (1ull << 13)
/* ABI 1.2: setns() into a target's namespaces: CAP_SYS_ADMIN, CAP_SYS_CHROOT
 * (the latter for mount namespaces). */
#define PP_CAP_NEEDS_NSENTER (1ull << 14)
/* ABI 1.2: takes a target's uid/gid (attach protocols that check the peer's
 * credentials): CAP_SETUID, CAP_SETGID. */
#define PP_CAP_NEEDS_SETID (1ull << 15)
/* ABI 1.2: opens or connects to a target's files and sockets whatever their
 * owner and mode (an owner-only diagnostics socket): CAP_DAC_OVERRIDE. */
#define PP_CAP_NEEDS_FILE_OVERRIDE (1ull << 18)
/* ABI 1.6: removes a file a target created from a sticky directory (its
 * /tmp), where only the file's owner may unlink it: CAP_FOWNER. */
#define PP_CAP_NEEDS_FILE_OWNER (1ull << 23)
#define PP_CAP_NEEDS_ANY                                                                  \
  (PP_CAP_NEEDS_ROOT | PP_CAP_NEEDS_PERFMON | PP_CAP_NEEDS_PTRACE | PP_CAP_NEEDS_SYSLOG | \
   PP_CAP_NEEDS_KILL | PP_CAP_NEEDS_NOTHING | PP_CAP_NEEDS_NSENTER | PP_CAP_NEEDS_SETID | \
   PP_CAP_NEEDS_FILE_OVERRIDE | PP_CAP_NEEDS_FILE_OWNER)
/* ABI 1.4: step privileges. Beside its NEEDS bit, a plugin that needs
 * those capabilities only for single steps (entering a namespace; a forked
 * child taking a target's ids) sets the matching STEP bit: its worker then
 * holds them permitted but not effective, and the plugin raises them for
 * the calling thread around each step with the kit's pp_cap_step_begin()
 * and pp_cap_step_end() (polyprof/kit/cap_step.h). A host before 1.4
 * ignores the bits and keeps the capabilities effective, where the kit's
 * calls change nothing. */
#define PP_CAP_STEP_NSENTER (1ull << 19)
#define PP_CAP_STEP_SETID (1ull << 20)
/* ABI 1.5: signalling a target (CAP_KILL) and opening or connecting to a
 * target's owner-only file or socket (CAP_DAC_OVERRIDE) as single steps;
 * hosts of 1.4 ignore these two bits and keep the capabilities effective. */
#define PP_CAP_STEP_KILL (1ull << 21)
#define PP_CAP_STEP_FILE_OVERRIDE (1ull << 22)
/* ABI 1.6: removing a target's file (CAP_FOWNER) as a single step; a host
 * of 1.5 or older does not know PP_CAP_NEEDS_FILE_OWNER and grants neither. */
#define PP_CAP_STEP_FILE_OWNER (1ull << 24)
#define PP_CAP_ARCH_X86_64 (1ull << 16)
#define PP_CAP_ARCH_AARCH64 (1ull << 17) /* no arch bit set: any architecture */

/* A target handed to add_targets(). Fixed layout, never extended: a pid plus
 * its start time (clock ticks since boot, /proc/PID/stat field 22), which
 * together identify a process even when pids are reused.
 *
 * The target contract (the kit's target table, polyprof/kit/target_table.h,
 * implements all of it):
 *  - Identity: a target is (pid, start_time). The same pid announced with
 *    another start time is a new process that reused the pid: drop all
 *    state of the old one first.
 *  - Exec re-announcement: a process that exec()s keeps its pid and start
 *    time. The host re-reads every process's executable at session
 *    boundaries and announces an exec'd process again, with the same pid
 *    and start time, to every plugin its new image matches. A plugin must
 *    then drop what it knew of the old image and look at the new one (a
 *    shell that became Python is now Python; a Python that became
 *    something else is no longer this plugin's).
 *  - Session re-announcement: right after every start() the host announces
 *    the whole current set again. The same pid, start time and image as
 *    before change nothing.
 *  - Exit: the host does not announce exits. A plugin notices them (ESRCH,
 *    or a start time that no longer matches) and must then release every
 *    descriptor, mapping and thread it holds for that process at once, not
 *    at the next snapshot: a dead process must not pin anything.
 *  - A plugin may refuse a target after a closer look (not its runtime:
 *    silently; cannot be profiled: with a status, see pp_pid_status).
 *  - Never signal, connect to or open anything of a target that is not
 *    positively this process (pid and start time checked), and open a
 *    target's files only through the kit's target_files.h. */
struct pp_target {
  uint32_t pid;
  uint32_t reserved;
  uint64_t start_time;
};

/* Session parameters given to start(). */
struct pp_session {
  uint32_t struct_size;
  uint32_t frequency_hz; /* samples per second per thread (or per CPU for perf) */
  uint32_t duration_s;   /* length of one session; snapshot() comes about this often */
  uint32_t flags;        /* PP_SESSION_* */
  const char *mode;      /* the value of "<plugin>.mode", never "disabled" */
  /* out: how often the host should call tick(); 0 = never. Preset by the
   * host to 1e9 / frequency_hz. A plugin may keep this struct's address
   * until stop() and change the interval later (from tick() or
   * add_targets()): a shorter one applies at once, a longer one after the
   * next tick; 0 is ignored then. Hosts before this rule keep the first. */
  uint64_t tick_interval_ns;
};
#define PP_SESSION_CONTINUOUS (1u << 0)
#define PP_SESSION_PERFLESS (1u << 1) /* no system-wide plugin samples (none or refused) */
/* Profile types the session asks for (ABI 1.3). CPU is asked for unless
 * PP_SESSION_NO_CPU is set, so a host before 1.3 (no bits) means CPU only.
 * A plugin produces what it can of these and ignores the rest; the host
 * has already told the user which runtime cannot give which type. */
#define PP_SESSION_NO_CPU (1u << 2)
#define PP_SESSION_WALL (1u << 3)
#define PP_SESSION_OFFCPU (1u << 4)
#define PP_SESSION_ALLOC (1u << 5)

/* Option types a plugin may declare (descriptor.options). */
enum pp_option_type {
  PP_OPT_BOOL = 0,
  PP_OPT_INT = 1,
  PP_OPT_STRING = 2,
  PP_OPT_ENUM = 3, /* one of choices[] */
  PP_OPT_LIST = 4, /* YAML sequence of strings; CLI flag may be repeated or comma-separated */
};

/* A configuration key of the plugin, under its YAML section "<name>:". The
 * host validates the section against these (unknown key, wrong type, range)
 * before init() and exposes each as a CLI flag. Keys "enabled" and "mode" are
 * handled by the host: declare "mode" as PP_OPT_ENUM to list the plugin's
 * modes ("disabled" is always accepted on top of them). */
struct pp_option {
  const char *key; /* YAML key, [a-z0-9_]+ */
  uint32_t type;   /* enum pp_option_type */
  uint32_t reserved;
  const char *cli_flag;       /* long flag without "--"; NULL: "<plugin>-<key, '_' -> '-'>" */
  const char *default_value;  /* textual default, NULL: unset */
  const char *const *choices; /* PP_OPT_ENUM: NULL-terminated */
  int64_t min, max;           /* PP_OPT_INT: inclusive range (min > max: unbounded) */
  const char *help;           /* one line for --help and the docs */
};

struct pp_sink; /* opaque: where snapshot() puts its stacks */

/* Services the host offers. Read a field only if offsetof(field) +
 * sizeof(field) <= struct_size. */
struct pp_host {
  uint32_t struct_size;
  uint16_t abi_major;
  uint16_t abi_minor;
  void *host_data; /* opaque, for the host */

  void (*log)(const struct pp_host *host, int level, const char *fmt, ...) PP_PRINTF(3, 4);

  /* Values of the plugin's own options (validated, defaults applied).
   * Return 0, or -ENOENT for a key that is neither declared nor set, or
   * -EINVAL for a type mismatch. Returned strings live until fini(). */
  int (*config_string)(const struct pp_host *host, const char *key, const char **out);
  int (*config_int)(const struct pp_host *host, const char *key, int64_t *out);
  int (*config_bool)(const struct pp_host *host, const char *key, int *out);
  int (*config_list)(const struct pp_host *host, const char *key, const char *const **items,
                     size_t *count);

  uint64_t (*monotonic_ns)(const struct pp_host *host);
  uint64_t (*realtime_ns)(const struct pp_host *host);

  /* Sink: only valid inside snapshot(), with the sink it was given. */
  int (*emit)(struct pp_sink *sink, const struct pp_sample *sample);
  int (*set_appid)(struct pp_sink *sink, uint32_t pid, const char *appid);
  /* A JSON object (text) merged into the pid's application metadata. */
  int (*set_app_metadata)(struct pp_sink *sink, uint32_t pid, const char *json_object);
  int (*set_pid_status)(struct pp_sink *sink, uint32_t pid, int status, const char *reason);
  /* Plugin-wide counters reported in the session log and metadata, e.g.
   * "lost_samples", "failed_reads". Added up over the session. */
  int (*add_counter)(struct pp_sink *sink, const char *name, uint64_t delta);

  /* Process facts. Return 0 or a negative errno (-ESRCH: gone). */
  int (*proc_comm)(const struct pp_host *host, uint32_t pid, char *buf, size_t len);
  int (*proc_exe)(const struct pp_host *host, uint32_t pid, char *buf, size_t len);
  /* pid as seen inside the process's own pid namespace */
  int (*proc_ns_pid)(const struct pp_host *host, uint32_t pid, uint32_t *ns_pid);
  /* "/proc/<pid>/root": prefix for paths as the process sees them */
  int (*proc_root)(const struct pp_host *host, uint32_t pid, char *buf, size_t len);
  int (*proc_start_time)(const struct pp_host *host, uint32_t pid, uint64_t *start_time);
  /* A private directory for this plugin's scratch files (created, 0700). */
  const char *(*scratch_dir)(const struct pp_host *host);
};

/* The descriptor. Read a field only if it lies within struct_size. */
struct pp_plugin {
  uint16_t abi_major; /* PP_ABI_MAJOR the plugin was built against */
  uint16_t abi_minor;
  uint32_t struct_size; /* sizeof(struct pp_plugin) the plugin was built with */
  const char *name;     /* [a-z0-9_]+: YAML section, CLI prefix, log tag */
  const char *version;
  const char *description;
  uint64_t capabilities; /* PP_CAP_* */

  /* Target matching, done by the host from one /proc scan per tick. A
   * process matches if its exe basename matches one of match_exe or one of
   * its mapped files' basenames matches one of match_maps (fnmatch patterns,
   * NULL-terminated lists, NULL = none). Ignored for PP_CAP_SYSTEM_WIDE. */
  const char *const *match_exe;
  const char *const *match_maps;

  const struct pp_option *options; /* its configuration keys */
  uint32_t option_count;
  uint32_t reserved;

  int (*init)(const struct pp_host *host, void **state);
  int (*start)(void *state, struct pp_session *session);
  /* New processes. Called right after start() with the current set and then
   * whenever the scan finds new matching processes, or an exec'd one again
   * (see struct pp_target for the whole contract). A plugin may ignore a
   * pid after a closer look. */
  int (*add_targets)(void *state, const struct pp_target *targets, size_t count);
  /* Optional (NULL): periodic work at session->tick_interval_ns. */
  int (*tick)(void *state, uint64_t now_ns);
  /* Hand over everything sampled since the last snapshot; keep sampling. */
  int (*snapshot)(void *state, struct pp_sink *sink);
  int (*stop)(void *state);
  void (*fini)(void *state);
  /* Optional (ABI 1.5; NULL, or beyond an older plugin's struct_size):
   * read the stack every thread of every target is in now, once, and emit
   * one sample per thread with its tid, count 1 and, where the plugin
   * knows it, its name as comm. Sampling goes on; nothing of it is handed
   * over here. Called between start() and stop(), from the same thread as
   * the rest (`polyprof dump`). A target not attached yet yields nothing. */
  int (*dump)(void *state, struct pp_sink *sink);
};

typedef const struct pp_plugin *(*pp_plugin_entry_fn)(void);

/* Convenience for plugins: fills the header fields. */
#define PP_PLUGIN_HEADER \
  .abi_major = PP_ABI_MAJOR, .abi_minor = PP_ABI_MINOR, .struct_size = sizeof(struct pp_plugin)

#define PP_HOST_HAS(host, field) \
  ((host)->struct_size >= offsetof(struct pp_host, field) + sizeof((host)->field))

#ifdef __cplusplus
}
#endif

#endif /* POLYPROF_PLUGIN_H */
