/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading Node.js processes from /proc.
 *
 * SIGUSR1's default action terminates a process, so a name match is never
 * enough to signal: nodejs_identify() also requires Node's exported entry
 * points in the executable (or its libnode.so) and a caught SIGUSR1. The
 * files read here belong to the target and are bounded and parsed
 * defensively; its executable is opened through the kit's target-file
 * access only, as the inode it maps.
 */
#include "nodeproc.h"

#include "polyprof/kit/elf_lookup.h"
#include "polyprof/kit/maps.h"
#include "polyprof/kit/proc.h"
#include "polyprof/kit/target_files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_ARGS_BYTES (64 * 1024)
#define MAX_ENV_BYTES (256 * 1024)
#define MAX_FD_INODES 8192
#define MAX_EXEC_MAPS 4096 /* executable mappings looked at for the binary */

/* Up to cap-1 bytes of a /proc file: the length, or -errno. */
static ssize_t read_bounded(const char *path, char *buf, size_t cap) {
  size_t n = 0;
  int rc = pp_read_file(path, buf, cap, &n);
  return rc < 0 ? rc : (ssize_t)n;
}

static const char *const node_symbols[] = {"napi_module_register", "_ZN2v87Isolate10GetCurrentEv"};

/* 1 if the ELF file exports both symbols Node is known by. */
static int elf_has_node_symbols(int fd) {
  uint64_t values[2];
  return pp_elf_lookup_symbols(fd, node_symbols, 2, PP_ELF_EXPORTED_ONLY, values, NULL) == 2;
}

/* Verdicts of elf_has_node_symbols() per file. Walking libnode's dynamic
 * symbols costs milliseconds, and every node process a host starts maps the
 * same file: the walk is done once per file version (device, inode, size,
 * mtime), not once per process. Bounded: the oldest entry is replaced. */
#define VERDICT_CACHE 32
struct verdict {
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtime;
  int ok; /* -1: empty slot */
};
static struct verdict verdicts[VERDICT_CACHE];
static size_t verdict_next;
static int verdicts_ready;

static struct verdict *verdict_find(const struct stat *st) {
  if (!verdicts_ready) {
    for (size_t i = 0; i < VERDICT_CACHE; i++)
      verdicts[i].ok = -1;
    verdicts_ready = 1;
  }
  for (size_t i = 0; i < VERDICT_CACHE; i++) {
    struct verdict *v = &verdicts[i];
    if (v->ok >= 0 && v->dev == st->st_dev && v->ino == st->st_ino && v->size == st->st_size &&
        v->mtime.tv_sec == st->st_mtim.tv_sec && v->mtime.tv_nsec == st->st_mtim.tv_nsec)
      return v;
  }
  return NULL;
}

/* Verdict for an open file, cached by its identity. */
static int fd_has_node_symbols(int fd) {
  struct stat st;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) return 0;
  const struct verdict *hit = verdict_find(&st);
  if (hit) return hit->ok;
  int ok = elf_has_node_symbols(fd);
  verdicts[verdict_next] = (struct verdict){
      .dev = st.st_dev, .ino = st.st_ino, .size = st.st_size, .mtime = st.st_mtim, .ok = ok};
  verdict_next = (verdict_next + 1) % VERDICT_CACHE;
  return ok;
}

/* The executable (exe, the path /proc/PID/exe names) or, for Node built as
 * a shared library (Debian's nodejs), a mapped libnode.so.<abi> exports
 * Node's symbols. Each file is opened as the very inode the process maps
 * (a mount or link planted over the path afterwards is not followed: the
 * mapping's own file is read instead). 1, or 0 (with the refusal in why
 * when a candidate could not be opened). */
static int maps_have_node_symbols(uint32_t pid, const char *exe, char *why, size_t whylen) {
  struct pp_map *maps = NULL;
  size_t n = 0;
  int rc = pp_maps_read(pid, 1, MAX_EXEC_MAPS, &maps, &n);
  if (rc < 0) {
    snprintf(why, whylen, "cannot read /proc/%u/maps: %s", pid, strerror(-rc));
    return 0;
  }
  int ok = 0;
  for (size_t i = 0; i < n && !ok; i++) {
    const struct pp_map *m = &maps[i];
    if (!m->path || m->path[0] != '/') continue;
    const char *base = strrchr(m->path, '/') + 1;
    if (strcmp(m->path, exe) != 0 && strncmp(base, "libnode.so", 10) != 0) continue;
    struct pp_file_id id = {
        .dev_major = m->dev_major, .dev_minor = m->dev_minor, .inode = m->inode};
    char r[256] = "";
    int fd = pp_target_open_mapped(pid, m->path, &id, m->start, m->end, r, sizeof(r));
    if (fd < 0) {
      if (!why[0]) snprintf(why, whylen, "%s", r);
      continue;
    }
    ok = fd_has_node_symbols(fd);
    close(fd);
  }
  pp_maps_free(maps, n);
  return ok;
}

int nodejs_catches_sigusr1(uint32_t pid) {
  char path[64], buf[4096];
  snprintf(path, sizeof(path), "/proc/%u/status", pid);
  ssize_t n = read_bounded(path, buf, sizeof(buf));
  if (n < 0) return n == -ENOENT ? -ESRCH : (int)n;
  const char *c = strstr(buf, "\nSigCgt:");
  const char *ig = strstr(buf, "\nSigIgn:");
  if (!c || !ig) return -EPROTO;
  unsigned long long cgt = strtoull(c + 8, NULL, 16), ign = strtoull(ig + 8, NULL, 16);
  const unsigned long long usr1 = 1ull << (10 - 1);
  return (cgt & usr1) && !(ign & usr1);
}

/* Node options that take their value as the next argv element. */
static int takes_value(const char *a) {
  static const char *const v[] = {
      "-r",      "--require",    "--import", "--loader", "--experimental-loader", "--inspect-port",
      "--title", "--conditions", "-C",       NULL};
  for (int i = 0; v[i]; i++)
    if (strcmp(a, v[i]) == 0) return 1;
  return 0;
}

static void note_option(const char *a, struct nodejs_facts *f) {
  /* --inspect-port alone does not open the inspector */
  if (strncmp(a, "--inspect", 9) == 0 &&
      (a[9] == '\0' || a[9] == '=' || strncmp(a + 9, "-brk", 4) == 0 ||
       strncmp(a + 9, "-wait", 5) == 0))
    f->inspect_flag = 1;
  if (strncmp(a, "--inspect-port", 14) == 0 || strncmp(a, "--debug-port", 12) == 0) {
    /* [host:]port after '='; the value as the next argument is not read */
    const char *v = strchr(a, '=');
    const char *c = v ? strrchr(v, ':') : NULL;
    char *end = NULL;
    long port = v ? strtol(c ? c + 1 : v + 1, &end, 10) : -1;
    f->inspect_port = end && *end == '\0' && port > 0 && port < 65536 ? (int)port : -1;
  }
  if (strcmp(a, "--disable-sigusr1") == 0) f->disable_sigusr1 = 1;
  if (strncmp(a, "--perf-basic-prof", 17) == 0 || strncmp(a, "--perf-prof", 11) == 0)
    f->perf_prof = 1;
}

static void scan_flags(uint32_t pid, struct nodejs_facts *f) {
  char path[64];
  char *buf = malloc(MAX_ENV_BYTES);
  if (!buf) return;
  snprintf(path, sizeof(path), "/proc/%u/cmdline", pid);
  ssize_t n = read_bounded(path, buf, MAX_ARGS_BYTES);
  /* node's own options come before the script (or -e) */
  for (ssize_t at = n > 0 ? (ssize_t)strlen(buf) + 1 : 0; at < n;) {
    const char *a = buf + at;
    if (a[0] != '-' || strcmp(a, "--") == 0) break;
    note_option(a, f);
    at += (ssize_t)strlen(a) + 1;
    if (takes_value(a) && at < n) at += (ssize_t)strlen(buf + at) + 1;
    if (strcmp(a, "-e") == 0 || strcmp(a, "--eval") == 0 || strcmp(a, "-p") == 0) break;
  }
  snprintf(path, sizeof(path), "/proc/%u/environ", pid);
  n = read_bounded(path, buf, MAX_ENV_BYTES);
  for (ssize_t at = 0; n > 0 && at < n; at += (ssize_t)strlen(buf + at) + 1) {
    if (strncmp(buf + at, "NODE_OPTIONS=", 13) != 0) continue;
    char *save = NULL;
    for (char *t = strtok_r(buf + at + 13, " \t", &save); t; t = strtok_r(NULL, " \t", &save))
      note_option(t, f);
    break;
  }
  free(buf);
}

int nodejs_identify(uint32_t pid, struct nodejs_facts *f, char *why, size_t whylen) {
  memset(f, 0, sizeof(*f));
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/exe", pid);
  ssize_t n = readlink(path, f->exe, sizeof(f->exe) - 1);
  if (n < 0) {
    snprintf(why, whylen, "cannot read /proc/%u/exe: %s", pid, strerror(errno));
    return errno == ENOENT ? -ESRCH : -ENOTSUP;
  }
  f->exe[n] = '\0';
  char base[256];
  const char *b = strrchr(f->exe, '/');
  snprintf(base, sizeof(base), "%s", b ? b + 1 : f->exe);
  char *del = strstr(base, " (deleted)");
  if (del) *del = '\0';
  if (strcmp(base, "node") != 0 && strcmp(base, "nodejs") != 0 &&
      fnmatch("node[0-9]*", base, 0) != 0) {
    snprintf(why, whylen, "executable %s is not named node", base);
    return -ENOTSUP;
  }
  char refused[256] = "";
  if (!maps_have_node_symbols(pid, f->exe, refused, sizeof(refused))) {
    if (refused[0])
      snprintf(why, whylen, "cannot check that it is Node.js: %s", refused);
    else
      snprintf(why, whylen, "%s does not export Node.js entry points (not Node.js)", f->exe);
    return -ENOTSUP;
  }
  int c = nodejs_catches_sigusr1(pid);
  if (c < 0) {
    snprintf(why, whylen, "cannot read its signal dispositions: %s", strerror(-c));
    return c == -ESRCH ? -ESRCH : -ENOTSUP;
  }
  scan_flags(pid, f);
  if (f->disable_sigusr1) {
    snprintf(why, whylen, "started with --disable-sigusr1");
    return -ENOTSUP;
  }
  if (!c) {
    /* also true for a Node that is still starting up: the caller retries */
    snprintf(why, whylen, "it does not handle SIGUSR1 (built without the inspector?)");
    return -EAGAIN;
  }
  return 0;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static int local_is_loopback_or_any(const char *addr, size_t len) {
  static const char *const ok[] = {"0100007F",
                                   "7F000001",
                                   "00000000",
                                   "00000000000000000000000000000000",
                                   "0000000000000000FFFF00000100007F",
                                   NULL};
  for (int i = 0; ok[i]; i++)
    if (strlen(ok[i]) == len && strncmp(addr, ok[i], len) == 0) return 1;
  return 0;
}

/* Scans pid's TCP sockets (its fds matched against /proc/<pid>/net/tcp{,6},
 * i.e. its own network namespace). With want_port 0: loopback listeners into
 * out. Otherwise: counts the established connections whose local port is
 * want_port, i.e. the peers connected to that server of pid. */
static int scan_tcp(uint32_t pid, uint16_t want_port, struct nodejs_listener *out, size_t max) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/fd", pid);
  DIR *d = opendir(path);
  if (!d) return errno == ENOENT ? -ESRCH : -errno;
  uint64_t *inodes = malloc(MAX_FD_INODES * sizeof(*inodes));
  if (!inodes) {
    closedir(d);
    return -ENOMEM;
  }
  size_t ni = 0;
  struct dirent *de;
  while ((de = readdir(d)) && ni < MAX_FD_INODES) {
    if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
    char lp[300], link[64];
    snprintf(lp, sizeof(lp), "/proc/%u/fd/%s", pid, de->d_name);
    ssize_t n = readlink(lp, link, sizeof(link) - 1);
    if (n <= 0) continue;
    link[n] = '\0';
    unsigned long long ino;
    if (sscanf(link, "socket:[%llu]", &ino) == 1) inodes[ni++] = ino;
  }
  closedir(d);
  qsort(inodes, ni, sizeof(*inodes), cmp_u64);
  size_t got = 0;
  int read_any = 0;
  for (int v6 = 0; v6 < 2; v6++) {
    snprintf(path, sizeof(path), "/proc/%u/net/tcp%s", pid, v6 ? "6" : "");
    FILE *f = fopen(path, "re");
    if (!f) continue;
    char line[512];
    if (!fgets(line, sizeof(line), f)) { /* header */
      fclose(f);
      continue;
    }
    read_any = 1;
    while ((want_port || got < max) && fgets(line, sizeof(line), f)) {
      char local[64], st[8];
      unsigned port;
      unsigned long long ino;
      /* sl local rem st tx:rx tr:when retr uid timeout inode */
      if (sscanf(line, " %*s %63[0-9A-Fa-f]:%x %*s %7s %*s %*s %*s %*s %*s %llu", local, &port, st,
                 &ino) != 4)
        continue;
      if (port == 0 || port > 65535) continue;
      if (!bsearch(&ino, inodes, ni, sizeof(*inodes), cmp_u64)) continue;
      if (want_port) {
        if (port == want_port && strcmp(st, "01") == 0) got++; /* ESTABLISHED */
        continue;
      }
      if (strcmp(st, "0A") != 0) continue; /* LISTEN */
      if (!local_is_loopback_or_any(local, strlen(local))) continue;
      out[got++] = (struct nodejs_listener){.inode = ino, .port = (uint16_t)port};
    }
    fclose(f);
  }
  free(inodes);
  if (want_port && (!read_any || ni >= MAX_FD_INODES)) return -EIO; /* cannot tell */
  return (int)got;
}

int nodejs_listeners(uint32_t pid, struct nodejs_listener *out, size_t max) {
  return scan_tcp(pid, 0, out, max);
}

int nodejs_port_connections(uint32_t pid, uint16_t port) {
  return port ? scan_tcp(pid, port, NULL, 0) : -EINVAL;
}

uint64_t nodejs_port_listener(uint32_t pid, uint16_t port) {
  uint64_t found = 0;
  for (int v6 = 0; v6 < 2 && !found; v6++) {
    char path[64], line[512];
    snprintf(path, sizeof(path), "/proc/%u/net/tcp%s", pid, v6 ? "6" : "");
    FILE *f = fopen(path, "re");
    if (!f) continue;
    while (!found && fgets(line, sizeof(line), f)) {
      char st[8];
      unsigned p;
      unsigned long long ino;
      if (sscanf(line, " %*s %*[0-9A-Fa-f]:%x %*s %7s %*s %*s %*s %*s %*s %llu", &p, st, &ino) ==
              3 &&
          p == port && strcmp(st, "0A") == 0 && ino)
        found = ino;
    }
    fclose(f);
  }
  return found;
}

static int ends_with(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && strcmp(s + a - b, suf) == 0;
}

int nodejs_appid(uint32_t pid, char *out, size_t cap) {
  char path[64];
  char *buf = malloc(MAX_ARGS_BYTES);
  if (!buf) return -ENOMEM;
  snprintf(path, sizeof(path), "/proc/%u/cmdline", pid);
  ssize_t n = read_bounded(path, buf, MAX_ARGS_BYTES);
  const char *script = NULL;
  for (ssize_t at = n > 0 ? (ssize_t)strlen(buf) + 1 : 0; at < n;) {
    const char *a = buf + at;
    at += (ssize_t)strlen(a) + 1;
    if (strncmp(a, "--require=", 10) == 0) continue;
    if (strcmp(a, "--require") == 0 || strcmp(a, "-r") == 0) {
      if (at < n) at += (ssize_t)strlen(buf + at) + 1;
      continue;
    }
    if (ends_with(a, ".js") || ends_with(a, ".mjs") || ends_with(a, ".cjs")) {
      script = a;
      break;
    }
  }
  int rc = -ENOENT;
  if (script && strlen(script) < 1024) {
    char cwd[1024] = "";
    snprintf(path, sizeof(path), "/proc/%u/cwd", pid);
    ssize_t cl = script[0] == '/' ? 0 : readlink(path, cwd, sizeof(cwd) - 1);
    if (cl > 0) cwd[cl] = '\0';
    const char *rel = script;
    while (strncmp(rel, "./", 2) == 0)
      rel += 2;
    if (script[0] == '/')
      snprintf(out, cap, "nodejs: %s (%s)", script, script);
    else
      snprintf(out, cap, "nodejs: %s (%s%s%s)", script, cwd,
               cl > 0 && strcmp(cwd, "/") != 0 ? "/" : "", rel);
    rc = 0;
  }
  free(buf);
  return rc;
}
