/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host services a plugin sees (struct pp_host), as implemented inside a
 * worker, and the sink its snapshot() writes into.
 *
 * Everything a plugin passes in is checked here: this is the boundary where
 * plugin bugs must turn into a refused call and one warning, not into a
 * corrupt profile.
 */
#ifndef PP_HOST_H
#define PP_HOST_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "ipc.h"
#include "polyprof/plugin.h"
#include "profile.h"

/* Longest string kept from a frame (name, file) or comm; longer ones are
 * truncated rather than refused. */
#define PP_HOST_MAX_FRAME_STR 8192
/* Longest app metadata JSON text accepted (must fit the codec's cap). */
#define PP_HOST_MAX_JSON (512u << 10)
#define PP_HOST_MAX_LOG 4000

/* One option value, self-contained (no pointers into the descriptor or the
 * agent's config, which a worker must not depend on). */
struct pp_host_option {
  char *key;
  uint32_t type; /* enum pp_option_type */
  char *scalar;  /* NULL: unset */
  char **items;  /* PP_OPT_LIST, NULL-terminated; NULL: unset */
  size_t item_count;
};

struct pp_host_config {
  char *plugin; /* plugin name */
  char *mode;   /* NULL if none */
  bool enabled;
  struct pp_host_option *options;
  size_t count;
};

/* Build from the descriptor's declared options (defaults) overridden by the
 * bound values of pcfg (may be NULL). 0 or -ENOMEM. */
int pp_host_config_build(struct pp_host_config *out, const struct pp_plugin *desc,
                         const struct pp_plugin_config *pcfg);
int pp_host_config_copy(struct pp_host_config *out, const struct pp_host_config *in);
void pp_host_config_free(struct pp_host_config *c);

/* Wire form of a configuration (host_config_wire.c), carried by INIT from
 * the core to a worker. Decoding distrusts every length and count; on error
 * *out is left empty and -EINVAL (malformed) or -ENOMEM is returned. */
void pp_host_config_encode(struct pp_wbuf *b, const struct pp_host_config *c);
int pp_host_config_decode(struct pp_rbuf *r, struct pp_host_config *out);

/* Where host->log() lines go (the worker sends them to the core). */
typedef void (*pp_host_log_fn)(void *ctx, int level, const char *text);

/* host->host_data. */
struct pp_host_ctx {
  const struct pp_host_config *cfg;
  pp_host_log_fn log_fn;
  void *log_ctx;
  pthread_mutex_t lock;   /* plugins may log from their own threads */
  char last_problem[512]; /* last warning/error line, for reply messages */
  char *scratch;          /* scratch_dir(), created on first use */
};

/* Fill host (all services, struct_size = sizeof) around ctx. */
void pp_host_init(struct pp_host *host, struct pp_host_ctx *ctx, const struct pp_host_config *cfg,
                  pp_host_log_fn log_fn, void *log_ctx);
void pp_host_fini(struct pp_host_ctx *ctx);
/* Forget / fetch the last warning or error the plugin logged. */
void pp_host_clear_problem(struct pp_host_ctx *ctx);
void pp_host_last_problem(struct pp_host_ctx *ctx, char *buf, size_t len);

/* Sink over a profile. Valid for emitting only while `active`. */
struct pp_sink {
  struct pp_profile *profile;
  const struct pp_host *host; /* for warnings about bad input */
  bool active;
  uint32_t warned;   /* one warning per kind of mistake per sink */
  uint64_t rejected; /* samples refused, reported as counter "invalid_samples" */
  bool keep_tid;     /* dump(): a sample's tid becomes a "[tid N]" root frame */
  uint32_t ids[PP_MAX_FRAMES];
};

void pp_sink_begin(struct pp_sink *s, struct pp_profile *p, const struct pp_host *host);
/* Deactivate; records the invalid_samples counter if any. */
void pp_sink_end(struct pp_sink *s);

#endif
