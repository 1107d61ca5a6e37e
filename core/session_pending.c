/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's side of output files the directory refused (read-only
 * filesystem, disk full, quota, directory removed): log it once per
 * session in words an operator acts on, keep the files in the bounded
 * in-memory backlog (output/pending.h), and write them back, in order, at
 * the first session where the directory takes files again.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "log.h"
#include "output/pending.h"

#define MIB (1024.0 * 1024.0)

static struct pp_pending *backlog(struct pp_agent *a) {
  if (!a->pending)
    a->pending = pp_pending_new(a->cfg->output_pending_max_bytes);
  else
    pp_pending_set_cap(a->pending, a->cfg->output_pending_max_bytes);
  return a->pending;
}

int pp_agent_output_file(struct pp_agent *a, const char *stem, const char *ext,
                         const char *link_name, int (*fn)(FILE *f, void *ctx), void *ctx) {
  const struct pp_config *cfg = a->cfg;
  struct pp_pending *p = backlog(a);
  char err[768];
  size_t dropped = 0;
  int rc = pp_pending_publish(p, cfg->output_dir, stem, ext, link_name, cfg->rotating_output, fn,
                              ctx, &dropped, err, sizeof(err));
  if (rc == 0) return 0;
  if (dropped)
    pp_log(PP_LOG_WARNING, "polyprof",
           "output: dropped the %zu oldest file(s) waiting for %s to stay under "
           "output.pending_max_bytes (%.1f MiB)",
           dropped, cfg->output_dir, (double)cfg->output_pending_max_bytes / MIB);
  if (rc == 1) {
    pp_log(PP_LOG_ERROR, "polyprof",
           "output: %s%s not written: %s; kept in memory and written when %s takes files again "
           "(%zu session(s), %.1f MiB waiting, cap %.1f MiB)",
           stem, ext, err, cfg->output_dir, pp_pending_sessions(p),
           (double)pp_pending_bytes(p) / MIB, (double)cfg->output_pending_max_bytes / MIB);
    return 1;
  }
  if (!err[0] || rc == -EFBIG || rc == -ENOMEM)
    snprintf(err, sizeof(err), "%s",
             rc == -EFBIG ? "larger than output.pending_max_bytes" : strerror(-rc));
  pp_log(PP_LOG_ERROR, "polyprof", "output: %s%s lost: %s", stem, ext, err);
  return rc;
}

void pp_agent_flush_pending(struct pp_agent *a) {
  struct pp_pending *p = a->pending;
  if (!p || !pp_pending_count(p) || !a->cfg->output_dir) return;
  size_t sessions = pp_pending_sessions(p);
  char err[768] = "";
  int rc = pp_pending_flush(p, a->cfg->output_dir, a->cfg->rotating_output, err, sizeof(err));
  if (rc > 0 && !pp_pending_count(p))
    pp_log(PP_LOG_INFO, "polyprof",
           "output: %s takes files again: wrote the %d file(s) of %zu earlier session(s) kept "
           "in memory",
           a->cfg->output_dir, rc, sessions);
  else if (rc > 0)
    pp_log(PP_LOG_WARNING, "polyprof", "output: wrote %d kept file(s), %zu still waiting: %s", rc,
           pp_pending_count(p), err);
  else
    pp_log(PP_LOG_DEBUG, "polyprof", "output: %zu kept file(s) still waiting: %s",
           pp_pending_count(p), err);
}

void pp_agent_flush_pending_at_exit(struct pp_agent *a) {
  if (!a->pending) return;
  if (a->cfg && a->cfg->output_dir) pp_agent_flush_pending(a);
  if (pp_pending_count(a->pending))
    pp_log(PP_LOG_ERROR, "polyprof",
           "output: %zu session(s) (%zu file(s), %.1f MiB) could not be written to %s before "
           "exit and are lost",
           pp_pending_sessions(a->pending), pp_pending_count(a->pending),
           (double)pp_pending_bytes(a->pending) / MIB,
           a->cfg && a->cfg->output_dir ? a->cfg->output_dir : "the output directory");
  pp_pending_free(a->pending);
  a->pending = NULL;
}
