/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal interface of the php plugin (not part of the plugin ABI).
 *
 *   php.c         descriptor, options table and vtable: sampling each target
 *                 at every tick, the snapshot
 *   php_attach.c  the target table's callbacks: whether a process is one of
 *                 ours (proc_filter), which ELF holds executor_globals, the
 *                 PHP version; per-binary facts cached
 *   php_layout.c  per-version struct offsets (data, from phpspy's headers)
 *   php_walk.c    reads one call stack (current_execute_data chain)
 *   php_types.c   what a stack counts as: cpu, wall, off-CPU (the state)
 */
#ifndef PP_PLUGIN_PHP_H
#define PP_PLUGIN_PHP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "polyprof/kit.h"

#define PHP_STR_MAX 256 /* names and paths are cut here, like phpspy's 255 bytes */
#define PHP_NAME_MAX (2 * PHP_STR_MAX + 8) /* "Class::function" */
#define PHP_MAX_DEPTH_LIMIT 1024

/* Byte offsets of the few fields the walk reads (x86_64). */
struct php_layout {
  int major, minor;
  uint16_t eg_current_execute_data;
  uint16_t ed_opline, ed_func, ed_prev;
  uint16_t ed_size;             /* bytes of zend_execute_data copied (covers ed_prev) */
  uint16_t op_last, op_opcodes; /* the function's instructions: a saved opline must be one */
  uint16_t op_filename, op_line_start;
  uint16_t op_size; /* bytes of zend_op_array copied (covers op_line_start) */
  int tested;       /* checked against a live process in this repository's tests */
};

/* NULL if the version is not in the table. */
const struct php_layout *php_layout_find(int major, int minor);
/* "7.0, 7.1, ..." for messages */
const char *php_layout_versions(void);

/* What attaching to a process found. */
struct php_attach {
  uint64_t eg_addr; /* runtime address of executor_globals */
  const struct php_layout *layout;
  int major, minor;
  char module[256];   /* the ELF holding executor_globals, as the target names it */
  uint64_t last_leaf; /* the previous sample's leaf frame: where to read the VM stack at once */
};

/* A target's data in the target table (t->data). */
struct php_target {
  struct php_attach at;
  char comm[16];        /* kept with its stacks: an FPM worker may be gone by the snapshot */
  bool denied;          /* its memory cannot be read: reported as an error, not sampled */
  uint64_t image_start; /* where its program's code starts (php_image_start) */
  uint64_t image_checked_ns;
  /* Until its first stack, a new target is walked at every probe tick: a
   * CLI run of a few hundred ms would otherwise often get no sample of its
   * own and keep only perf's native frames. */
  bool sampled;          /* a walk gave a stack */
  uint64_t probe_end_ns; /* probing stops here (0: not started) */
};

/* The profile types of the session (php_types.c). */
struct php_types {
  bool cpu;             /* running processes make cpu samples */
  bool wall;            /* php.wall: every process, running or not (untagged) */
  bool offcpu;          /* --mode offcpu: waiting ones make off-CPU samples */
  uint64_t interval_us; /* what an off-CPU sample weighs */
  uint64_t off_cpu;     /* cpu only: walks skipped, the process was waiting */
};

/* The plugin's state. */
struct php_state {
  struct php_types types;
  bool wall_opt; /* php.wall */
  const struct pp_host *host;
  const char *proc_filter; /* substring of comm or cmdline; NULL: every match */
  uint32_t max_depth;
  struct php_walker *walker;
  struct pp_stack_table *stacks;
  struct pp_target_table *targets;
  struct pp_session *session; /* from start() to stop(): its tick interval is ours to set */
  uint64_t period_ns;         /* one sample per target per period (the session frequency) */
  uint64_t next_sample_ns;    /* when the next regular walk of every target is due */
  uint64_t samples, idle, torn, truncated, gone, denied, reattached, probed;
  unsigned reported_versions[16]; /* major*100+minor already logged at info */
  size_t nreported;
};

/* The executable names the descriptor matches (php.c). */
extern const char *const php_match_exe[];

/* Target table callbacks (plugin: the struct php_state). attach: 0, or
 * PP_ATTACH_IGNORE (not a PHP process, or not the filter's), PP_ATTACH_SKIP
 * (ZTS, stripped, unsupported version...), PP_ATTACH_FAIL (a file of the
 * target refused), a negative errno (retry), with t->reason. */
int php_attach_process(void *plugin, struct pp_target_entry *t);
/* Where the process's program code starts (/proc/PID/stat startcode), 0 if
 * unknown: an exec of the same PHP binary keeps the file the target table
 * compares but, with ASLR, moves this. */
uint64_t php_image_start(uint32_t pid);
void php_release_target(void *plugin, struct pp_target_entry *t);

/* php_types.c: the session's types (wall: the php.wall option). */
void php_types_start(struct php_types *ty, bool wall, const struct pp_session *s);
/* Before a walk of pid: whether this tick's stack is wanted; *state is the
 * process's state letter (0 if not read or gone). */
bool php_types_walk(struct php_types *ty, uint32_t pid, char *state);
/* Counts a walk's stack (nf 0: between requests) as the types want it. */
void php_types_record(struct php_types *ty, struct pp_stack_table *stacks, uint32_t pid,
                      const char *comm, const struct pp_frame *frames, uint32_t nf, char state);

struct php_walker; /* per-plugin buffers and the function cache */

struct php_walker *php_walker_new(size_t cache_entries, uint32_t max_depth);
void php_walker_free(struct php_walker *w);
/* Forget cached functions of a pid (it exited or was replaced). */
void php_walker_forget_pid(struct php_walker *w, uint32_t pid);
/* Frames whose saved opline was not one of their function's instructions
 * (or a leaf's leftover RETURN) and were shown at the function's first
 * line, since the last call. */
uint64_t php_walker_take_stale_lines(struct php_walker *w);

enum php_walk_result {
  PHP_WALK_OK = 0,
  PHP_WALK_IDLE = 1,      /* no PHP code running (e.g. FPM worker between requests) */
  PHP_WALK_TORN = 2,      /* inconsistent read: the stack changed under us; dropped */
  PHP_WALK_GONE = 3,      /* the process exited */
  PHP_WALK_DENIED = 4,    /* EPERM: no ptrace rights */
  PHP_WALK_TRUNCATED = 5, /* OK, but max_depth was reached (frames hold the leaf side) */
  PHP_WALK_LOST = 6,      /* executor_globals is not mapped: the process exec'd (a new image) */
};

/* Reads the stack of pid; on OK/TRUNCATED *frames (leaf first, kind
 * PP_FRAME_PHP; strings in the walker's buffers) and *n are valid until
 * the next call. Updates a->last_leaf. */
int php_walk(struct php_walker *w, uint32_t pid, struct php_attach *a,
             const struct pp_frame **frames, uint32_t *n);

#endif
