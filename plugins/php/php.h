/*
 * Internal interface of the php plugin (not part of the plugin ABI).
 *
 *   php_layout.c  per-version struct offsets (data, from the reference table)
 *   php_attach.c  finds executor_globals and the PHP version of a process
 *   php_walk.c    reads one call stack (current_execute_data chain)
 *   php_agg.c     bounded aggregation of identical stacks between snapshots
 *   php_plugin.c  the vtable: options, targets, tick, snapshot
 */
#ifndef PP_PLUGIN_PHP_H
#define PP_PLUGIN_PHP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "polyprof/plugin.h"

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

/* 0, or a negative errno with a one-line reason ("ZTS build...", "stripped..."). */
int php_attach_process(uint32_t pid, const char *exe_basename, struct php_attach *out, char *reason,
                       size_t reason_len);

/* One frame as read from the target; strings point into the walker's buffers. */
struct php_frame {
  const char *name;
  const char *file;
  uint32_t line;
};

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
};

/* Reads the stack of pid; on OK/TRUNCATED *frames (leaf first) and *n are
 * valid until the next call. Updates a->last_leaf. */
int php_walk(struct php_walker *w, uint32_t pid, struct php_attach *a,
             const struct php_frame **frames, uint32_t *n);

/* Aggregation of (pid, stack) -> count in a fixed arena. */
struct php_agg;
struct php_agg *php_agg_new(size_t max_stacks, size_t arena_bytes, uint32_t max_depth);
void php_agg_free(struct php_agg *g);
/* 0, or -ENOSPC when the table or arena is full (the sample is dropped).
 * comm is kept with the stack: an FPM worker may be gone by the snapshot,
 * when the host can no longer read its name. */
int php_agg_add(struct php_agg *g, uint32_t pid, const char *comm, const struct php_frame *f,
                uint32_t n);
/* Emits every stack through the host sink, then empties the table. */
void php_agg_flush(struct php_agg *g, const struct pp_host *h, struct pp_sink *sink);

#endif
