/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `polyprof dump PID [--json]`: every thread of the process with its name
 * and state (from /proc), and the stack each thread is in, in every runtime
 * the process has. Plugins with dump() read every thread at once, by
 * thread id (program_dump_now.c): the runtime's plugin its threads, the
 * perf plugin every thread's native stack, shown where the runtime gave
 * none. For a process of a runtime whose plugin has no dump() the stacks
 * come from a short look (-d, default 1 s, at 100 Hz in wall mode where
 * the runtime has it): per thread name, the stack seen most often in it,
 * which for a busy or blocked thread is where it is.
 */
#include <dirent.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "output/col.h"
#include "polyprof/kit/proc.h"
#include "program.h"
#include "program_dump.h"

#define DUMP_HZ 100
#define DUMP_MAX_THREADS 4096

static const char *state_name(char c) {
  switch (c) {
    case 'R':
      return "running";
    case 'S':
      return "sleeping";
    case 'D':
      return "disk sleep";
    case 'T':
      return "stopped";
    case 't':
      return "tracing stop";
    case 'Z':
      return "zombie";
    case 'I':
      return "idle";
    default:
      return "unknown";
  }
}

struct thread_info {
  long tid;
  char name[64];
  char state;
};

static size_t list_threads(pid_t pid, struct thread_info *out, size_t cap) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  if (!d) return 0;
  size_t n = 0;
  struct dirent *de;
  while ((de = readdir(d)) && n < cap) {
    char *end;
    long tid = strtol(de->d_name, &end, 10);
    if (*end || tid <= 0) continue;
    char buf[512];
    snprintf(path, sizeof(path), "/proc/%d/task/%ld/stat", (int)pid, tid);
    if (pp_read_file(path, buf, sizeof(buf), NULL) < 0) continue;
    const char *open = strchr(buf, '('), *close = strrchr(buf, ')');
    if (!open || !close || close < open || !close[1]) continue;
    struct thread_info *t = &out[n++];
    t->tid = tid;
    size_t len = (size_t)(close - open - 1);
    if (len >= sizeof(t->name)) len = sizeof(t->name) - 1;
    memcpy(t->name, open + 1, len);
    t->name[len] = '\0';
    t->state = close[2];
  }
  closedir(d);
  return n;
}

static int by_tid(const void *x, const void *y) {
  const struct thread_info *a = x, *b = y;
  return a->tid < b->tid ? -1 : a->tid > b->tid;
}

static const char *stack_comm(const struct pp_profile *p, const struct pp_stack_rec *s) {
  uint32_t comm = s->comm;
  if (comm == PP_NO_STR) {
    const struct pp_pid_rec *r = pp_profile_pid(p, s->pid);
    comm = r ? r->comm : PP_NO_STR;
  }
  return pp_profile_str(p, comm);
}

/* Stacks keep no thread id: threads are told apart by name and by the
 * frame they were entered at (a runtime's thread bootstrap, main), which
 * separates the threads of a program that share one name. */
static bool same_thread(const struct pp_profile *p, const struct pp_stack_rec *a,
                        const struct pp_stack_rec *b) {
  if (strcmp(stack_comm(p, a), stack_comm(p, b)) != 0) return false;
  const uint32_t *fa = pp_profile_stack_frames(p, a), *fb = pp_profile_stack_frames(p, b);
  const struct pp_frame_rec *ra = fa ? pp_profile_frame(p, fa[0]) : NULL;
  const struct pp_frame_rec *rb = fb ? pp_profile_frame(p, fb[0]) : NULL;
  return ra && rb && ra->name == rb->name;
}

/* For each thread, in the order first seen: its most frequent stack. */
static size_t top_stacks(const struct pp_profile *p, uint32_t pid, size_t *best, uint64_t *sum,
                         size_t cap) {
  size_t n = 0;
  for (size_t i = 0; i < pp_profile_stack_count(p); i++) {
    const struct pp_stack_rec *s = pp_profile_stack(p, i);
    if (s->pid != pid || !s->nframes) continue;
    size_t k = 0;
    while (k < n && !same_thread(p, pp_profile_stack(p, best[k]), s))
      k++;
    if (k == n) {
      if (n == cap) continue;
      best[n] = i;
      sum[n++] = 0;
    }
    sum[k] += s->count;
    if (s->count > pp_profile_stack(p, best[k])->count) best[k] = i;
  }
  return n;
}

static void write_text(FILE *f, const struct pp_profile *p, pid_t pid, const struct thread_info *th,
                       size_t nth) {
  char cmd[256] = "?", frame[1024];
  pp_proc_comm((uint32_t)pid, cmd, sizeof(cmd));
  fprintf(f, "Process %d: %s, %zu thread(s)\n", (int)pid, cmd, nth);
  for (size_t i = 0; i < nth; i++)
    fprintf(f, "  Thread %ld \"%s\" (%s)\n", th[i].tid, th[i].name, state_name(th[i].state));
  size_t best[256];
  uint64_t sum[256];
  size_t n = top_stacks(p, (uint32_t)pid, best, sum, 256);
  if (!n) fprintf(f, "No stack was seen (see the messages above, or try a longer -d).\n");
  for (size_t k = 0; k < n; k++) {
    const struct pp_stack_rec *s = pp_profile_stack(p, best[k]);
    const uint32_t *ids = pp_profile_stack_frames(p, s);
    fprintf(f, "\nStack of \"%s\" (%llu of its %llu samples), innermost first:\n", stack_comm(p, s),
            (unsigned long long)s->count, (unsigned long long)sum[k]);
    for (uint32_t j = s->nframes; ids && j-- > 0;) {
      pp_frame_format(p, ids[j], frame, sizeof(frame), true);
      fprintf(f, "    %s\n", frame);
    }
  }
}

/* A stack's frames, innermost first, the first `skip` root frames left out. */
static json_t *frames_json(const struct pp_profile *p, const struct pp_stack_rec *s,
                           uint32_t skip) {
  const uint32_t *ids = pp_profile_stack_frames(p, s);
  json_t *frames = json_array();
  for (uint32_t j = s->nframes; ids && j-- > skip;) {
    const struct pp_frame_rec *fr = pp_profile_frame(p, ids[j]);
    if (!fr) continue;
    json_t *jf = json_pack("{s:s,s:s}", "name", pp_profile_str(p, fr->name), "runtime",
                           pp_frame_kind_name(fr->kind));
    if (fr->file != PP_NO_STR)
      json_object_set_new(jf, "file", json_string(pp_profile_str(p, fr->file)));
    if (fr->line) json_object_set_new(jf, "line", json_integer(fr->line));
    json_array_append_new(frames, jf);
  }
  return frames;
}

static void write_json(FILE *f, const struct pp_profile *p, pid_t pid, const struct thread_info *th,
                       size_t nth) {
  char cmd[256] = "?";
  pp_proc_comm((uint32_t)pid, cmd, sizeof(cmd));
  json_t *root = json_object(), *threads = json_array(), *stacks = json_array();
  json_object_set_new(root, "pid", json_integer(pid));
  json_object_set_new(root, "comm", json_string(cmd));
  for (size_t i = 0; i < nth; i++)
    json_array_append_new(threads, json_pack("{s:I,s:s,s:s}", "tid", (json_int_t)th[i].tid, "name",
                                             th[i].name, "state", state_name(th[i].state)));
  size_t best[256];
  uint64_t sum[256];
  size_t n = top_stacks(p, (uint32_t)pid, best, sum, 256);
  for (size_t k = 0; k < n; k++) {
    const struct pp_stack_rec *s = pp_profile_stack(p, best[k]);
    json_t *frames = frames_json(p, s, 0);
    json_array_append_new(
        stacks, json_pack("{s:s,s:I,s:I,s:o}", "thread", stack_comm(p, s), "samples",
                          (json_int_t)s->count, "of", (json_int_t)sum[k], "frames", frames));
  }
  json_object_set_new(root, "threads", threads);
  json_object_set_new(root, "stacks", stacks);
  json_dumpf(root, f, JSON_INDENT(2));
  fputc('\n', f);
  json_decref(root);
}

/* The one-shot read's stack of thread tid: a runtime plugin's where one
 * has it, else the system-wide plugin's native stack. */
static const struct pp_stack_rec *dumped_stack(const struct pp_dump *d, pid_t pid, long tid,
                                               const struct pp_profile **from) {
  for (int native = 0; native < 2; native++) {
    for (size_t k = 0; k < d->n; k++) {
      const struct pp_profile *p = d->profs[k];
      if (!p || (d->system_wide && d->system_wide[k] != (native == 1))) continue;
      for (size_t i = 0; i < pp_profile_stack_count(p); i++) {
        const struct pp_stack_rec *s = pp_profile_stack(p, i);
        if (s->pid == (uint32_t)pid && s->nframes > 1 && pp_dump_stack_tid(p, s) == (uint32_t)tid) {
          *from = p;
          return s;
        }
      }
    }
  }
  return NULL;
}

/* Frames of a dumped stack, innermost first, without its "[tid N]" root. */
static void write_now_text(FILE *f, const struct pp_dump *d, pid_t pid,
                           const struct thread_info *th, size_t nth) {
  char cmd[256] = "?", frame[1024];
  pp_proc_comm((uint32_t)pid, cmd, sizeof(cmd));
  fprintf(f, "Process %d: %s, %zu thread(s), stacks read now\n", (int)pid, cmd, nth);
  for (size_t i = 0; i < nth; i++)
    fprintf(f, "  Thread %ld \"%s\" (%s)\n", th[i].tid, th[i].name, state_name(th[i].state));
  for (size_t i = 0; i < nth; i++) {
    const struct pp_profile *p = NULL;
    const struct pp_stack_rec *s = dumped_stack(d, pid, th[i].tid, &p);
    if (!s) continue; /* a thread of no runtime (or one not read) */
    const uint32_t *ids = pp_profile_stack_frames(p, s);
    fprintf(f, "\nStack of \"%s\" (thread %ld, %s), innermost first:\n", th[i].name, th[i].tid,
            state_name(th[i].state));
    for (uint32_t j = s->nframes; ids && j-- > 1;) {
      pp_frame_format(p, ids[j], frame, sizeof(frame), true);
      fprintf(f, "    %s\n", frame);
    }
  }
}

static void write_now_json(FILE *f, const struct pp_dump *d, pid_t pid,
                           const struct thread_info *th, size_t nth) {
  char cmd[256] = "?";
  pp_proc_comm((uint32_t)pid, cmd, sizeof(cmd));
  json_t *root = json_object(), *threads = json_array(), *stacks = json_array();
  json_object_set_new(root, "pid", json_integer(pid));
  json_object_set_new(root, "comm", json_string(cmd));
  json_object_set_new(root, "read", json_string("now"));
  for (size_t i = 0; i < nth; i++) {
    json_array_append_new(threads, json_pack("{s:I,s:s,s:s}", "tid", (json_int_t)th[i].tid, "name",
                                             th[i].name, "state", state_name(th[i].state)));
    const struct pp_profile *p = NULL;
    const struct pp_stack_rec *s = dumped_stack(d, pid, th[i].tid, &p);
    if (!s) continue;
    json_array_append_new(stacks, json_pack("{s:s,s:I,s:i,s:i,s:o}", "thread", th[i].name, "tid",
                                            (json_int_t)th[i].tid, "samples", 1, "of", 1, "frames",
                                            frames_json(p, s, 1)));
  }
  json_object_set_new(root, "threads", threads);
  json_object_set_new(root, "stacks", stacks);
  json_dumpf(root, f, JSON_INDENT(2));
  fputc('\n', f);
  json_decref(root);
}

static bool session_has_stack(const struct pp_profile *p, pid_t pid) {
  for (size_t i = 0; p && i < pp_profile_stack_count(p); i++) {
    const struct pp_stack_rec *s = pp_profile_stack(p, i);
    if (s->pid == (uint32_t)pid && s->nframes) return true;
  }
  return false;
}

void pp_dump_session(struct pp_dump *d, FILE *f, const struct pp_profile *session, pid_t pid,
                     bool json) {
  static struct thread_info th[DUMP_MAX_THREADS];
  size_t nth = list_threads(pid, th, DUMP_MAX_THREADS);
  qsort(th, nth, sizeof(*th), by_tid);
  /* a runtime without dump(): its session frames, unless the session saw
   * nothing (threads asleep throughout), where the native stacks still tell */
  if (d && (d->read || (d->native && (!d->session || !session_has_stack(session, pid)))))
    (json ? write_now_json : write_now_text)(f, d, pid, th, nth);
  else if (json)
    write_json(f, session, pid, th, nth);
  else
    write_text(f, session, pid, th, nth);
}

int pp_cmd_dump(struct pp_config *cfg, const struct pp_cli *cli) {
  struct pp_program pr;
  memset(&pr, 0, sizeof(pr));
  long pid = pp_program_pid_operand(cli, "dump");
  if (pid < 0 || pp_program_setup(&pr, cli, cfg, "dump") != 0) {
    pp_program_discard(&pr);
    pp_config_free(cfg);
    free(cfg);
    return 2;
  }
  pr.root = (pid_t)pid;
  pr.format = pp_cli_flag_value(cli, "--json") ? PP_PROGRAM_DUMP_JSON : PP_PROGRAM_DUMP;
  if (!pp_cli_flag_value(cli, "--profiling-duration")) cfg->duration = 1;
  if (!pp_cli_flag_value(cli, "--profiling-frequency") && !pp_cli_flag_value(cli, "--interval"))
    cfg->frequency = pr.frequency_hz = DUMP_HZ;
  /* the plugins with dump() read every thread at once, and the session
   * ends there; otherwise the session's -d look is what is printed */
  pr.dump = pp_dump_new(pr.root);
  int rc = pp_program_profile(&pr, cfg);
  pp_dump_free(pr.dump);
  return rc;
}
