/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The perf-based modes (perfmap, and auto while perf samples): the runtime
 * is asked over its diagnostic socket to write /tmp/perf-<nspid>.map (.NET
 * 8+), perf samples the process like any other and names its JIT code from
 * that file. This plugin starts no EventPipe session then: the target pays
 * for a line per method compiled and for perf's own sampling, nothing more.
 *
 * What it costs and how often it is sampled is reported per process: the
 * map's lines and bytes (read as they grow, counted not parsed), the CPU
 * of the runtime's diagnostics thread (".NET EventPipe": it serves the
 * EnablePerfMap command and writes the methods compiled before it; methods
 * compiled later are written by the thread that compiles them, inline, and
 * are not told apart from the compilation), and the process's CPU time,
 * which is what perf samples at the rate asked (it counts CPU time, so the
 * samples a second it takes are that rate times the CPUs the process
 * keeps busy).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dotnet.h"
#include "polyprof/kit/target_files.h"

#define HRESULT_UNKNOWN_COMMAND 0x80131385u
#define REPORT_AFTER_NS 2000000000ull
#define MAP_READ_CAP (4u << 20) /* bytes of the map counted per look */
#define MAX_TASKS 4096

int dotnet_perfmap_enable(struct dotnet_state *st, struct pp_target_entry *e,
                          struct dotnet_target *t) {
  uint8_t p[4] = {DOTNET_PERFMAP_TYPE_PERFMAP, 0, 0, 0};
  uint32_t hr = 0;
  struct dotnet_perfmap_cost *c = &t->pm;
  memset(c, 0, sizeof(*c));
  c->diag_cpu_ns0 = dotnet_thread_cpu_ns(t->pid, ".NET EventPipe");
  /* what is in its /tmp before the runtime writes there for us */
  if (!t->mapfiles)
    t->mapfiles = dotnet_mapfiles_before_enable(st, t->pid, t->nspid, e->start_time);
  int rc = dotnet_ipc_call(t->pid, t->sock, DOTNET_IPC_SET_PROCESS, DOTNET_IPC_PROC_ENABLE_PERFMAP,
                           p, sizeof(p), NULL, 0, NULL, &hr, DOTNET_IPC_TIMEOUT_MS);
  if (rc == -EPROTO) {
    snprintf(e->reason, sizeof(e->reason), "EnablePerfMap refused (hresult 0x%08x%s)", hr,
             hr == HRESULT_UNKNOWN_COMMAND ? ": needs .NET 8+" : "");
    PP_WARNING(st->host, "pid %u: %s", t->pid, e->reason);
    return hr == HRESULT_UNKNOWN_COMMAND ? PP_ATTACH_FAIL : rc;
  }
  if (rc < 0) {
    snprintf(e->reason, sizeof(e->reason), "EnablePerfMap failed: %s", strerror(-rc));
    PP_WARNING(st->host, "pid %u: %s", t->pid, e->reason);
    return rc;
  }
  t->perfmap = true;
  dotnet_mapfiles_note(st, t->mapfiles); /* the runtime created the map before it answered */
  c->since_ns = c->first_ns = pp_clock_ns();
  c->cpu_ns0 = dotnet_process_cpu_ns(t->pid);
  PP_INFO(st->host, "pid %u: perf map enabled (/tmp/perf-%u.map in its mount namespace)", t->pid,
          t->nspid);
  return 0;
}

/* CPU time (ns) of the process (all its threads), from /proc/PID/stat. */
uint64_t dotnet_process_cpu_ns(uint32_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof(path), "/proc/%u/stat", pid);
  FILE *f = fopen(path, "re");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  /* the comm may hold spaces and parentheses: fields follow the last ')' */
  char *p = strrchr(buf, ')');
  if (!p) return 0;
  unsigned long long utime = 0, stime = 0;
  if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2)
    return 0;
  long hz = sysconf(_SC_CLK_TCK);
  if (hz <= 0) hz = 100;
  return (utime + stime) * (1000000000ull / (unsigned long long)hz);
}

/* CPU time (ns) of the process's threads whose name starts with `prefix`. */
uint64_t dotnet_thread_cpu_ns(uint32_t pid, const char *prefix) {
  char path[96];
  snprintf(path, sizeof(path), "/proc/%u/task", pid);
  DIR *d = opendir(path);
  if (!d) return 0;
  size_t plen = strlen(prefix);
  uint64_t sum = 0;
  unsigned seen = 0;
  struct dirent *de;
  while ((de = readdir(d)) && seen++ < MAX_TASKS) {
    if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
    char comm[32] = "";
    snprintf(path, sizeof(path), "/proc/%u/task/%.16s/comm", pid, de->d_name);
    FILE *f = fopen(path, "re");
    if (!f) continue;
    bool match = fgets(comm, sizeof(comm), f) && strncmp(comm, prefix, plen) == 0;
    fclose(f);
    if (!match) continue;
    snprintf(path, sizeof(path), "/proc/%u/task/%.16s/schedstat", pid, de->d_name);
    f = fopen(path, "re");
    if (!f) continue;
    unsigned long long run = 0;
    if (fscanf(f, "%llu", &run) == 1) sum += run;
    fclose(f);
  }
  closedir(d);
  return sum;
}

/* Counts the lines the runtime appended to its map since the last look
 * (at most MAP_READ_CAP bytes a look; the rest is counted next time). The
 * file is the target's: opened through the kit (in its root, owned by it,
 * a regular file), only its newlines are counted. */
static void count_map(struct dotnet_target *t) {
  struct dotnet_perfmap_cost *c = &t->pm;
  char path[64];
  snprintf(path, sizeof(path), "/tmp/perf-%u.map", t->nspid);
  struct stat sb;
  int fd = pp_target_open(t->pid, path, 0, NULL, &sb, NULL, 0);
  if (fd < 0) return;
  if ((uint64_t)sb.st_size < c->map_offset) c->map_offset = 0; /* rewritten */
  static char buf[65536];
  uint64_t budget = MAP_READ_CAP;
  while (budget > 0 && c->map_offset < (uint64_t)sb.st_size) {
    size_t want = sizeof(buf) < budget ? sizeof(buf) : (size_t)budget;
    ssize_t n = pread(fd, buf, want, (off_t)c->map_offset);
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; i++)
      c->map_lines += buf[i] == '\n';
    c->map_offset += (uint64_t)n;
    budget -= (uint64_t)n;
  }
  close(fd);
}

void dotnet_perfmap_report(struct dotnet_state *st, struct dotnet_target *t, struct pp_sink *sink,
                           bool exited) {
  const struct pp_host *h = st->host;
  struct dotnet_perfmap_cost *c = &t->pm;
  if (!t->perfmap || !c->first_ns) return;
  uint64_t now = pp_clock_ns();
  /* from tick() (no sink): the first report, as soon as it is due, so a
   * process shorter than a session has one too */
  if (!sink && (c->reported || now - c->first_ns < REPORT_AFTER_NS)) return;
  count_map(t);
  if (sink) {
    h->add_counter(sink, "perfmap_lines", c->map_lines - c->lines_counted);
    h->add_counter(sink, "perfmap_bytes", c->map_offset - c->bytes_counted);
    c->lines_counted = c->map_lines;
    c->bytes_counted = c->map_offset;
  }
  if (exited || now <= c->since_ns) return; /* its /proc is gone: no CPU to read */
  uint64_t cpu = dotnet_process_cpu_ns(t->pid);
  uint64_t diag = dotnet_thread_cpu_ns(t->pid, ".NET EventPipe");
  double secs = (double)(now - c->since_ns) / 1e9;
  double cpus = cpu >= c->cpu_ns0 ? (double)(cpu - c->cpu_ns0) / 1e9 / secs : 0;
  double diag_ms = diag >= c->diag_cpu_ns0 ? (double)(diag - c->diag_cpu_ns0) / 1e6 : 0;
  bool first = !c->reported && now - c->first_ns >= REPORT_AFTER_NS;
  PP_LOG(h, first ? PP_LOG_INFO : PP_LOG_DEBUG,
         "pid %u: .NET %s sampled by perf at %u Hz of its CPU time: %.2f CPUs busy, so about "
         "%.1f samples/s; the target pays its perf map: %llu lines, %llu bytes written so far "
         "(%llu lines since the last report), and %.2f ms of its diagnostics thread's CPU since "
         "the last report (EnablePerfMap)",
         t->pid, t->version[0] ? t->version : "?", st->cfg.frequency_hz, cpus,
         cpus * st->cfg.frequency_hz, (unsigned long long)c->map_lines,
         (unsigned long long)c->map_offset, (unsigned long long)(c->map_lines - c->lines_reported),
         diag_ms);
  if (first) c->reported = true;
  c->lines_reported = c->map_lines;
  c->since_ns = now;
  c->cpu_ns0 = cpu;
  c->diag_cpu_ns0 = diag;
}

void dotnet_perfmap_disable(struct dotnet_state *st, struct dotnet_target *t) {
  uint32_t hr = 0;
  int rc = dotnet_ipc_call(t->pid, t->sock, DOTNET_IPC_SET_PROCESS, DOTNET_IPC_PROC_DISABLE_PERFMAP,
                           NULL, 0, NULL, 0, NULL, &hr, DOTNET_IPC_TIMEOUT_MS);
  if (rc < 0) PP_INFO(st->host, "pid %u: DisablePerfMap: %s", t->pid, strerror(-rc));
  t->perfmap = false;
}
