/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Address -> frame, and the session's frame table.
 *
 * Samples are symbolized when they are drained (within a tick of being
 * taken), against the mappings the process had at that moment. A frame is
 * interned once per session under a numeric key (object id + symbol
 * address, kernel symbol address, JIT blob...), so the per-sample cost is
 * two binary searches and one hash probe; names are demangled and copied
 * only when a key is first seen.
 *
 * Naming follows perf script as gProfiler post-processes it: the symbol
 * without offset; "(path)" for an unknown symbol in a known object
 * ("[vdso]" -> "(vdso)"); "[unknown]" when not even the object is known.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perf.h"
#include "polyprof/kit/demangle.h"
#include "polyprof/kit/log.h"
#include "polyprof/kit/pe_r2r.h"
#include "polyprof/kit/proc.h"
#include "polyprof/kit/target_files.h"

#define KEY_KERNEL (1ull << 62)
#define KEY_JIT (2ull << 62)
#define JIT_RECHECK_TICKS 20 /* look for a perf map that did not exist, every ~2 s */

static uint64_t key_hash(uint64_t a, uint64_t b) {
  uint64_t h = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull + (a << 6) + (a >> 2));
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 29;
  return h;
}

static uint32_t arena_add(struct perf_frames *f, const char *s) {
  size_t n = strlen(s) + 1;
  if (f->arena_len + n > f->arena_cap) {
    size_t ncap = f->arena_cap ? f->arena_cap * 2 : 65536;
    while (ncap < f->arena_len + n)
      ncap *= 2;
    if (ncap >= UINT32_MAX) return UINT32_MAX;
    char *g = realloc(f->arena, ncap);
    if (!g) return UINT32_MAX;
    f->arena = g;
    f->arena_cap = ncap;
  }
  memcpy(f->arena + f->arena_len, s, n);
  uint32_t off = (uint32_t)f->arena_len;
  f->arena_len += n;
  return off;
}

static int frames_rehash(struct perf_frames *f, size_t nslots) {
  uint32_t *s = calloc(nslots, sizeof(*s));
  if (!s) return -ENOMEM;
  for (size_t i = 0; i < f->n; i++) {
    size_t j = key_hash(f->v[i].ka, f->v[i].kb) & (nslots - 1);
    while (s[j])
      j = (j + 1) & (nslots - 1);
    s[j] = (uint32_t)i + 1;
  }
  free(f->slots);
  f->slots = s;
  f->nslots = nslots;
  return 0;
}

static uint32_t frames_add(struct perf_frames *f, uint64_t ka, uint64_t kb, const char *name,
                           const char *file, uint32_t kind, uint32_t flags);

void perf_frames_reset(struct perf_frames *f) {
  f->n = 0;
  f->arena_len = 0;
  if (f->slots) memset(f->slots, 0, f->nslots * sizeof(*f->slots));
  /* id 0 is always "[unknown]" */
  frames_add(f, 0, 0, "[unknown]", NULL, PP_FRAME_NATIVE, PERF_FRAME_UNKNOWN);
}

void perf_frames_init(struct perf_frames *f, size_t max) {
  memset(f, 0, sizeof(*f));
  f->max = max < 16 ? 16 : max;
  perf_frames_reset(f);
}

void perf_frames_fini(struct perf_frames *f) {
  free(f->v);
  free(f->slots);
  free(f->arena);
  memset(f, 0, sizeof(*f));
}

static uint32_t frames_find(const struct perf_frames *f, uint64_t ka, uint64_t kb) {
  if (!f->nslots) return UINT32_MAX;
  size_t mask = f->nslots - 1;
  for (size_t j = key_hash(ka, kb) & mask;; j = (j + 1) & mask) {
    uint32_t x = f->slots[j];
    if (!x) return UINT32_MAX;
    const struct perf_frame *e = &f->v[x - 1];
    if (e->ka == ka && e->kb == kb) return x - 1;
  }
}

static uint32_t frames_add(struct perf_frames *f, uint64_t ka, uint64_t kb, const char *name,
                           const char *file, uint32_t kind, uint32_t flags) {
  if (f->n >= f->max) {
    f->dropped++;
    return PERF_FRAME_ID_UNKNOWN;
  }
  if ((f->n + 1) * 2 > f->nslots && frames_rehash(f, f->nslots ? f->nslots * 2 : 4096) < 0)
    return PERF_FRAME_ID_UNKNOWN;
  if (f->n == f->cap) {
    size_t ncap = f->cap ? f->cap * 2 : 1024;
    struct perf_frame *g = realloc(f->v, ncap * sizeof(*g));
    if (!g) return PERF_FRAME_ID_UNKNOWN;
    f->v = g;
    f->cap = ncap;
  }
  uint32_t noff = arena_add(f, name);
  uint32_t foff = file ? arena_add(f, file) : UINT32_MAX;
  if (noff == UINT32_MAX) return PERF_FRAME_ID_UNKNOWN;
  uint32_t id = (uint32_t)f->n++;
  f->v[id] = (struct perf_frame){
      .ka = ka, .kb = kb, .name = noff, .file = foff, .kind = kind, .flags = flags};
  size_t mask = f->nslots - 1;
  size_t j = key_hash(ka, kb) & mask;
  while (f->slots[j])
    j = (j + 1) & mask;
  f->slots[j] = id + 1;
  return id;
}

/* ---- kernel ---- */

uint32_t perf_sym_kernel(struct perf_state *st, uint64_t addr) {
  if (st->kallsyms_state == 0) {
    int rc = pp_kallsyms_load(NULL, &st->kallsyms);
    st->kallsyms_state = rc < 0 ? rc : 1;
    if (rc == -EPERM)
      PP_WARNING(st->host,
                 "kernel symbols are hidden (kernel.kptr_restrict, no CAP_SYSLOG): kernel frames "
                 "will read (kernel.kallsyms); run as root or set kernel.kptr_restrict=0");
    else if (rc < 0)
      PP_WARNING(st->host, "cannot read /proc/kallsyms: %s", strerror(-rc));
    else
      PP_DEBUG(st->host, "kallsyms: %zu symbols, %zu KiB", pp_kallsyms_count(st->kallsyms),
               pp_kallsyms_bytes(st->kallsyms) / 1024);
  }
  uint64_t start = 0;
  const char *module = NULL;
  const char *name = st->kallsyms ? pp_kallsyms_lookup(st->kallsyms, addr, &start, &module) : NULL;
  if (!name) {
    uint32_t id = frames_find(&st->frames, KEY_KERNEL, UINT64_MAX);
    if (id != UINT32_MAX) return id;
    return frames_add(&st->frames, KEY_KERNEL, UINT64_MAX, "(kernel.kallsyms)", "[kernel.kallsyms]",
                      PP_FRAME_NATIVE, PERF_FRAME_UNKNOWN);
  }
  uint32_t id = frames_find(&st->frames, KEY_KERNEL, start);
  if (id != UINT32_MAX) return id;
  char file[80];
  snprintf(file, sizeof(file), "[%s]", module ? module : "kernel.kallsyms");
  return frames_add(&st->frames, KEY_KERNEL, start, name, file, PP_FRAME_KERNEL, 0);
}

/* ---- JIT perf maps ---- */

/* Node --perf-prof writes its jitdump in its working directory and keeps it
 * mapped executable (for perf): the path is among the mappings. .NET
 * (PerfMapEnabled=2) maps it only briefly; it writes it in /tmp. */
static const char *jitdump_path(const struct perf_proc *p, char *tmp, size_t cap) {
  char base[32];
  size_t bl = (size_t)snprintf(base, sizeof(base), "/jit-%u.dump", p->ns_pid);
  for (size_t i = 0; i < p->nmaps; i++) {
    const char *path = p->maps[i].dso ? p->maps[i].dso->path : NULL;
    size_t n = path ? strlen(path) : 0;
    if (n > bl && strcmp(path + n - bl, base) == 0) return path;
  }
  snprintf(tmp, cap, "/tmp%s", base);
  return tmp;
}

/* A process without a perf map: its jitdump, read on from where the last
 * read stopped, at most once per tick (every couple of seconds after a
 * failure). */
static const char *jitdump_lookup(struct perf_state *st, struct perf_proc *p, uint64_t addr,
                                  uint64_t *start) {
  if (st->tick < p->jitdump_tick) return NULL;
  p->jitdump_tick = st->tick + 1;
  char tmp[48];
  const char *path = jitdump_path(p, tmp, sizeof(tmp));
  int rc = -ENOMEM;
  if (p->jitdump || pp_jitdump_new(st->perfmap_max_bytes, &p->jitdump) == 0)
    rc = pp_jitdump_update(p->jitdump, p->pid, path);
  if (rc < 0) p->jitdump_tick = st->tick + JIT_RECHECK_TICKS;
  if (rc < 0 && p->jitdump && pp_jitdump_offset(p->jitdump) == 0) {
    pp_jitdump_free(p->jitdump); /* none there: hold no reader */
    p->jitdump = NULL;
  }
  return rc > 0 ? pp_perfmap_lookup(pp_jitdump_map(p->jitdump), addr, start) : NULL;
}

/* /tmp/perf-<nspid>.map as the process sees it, through the kit: in its
 * root, a regular file owned by its effective uid (the JIT writes it
 * itself; perf makes the same owner check), so a link, FIFO, device or
 * mount planted there is refused unopened and its JIT frames stay
 * "(/tmp/perf-N.map)". A process already gone (its root with it) in the
 * host's pid namespace: the java plugin's copy in its runtime directory,
 * else the host /tmp file, never through a link, checked to be a regular
 * file before it is opened (the host's /tmp holds no mount a target could
 * plant). */
static int open_perfmap(struct perf_state *st, struct perf_proc *p, struct stat *sb) {
  char path[64], why[256] = "";
  snprintf(path, sizeof(path), "/tmp/perf-%u.map", p->ns_pid);
  int fd = pp_target_open(p->pid, path, 0, NULL, sb, why, sizeof(why));
  if (fd >= 0) return fd;
  if (fd != -ESRCH || p->ns_pid != p->pid) {
    if (fd != -ENOENT && !p->jit_refused_logged) {
      p->jit_refused_logged = true;
      PP_DEBUG(st->host, "pid %u: perf map not read, its JIT frames stay unknown: %s", p->pid,
               why[0] ? why : strerror(-fd));
    }
    return fd;
  }
  /* the copy the java plugin made in its runtime directory, our own
   * directory's sibling (root's /run/polyprof/java, a user's own under
   * rootless), for a JVM whose /tmp is not the host's */
  const char *own = PP_HOST_HAS(st->host, scratch_dir) ? st->host->scratch_dir(st->host) : NULL;
  const char *slash = own ? strrchr(own, '/') : NULL;
  if (slash) {
    char copy[4200];
    snprintf(copy, sizeof(copy), "%.*s/java/perf-%u.map", (int)(slash - own), own, p->pid);
    int cfd = pp_open_host_file(copy, NULL, sb);
    if (cfd >= 0) return cfd;
  }
  return pp_open_host_file(path, NULL, sb);
}

static const char *jit_lookup(struct perf_state *st, struct perf_proc *p, uint64_t addr,
                              uint64_t *start) {
  const char *name = p->jit ? pp_perfmap_lookup(p->jit, addr, start) : NULL;
  if (!p->jit && p->jitdump) name = pp_perfmap_lookup(pp_jitdump_map(p->jitdump), addr, start);
  if (name || p->pid == 0) return name;
  /* Missed: the JIT may have appended since we read the file. Re-read at
   * most once per tick, only if it changed; a missing file is looked for
   * again every couple of seconds. */
  if (p->jit_checked_tick == st->tick && p->jit_checked_tick != 0) return NULL;
  if (p->jit_missing && st->tick < p->jit_checked_tick + JIT_RECHECK_TICKS)
    return jitdump_lookup(st, p, addr, start);
  p->jit_checked_tick = st->tick ? st->tick : 1;
  if (!p->ns_pid && pp_proc_ns_pid(p->pid, &p->ns_pid) < 0) p->ns_pid = p->pid;
  struct stat sb;
  int fd = open_perfmap(st, p, &sb);
  p->jit_open_err = fd < 0 ? fd : 0;
  if (fd < 0) {
    p->jit_missing = true;
    return jitdump_lookup(st, p, addr, start);
  }
  if (pp_proc_file_predates(p->pid, &sb)) {
    /* left by an earlier process with this pid: not this one's code */
    close(fd);
    p->jit_missing = true;
    return jitdump_lookup(st, p, addr, start);
  }
  p->jit_missing = false;
  if (p->jit && sb.st_size == p->jit_size && sb.st_mtime == p->jit_mtime) {
    close(fd);
    return NULL;
  }
  struct pp_perfmap *m = NULL;
  int rc = pp_perfmap_load_fd(fd, st->perfmap_max_bytes, 0, &m);
  close(fd);
  if (rc < 0) return NULL;
  pp_perfmap_free(p->jit);
  p->jit = m;
  p->jit_size = sb.st_size;
  p->jit_mtime = sb.st_mtime;
  return pp_perfmap_lookup(p->jit, addr, start);
}

/* ---- user space ---- */

/* The runtime whose JIT wrote anonymous code, from what the process maps
 * (the file that holds the JIT), for the label of code it did not name. */
static const char *jit_runtime(const struct perf_proc *p) {
  static const struct {
    const char *file, *runtime;
  } known[] = {
      {"libjvm.so", "java"},    {"libcoreclr.so", "dotnet"}, {"libclrjit.so", "dotnet"},
      {"libnode.so", "nodejs"}, {"/node", "nodejs"},         {"libmonosgen", "mono"},
      {"libruby", "ruby"},      {"/ruby", "ruby"},           {"libphp", "php"},
      {"/php", "php"},          {"libpython", "python"},     {"/python", "python"},
      {"libluajit", "luajit"},
  };
  for (size_t i = 0; i < p->nmaps; i++) {
    const char *path = p->maps[i].dso ? p->maps[i].dso->path : NULL;
    if (!path) continue;
    const char *base = strrchr(path, '/');
    for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++) {
      const char *f = known[k].file;
      /* "/name": the executable's own basename starts so (node, ruby3.1) */
      if (f[0] == '/' ? base && strncmp(base, f, strlen(f)) == 0 : strstr(path, f) != NULL)
        return known[k].runtime;
    }
  }
  return "unknown runtime";
}

/* The kind of a frame a process's perf map or jitdump names: the JIT of
 * a .NET process names its code as the dotnet plugin does. Asked once per
 * new frame; the answer for the last process asked is kept while its
 * mappings stay the same in number (a JIT-heavy session asks thousands of
 * times, and a .NET process maps hundreds of files). */
static uint32_t jit_kind(const struct perf_proc *p) {
  static uint32_t last_pid;
  static size_t last_nmaps;
  static uint32_t last_kind;
  if (p->pid != last_pid || p->nmaps != last_nmaps || !last_pid) {
    last_pid = p->pid;
    last_nmaps = p->nmaps;
    last_kind = strcmp(jit_runtime(p), "dotnet") == 0 ? PP_FRAME_DOTNET : PP_FRAME_NATIVE;
  }
  return last_kind;
}

/* Anonymous executable memory that no perf map or jitdump names. perf
 * calls it "/tmp/perf-<nspid>.map" whether or not that file exists, which
 * reads as a file; here it says whose JIT it is and why it has no name
 * (usually: the runtime's plugin never attached, e.g. a JVM that ended
 * first, so nothing wrote a map). One frame per pid and reason. */
static uint32_t unnamed_jit(struct perf_state *st, struct perf_proc *p, uint64_t ka) {
  unsigned reason = p->jit || p->jitdump ? 0 : p->jit_open_err == -ENOENT ? 1 : 2;
  uint64_t kb = UINT64_MAX - reason;
  uint32_t id = frames_find(&st->frames, ka, kb);
  if (id != UINT32_MAX) return id;
  static const char *const why[] = {"not in its perf map", "no perf map", "perf map refused"};
  char name[96];
  snprintf(name, sizeof(name), "[jit: %s, unnamed: %s]", jit_runtime(p), why[reason]);
  return frames_add(&st->frames, ka, kb, name, NULL, PP_FRAME_NATIVE, PERF_FRAME_JIT_RUN);
}

uint32_t perf_sym_fold_jit(const struct perf_state *st, uint32_t *fr, uint32_t n) {
  uint32_t out = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (out && fr[i] == fr[out - 1] && (st->frames.v[fr[i]].flags & PERF_FRAME_JIT_RUN)) continue;
    fr[out++] = fr[i];
  }
  return out;
}

static uint32_t unknown_in_dso(struct perf_state *st, struct perf_dso *dso) {
  uint32_t id = frames_find(&st->frames, dso->id, UINT64_MAX);
  if (id != UINT32_MAX) return id;
  char name[4200];
  const char *path = dso->path;
  size_t n = strlen(path);
  if (n >= 2 && path[0] == '[' && path[n - 1] == ']')
    snprintf(name, sizeof(name), "(%.*s)", (int)(n - 2), path + 1);
  else
    snprintf(name, sizeof(name), "(%s)", path);
  return frames_add(&st->frames, dso->id, UINT64_MAX, name, dso->path, PP_FRAME_NATIVE, 0);
}

/* Precompiled (ReadyToRun) .NET code: the runtime maps the image's
 * sections from the file, so the pc's file offset (through its mapping)
 * gives its RVA (through the image's section table), and the image's own
 * tables name the method. Code they do not name stays "(path)". */
static uint32_t sym_r2r(struct perf_state *st, struct perf_proc *p, struct perf_map *m,
                        uint64_t addr) {
  struct perf_dso *dso = m->dso;
  uint32_t rva = 0, start = 0;
  const char *name = NULL;
  if (perf_dso_need_r2r(&st->dsos, dso, p, m) == 0 &&
      pp_r2r_offset_to_rva(dso->r2r, addr - m->start + m->pgoff, &rva) == 0)
    name = pp_r2r_lookup(dso->r2r, rva, &start);
  if (!name) {
    st->r2r_unnamed++;
    return unknown_in_dso(st, dso);
  }
  st->r2r_frames++;
  uint32_t id = frames_find(&st->frames, dso->id, start);
  if (id != UINT32_MAX) return id;
  return frames_add(&st->frames, dso->id, start, name, dso->path, PP_FRAME_DOTNET, 0);
}

static int map_bias(struct perf_state *st, struct perf_proc *p, struct perf_map *m) {
  if (m->bias_ok) return m->bias_ok > 0 ? 0 : -1;
  uint64_t vaddr;
  if (perf_dso_need_info(&st->dsos, m->dso, p, m) < 0 ||
      pp_elf_offset_to_vaddr(&m->dso->info, m->pgoff, &vaddr) < 0) {
    m->bias_ok = -1;
    return -1;
  }
  m->bias = m->start - vaddr;
  m->bias_ok = 1;
  return 0;
}

uint32_t perf_sym_user(struct perf_state *st, struct perf_proc *p, uint64_t addr, bool leaf) {
  /* Return addresses are looked up as they are, not as the call before
   * them: that is what perf script prints, so frames match what gProfiler
   * users know (a call ending a function shows as the next function). */
  (void)leaf;
  uint64_t a = addr;
  struct perf_map *m = perf_proc_find_map(p, a);
  if (!m || !m->dso) {
    uint64_t start = 0;
    const char *name = jit_lookup(st, p, a, &start);
    char file[64];
    snprintf(file, sizeof(file), "/tmp/perf-%u.map", p->ns_pid ? p->ns_pid : p->pid);
    uint64_t ka = KEY_JIT | p->pid;
    if (!name) return m ? unnamed_jit(st, p, ka) : PERF_FRAME_ID_UNKNOWN;
    uint32_t id = frames_find(&st->frames, ka, start);
    if (id != UINT32_MAX) return id;
    return frames_add(&st->frames, ka, start, name, file, jit_kind(p), 0);
  }
  struct perf_dso *dso = m->dso;
  if (perf_dso_need_info(&st->dsos, dso, p, m) == -ENOEXEC && dso->is_pe)
    return sym_r2r(st, p, m, a);
  int rc = perf_dso_need_symbols(&st->dsos, dso, p, m);
  if (rc < 0 || !dso->symtab || map_bias(st, p, m) < 0) {
    if (!dso->logged) {
      dso->logged = true;
      PP_DEBUG(st->host, "no symbols for %s (pid %u): %s", dso->path, p->pid,
               rc < 0         ? strerror(-rc)
               : !dso->symtab ? "no symbol table"
                              : "no segment for the mapping");
    }
    if (dso->info_state == 1 && dso->info.is_go && !p->go_version[0] && dso->info.go_version[0])
      snprintf(p->go_version, sizeof(p->go_version), "%s", dso->info.go_version);
    return unknown_in_dso(st, dso);
  }
  if (dso->info.is_go && !p->go_version[0] && dso->info.go_version[0]) {
    snprintf(p->go_version, sizeof(p->go_version), "%s", dso->info.go_version);
    p->go_static = !dso->info.has_interp;
  }
  uint64_t start = 0;
  if (!pp_elf_symtab_find(dso->symtab, a - m->bias, &start)) return unknown_in_dso(st, dso);
  uint32_t id = frames_find(&st->frames, dso->id, start);
  if (id != UINT32_MAX) return id;
  /* a new frame this session: only now is the name read (from the file) */
  char buf[4096];
  const char *name = pp_elf_symtab_lookup(dso->symtab, a - m->bias, &start, buf, sizeof(buf));
  if (!name) return unknown_in_dso(st, dso);
  char dem[1024];
  const char *d = pp_demangle(name, dem, sizeof(dem));
  return frames_add(&st->frames, dso->id, start, d ? d : name, dso->path, PP_FRAME_NATIVE, 0);
}
