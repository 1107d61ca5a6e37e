/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test plugin: the host refuses what it needs, the way the kernel refuses
 * perf events to an unprivileged agent. Option refuse_in (init | start |
 * never) names the call that fails; with permanent (default true) it
 * returns PP_PERMANENT(EACCES) so the supervisor must not restart it,
 * otherwise a plain -EACCES, which is restarted with backoff. Each failure
 * logs one line saying what to change, and counts itself in the file named
 * by option count_file (one byte per failed call), so a test sees how
 * often the worker was really tried.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "polyprof/plugin.h"

struct st {
  const struct pp_host *host;
  char refuse_in[8];
  int permanent;
  const char *count_file;
};

static int refuse(struct st *s, const char *where) {
  if (strcmp(s->refuse_in, where) != 0) return 0;
  if (s->count_file) {
    int fd = open(s->count_file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) {
      ssize_t w = write(fd, "x", 1);
      (void)w; /* a missing byte only makes the test fail */
      close(fd);
    }
  }
  s->host->log(s->host, PP_LOG_ERROR,
               "tp_refuse: the host refuses (%s): set tp_refuse.refuse_in: never", where);
  return s->permanent ? PP_PERMANENT(EACCES) : -EACCES;
}

static int r_init(const struct pp_host *host, void **state) {
  struct st *s = calloc(1, sizeof(*s));
  if (!s) return -ENOMEM;
  s->host = host;
  const char *v;
  strcpy(s->refuse_in, "start");
  if (host->config_string(host, "refuse_in", &v) == 0)
    strncpy(s->refuse_in, v, sizeof(s->refuse_in) - 1);
  s->permanent = 1;
  host->config_bool(host, "permanent", &s->permanent);
  if (host->config_string(host, "count_file", &v) == 0) s->count_file = v;
  int rc = refuse(s, "init");
  if (rc) {
    free(s);
    return rc;
  }
  *state = s;
  return 0;
}

static int r_start(void *state, struct pp_session *session) {
  return refuse(state, "start");
}

static int r_add_targets(void *state, const struct pp_target *t, size_t n) {
  return 0;
}

static int r_snapshot(void *state, struct pp_sink *sink) {
  struct st *s = state;
  return s->host->add_counter(sink, "tp_refuse_alive", 1);
}

static int r_stop(void *state) {
  return 0;
}

static void r_fini(void *state) {
  free(state);
}

static const char *const where_choices[] = {"never", "init", "start", NULL};
static const struct pp_option options[] = {
    {.key = "refuse_in", .type = PP_OPT_ENUM, .default_value = "start", .choices = where_choices},
    {.key = "permanent", .type = PP_OPT_BOOL, .default_value = "true"},
    {.key = "count_file", .type = PP_OPT_STRING},
};

static const struct pp_plugin plugin = {
    PP_PLUGIN_HEADER,
    .name = "tp_refuse",
    .version = "1.0",
    .description = "refused by the host on purpose",
    .capabilities = PP_CAP_RUNTIME | PP_CAP_NEEDS_NOTHING,
    .options = options,
    .option_count = 3,
    .init = r_init,
    .start = r_start,
    .add_targets = r_add_targets,
    .snapshot = r_snapshot,
    .stop = r_stop,
    .fini = r_fini,
};

PP_EXPORT const struct pp_plugin *polyprof_plugin_entry(void) {
  return &plugin;
}
