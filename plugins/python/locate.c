/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Finding CPython inside a process: which file holds it (libpython for
 * shared builds, the executable for static ones such as Debian's), which
 * version it is (read from the target's memory, never guessed from a file
 * name), and the anchors the sampler starts from (_PyRuntime or
 * interp_head). The file is the one the process maps, opened by
 * pp_find_module through the kit's target-file access: resolved in the
 * process's root (containers, private mount namespaces), the very inode
 * its maps name (else the mapping's own file), never a link, FIFO, device
 * or mount planted at its path. A refusal comes back with the kit's
 * reason, for the target's status.
 *
 * Version, first hit wins:
 *   1. _Py_DebugOffsets.version (3.13+), at the start of _PyRuntime; from
 *      3.14 every offset comes from that struct (debug_offsets.c)
 *   2. Py_Version (3.11+), a 4-byte PY_VERSION_HEX
 *   3. Py_GetVersion's static buffer ("version.0" / "version"), which holds
 *      sys.version once the interpreter has started
 *   4. a scan of .bss for "X.Y.Z (" (stripped binaries, as py-spy does)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "polyprof/kit/elf_lookup.h"
#include "polyprof/kit/proc.h"
#include "polyprof/kit/remote.h"
#include "python.h"

enum {
  SYM_RUNTIME,
  SYM_PY_VERSION,
  SYM_INTERP_HEAD,
  SYM_TSTATE_CURRENT,
  SYM_PYCODE_TYPE,
  SYM_VERSION0,
  SYM_VERSION,
  SYM_INTERP_HEAD_FN,
  SYM_GC_COLLECTING,
  SYM_NONE,
  SYM_STR_TYPE,
  SYM_LONG_TYPE,
  SYM_COUNT
};
static const char *const sym_names[SYM_COUNT] = {
    "_PyRuntime",  "Py_Version",     "interp_head",    "_PyThreadState_Current",
    "PyCode_Type", "version.0",      "version",        "PyInterpreterState_Head",
    "collecting",  "_Py_NoneStruct", "PyUnicode_Type", "PyLong_Type"};

static bool plausible(uint64_t p) {
  return p >= 4096 && p < (1ull << 47) && (p & 7) == 0;
}

/* "3.11.7 (main, ..." -> 3, 11, 7. */
static int parse_version(const char *s, int *maj, int *min, int *mic) {
  int a, b, c, n = 0;
  if (sscanf(s, "%d.%d.%d%n", &a, &b, &c, &n) != 3 || n == 0) return -EINVAL;
  if ((a != 2 && a != 3) || b < 0 || b > 99 || c < 0 || c > 99) return -EINVAL;
  *maj = a, *min = b, *mic = c;
  return 0;
}

/* Looks for "X.Y.Z" followed by a space and '(' in buf: the sys.version
 * text Py_GetVersion formats into a static buffer in .bss. */
static int scan_version(const char *buf, size_t len, int *maj, int *min, int *mic) {
  for (size_t i = 0; i + 8 < len; i++) {
    if ((buf[i] != '2' && buf[i] != '3') || buf[i + 1] != '.') continue;
    if (i > 0 && buf[i - 1] != '\0') continue; /* start of the buffer */
    char tmp[24];
    size_t k = 0;
    while (k + 1 < sizeof(tmp) && i + k < len && buf[i + k] && buf[i + k] != ' ') {
      tmp[k] = buf[i + k];
      k++;
    }
    tmp[k] = '\0';
    if (i + k + 1 >= len || buf[i + k] != ' ' || buf[i + k + 1] != '(') continue;
    if (parse_version(tmp, maj, min, mic) == 0) return 0;
  }
  return -ENOENT;
}

static int bss_scan(uint32_t pid, const struct pp_module *m, int *maj, int *min, int *mic) {
  uint64_t vaddr = 0, size = 0;
  if (pp_elf_find_section(m->fd, ".bss", &vaddr, &size) < 0) return -ENOENT;
  if (size > (16u << 20)) size = 16u << 20;
  char *buf = malloc(65536 + 32);
  if (!buf) return -ENOMEM;
  int rc = -ENOENT;
  for (uint64_t at = 0; at < size && rc == -ENOENT; at += 65536) {
    size_t n = size - at < 65536 ? (size_t)(size - at) : 65536;
    if (pp_remote_read((pid_t)pid, m->bias + vaddr + at, buf, n) < 0) continue;
    buf[n] = '\0';
    rc = scan_version(buf, n, maj, min, mic);
  }
  free(buf);
  return rc;
}

/* 2.7/3.6 stripped of .symtab: PyInterpreterState_Head() is
 * `mov rax, [rip+disp32]; ret`, which names interp_head. */
static uint64_t decode_head_fn(uint32_t pid, uint64_t fn) {
#if defined(__x86_64__)
  uint8_t code[8];
  if (!fn || pp_remote_read((pid_t)pid, fn, code, sizeof(code)) < 0) return 0;
  if (code[0] != 0x48 || code[1] != 0x8b || code[2] != 0x05 || code[7] != 0xc3) return 0;
  int32_t disp;
  memcpy(&disp, code + 3, 4);
  return fn + 7 + (int64_t)disp;
#else
  (void)pid, (void)fn;
  return 0;
#endif
}

int python_validate(struct py_proc *p) {
  uint64_t interp = 0;
  int rc = pp_remote_read((pid_t)p->pid, p->interp_head, &interp, 8);
  if (rc < 0) return rc;
  if (!interp) return -ENOENT; /* not initialised yet */
  if (!plausible(interp)) return -EINVAL;
  uint64_t ts = 0;
  rc = pp_remote_read((pid_t)p->pid, interp + p->off.is_tstate_head, &ts, 8);
  if (rc < 0) return rc;
  if (!ts) return 0; /* no thread yet (or all gone): layout cannot be checked */
  if (!plausible(ts)) return -EINVAL;
  uint64_t back = 0;
  rc = pp_remote_read((pid_t)p->pid, ts + p->off.ts_interp, &back, 8);
  if (rc < 0) return rc;
  return back == interp ? 0 : -EINVAL;
}

/* Symbols of a file, remembered by file identity: a machine runs many
 * processes of the same few interpreters, and parsing .symtab of libpython
 * costs milliseconds. Bounded, round-robin replacement. */
#define ELF_CACHE 16
static struct elf_entry {
  dev_t dev;
  ino_t ino;
  off_t size;
  time_t mtime;
  uint64_t v[SYM_COUNT];
  uint64_t section;
} elf_cache[ELF_CACHE];
static unsigned elf_cache_n, elf_cache_next;

static int elf_facts(int fd, uint64_t *v, uint64_t *section) {
  struct stat sb;
  if (fstat(fd, &sb) < 0) return -errno;
  for (unsigned i = 0; i < elf_cache_n; i++) {
    struct elf_entry *e = &elf_cache[i];
    if (e->dev == sb.st_dev && e->ino == sb.st_ino && e->size == sb.st_size &&
        e->mtime == sb.st_mtime) {
      memcpy(v, e->v, sizeof(e->v));
      *section = e->section;
      return 0;
    }
  }
  int found = pp_elf_lookup_symbols(fd, sym_names, SYM_COUNT, 0, v, NULL);
  if (found < 0) return found;
  uint64_t secsize = 0;
  if (pp_elf_find_section(fd, ".PyRuntime", section, &secsize) < 0) *section = 0;
  struct elf_entry *e = &elf_cache[elf_cache_next];
  elf_cache_next = (elf_cache_next + 1) % ELF_CACHE;
  if (elf_cache_n < ELF_CACHE) elf_cache_n++;
  *e = (struct elf_entry){.dev = sb.st_dev,
                          .ino = sb.st_ino,
                          .size = sb.st_size,
                          .mtime = sb.st_mtime,
                          .section = *section};
  memcpy(e->v, v, sizeof(e->v));
  return 0;
}

int python_setup_from_debug(struct py_proc *p, uint64_t runtime, const uint8_t *dbg, size_t len,
                            char *why, size_t whylen) {
  uint64_t hex;
  if (len < 24 || memcmp(dbg, "xdebugpy", 8) != 0) return -EINVAL;
  memcpy(&hex, dbg + 8, 8);
  int maj = (int)(hex >> 24) & 0xff, min = (int)(hex >> 16) & 0xff, mic = (int)(hex >> 8) & 0xff;
  unsigned level = (unsigned)(hex >> 4) & 0xf, serial = (unsigned)hex & 0xf;
  if (level == 0xf)
    snprintf(p->version, sizeof(p->version), "%d.%d.%d", maj, min, mic);
  else
    snprintf(p->version, sizeof(p->version), "%d.%d.%d%s%u", maj, min, mic,
             level == 0xa   ? "a"
             : level == 0xb ? "b"
                            : "rc",
             serial);
  p->major = maj, p->minor = min, p->micro = mic;
  if (python_offsets_for(maj, min, mic, &p->off) < 0) {
    snprintf(why, whylen, "unsupported Python %d.%d", maj, min);
    return -ENOTSUP;
  }
  /* 3.14's alphas and betas moved the struct's members around before
   * 3.14.0 fixed them; later minors are in development as their layout
   * here is taken, so their pre-releases are read (and checked) */
  if (min == 14 && (level == 0xa || level == 0xb)) {
    snprintf(why, whylen, "unsupported Python %s (pre-release)", p->version);
    return -ENOTSUP;
  }
  char reason[160];
  int rc = python_offsets_from_debug(dbg, len, &p->off, reason, sizeof(reason));
  if (rc < 0) {
    snprintf(why, whylen, "unsupported Python %d.%d (_Py_DebugOffsets: %s)", maj, min, reason);
    return -ENOTSUP;
  }
  p->runtime = runtime;
  p->interp_head = runtime + p->off.rt_interp_head;
  return 0;
}

static int try_module(uint32_t pid, const struct pp_module *m, struct py_proc *p, char *why,
                      size_t whylen) {
  uint64_t v[SYM_COUNT], section = 0;
  int rc0 = elf_facts(m->fd, v, &section);
  if (rc0 < 0) return rc0;
  uint64_t runtime = v[SYM_RUNTIME] ? m->bias + v[SYM_RUNTIME] : section ? m->bias + section : 0;
  if (!runtime && !v[SYM_INTERP_HEAD] && !v[SYM_TSTATE_CURRENT] && !v[SYM_INTERP_HEAD_FN] &&
      !v[SYM_PY_VERSION])
    return -ENOENT; /* not the file that holds CPython */

  int maj = 0, min = 0, mic = 0, have = 0;
  uint8_t dbg[PY_DEBUG_OFFSETS_READ];
  bool dbg_ok = false;
  if (runtime && pp_remote_read((pid_t)pid, runtime, dbg, sizeof(dbg)) == 0 &&
      memcmp(dbg, "xdebugpy", 8) == 0) {
    uint64_t hex;
    memcpy(&hex, dbg + 8, 8);
    maj = (int)(hex >> 24) & 0xff, min = (int)(hex >> 16) & 0xff, mic = (int)(hex >> 8) & 0xff;
    have = 1;
    dbg_ok = true;
  }
  if (!have && v[SYM_PY_VERSION]) {
    uint32_t hex = 0;
    if (pp_remote_read((pid_t)pid, m->bias + v[SYM_PY_VERSION], &hex, 4) == 0 && hex >> 24 >= 2) {
      maj = (int)(hex >> 24), min = (int)(hex >> 16) & 0xff, mic = (int)(hex >> 8) & 0xff;
      have = 1;
    }
  }
  for (int s = SYM_VERSION0; !have && s <= SYM_VERSION; s++) {
    char text[64];
    if (v[s] && pp_remote_read((pid_t)pid, m->bias + v[s], text, sizeof(text)) == 0) {
      text[sizeof(text) - 1] = '\0';
      have = parse_version(text, &maj, &min, &mic) == 0;
    }
  }
  if (!have) have = bss_scan(pid, m, &maj, &min, &mic) == 0;
  if (!have) return -ENOENT; /* maybe still starting: the caller retries */

  if (dbg_ok) {
    int rc = python_setup_from_debug(p, runtime, dbg, sizeof(dbg), why, whylen);
    if (rc < 0) return rc;
  } else {
    snprintf(p->version, sizeof(p->version), "%d.%d.%d", maj, min, mic);
    p->major = maj, p->minor = min, p->micro = mic;
    if (python_offsets_for(maj, min, mic, &p->off) < 0) {
      snprintf(why, whylen, "unsupported Python %d.%d", maj, min);
      return -ENOTSUP;
    }
    if (maj == 3 && min >= 13) {
      snprintf(why, whylen, "Python %s without readable _Py_DebugOffsets", p->version);
      return -ENOTSUP;
    }
  }

  p->runtime = runtime;
  p->pycode_type = v[SYM_PYCODE_TYPE] ? m->bias + v[SYM_PYCODE_TYPE] : 0;
  p->tstate_cur = v[SYM_TSTATE_CURRENT] ? m->bias + v[SYM_TSTATE_CURRENT] : 0;
  p->none_addr = v[SYM_NONE] ? m->bias + v[SYM_NONE] : 0;
  p->str_type = v[SYM_STR_TYPE] ? m->bias + v[SYM_STR_TYPE] : 0;
  p->long_type = v[SYM_LONG_TYPE] ? m->bias + v[SYM_LONG_TYPE] : 0;
  /* gcmodule.c's static: only in .symtab; without it, no <GC> frames */
  if (p->off.gc_kind == PY_GC_SYMBOL)
    p->gc_flag = v[SYM_GC_COLLECTING] ? m->bias + v[SYM_GC_COLLECTING] : 0;
  else if (p->off.gc_kind == PY_GC_RUNTIME && runtime)
    p->gc_flag = runtime + p->off.gc_collecting;
  if (p->off.rt_interp_head) {
    if (!runtime) {
      snprintf(why, whylen, "Python %s: no _PyRuntime in %s", p->version, m->path);
      return -ENOTSUP;
    }
    p->interp_head = runtime + p->off.rt_interp_head;
  } else if (v[SYM_INTERP_HEAD]) {
    p->interp_head = m->bias + v[SYM_INTERP_HEAD];
  } else {
    p->interp_head =
        decode_head_fn(pid, v[SYM_INTERP_HEAD_FN] ? m->bias + v[SYM_INTERP_HEAD_FN] : 0);
    if (!p->interp_head) {
      snprintf(why, whylen, "Python %s: interp_head not found (stripped %s)", p->version, m->path);
      return -ENOTSUP;
    }
  }
  p->map_lo = m->start, p->map_hi = m->end;
  const char *base = strrchr(m->path, '/');
  snprintf(p->module, sizeof(p->module), "%.63s", base ? base + 1 : m->path);
  return python_validate(p);
}

/* An fnmatch pattern matching exactly `name`. */
static void literal_pattern(const char *name, char *out, size_t cap) {
  size_t k = 0;
  for (const char *c = name; *c && k + 2 < cap; c++) {
    if (strchr("*?[\\", *c)) out[k++] = '\\';
    out[k++] = *c;
  }
  out[k] = '\0';
}

int python_locate(uint32_t pid, struct py_proc *p, char *why, size_t whylen) {
  memset(p, 0, sizeof(*p));
  p->pid = pid;
  p->pthread_tid_off = -1;
  why[0] = '\0';
  if (pp_proc_ns_pid(pid, &p->ns_pid) < 0) p->ns_pid = pid;

  struct pp_module *m = malloc(sizeof(*m));
  if (!m) return -ENOMEM;
  int rc = pp_find_module(pid, "libpython*.so*", m, why, whylen);
  if (rc == 0) rc = try_module(pid, m, p, why, whylen);
  pp_module_close(m);
  if (rc == -ENOENT || rc == -ENOEXEC) {
    /* static build (Debian's python3, uwsgi with embedded Python) */
    char exe[PATH_MAX];
    int e = pp_proc_exe(pid, exe, sizeof(exe));
    if (e < 0) {
      free(m);
      return e;
    }
    char *base = strrchr(exe, '/');
    base = base ? base + 1 : exe;
    /* an executable replaced or removed since the exec is still mapped,
     * under its old name with the same suffix in the maps */
    char pattern[1024];
    literal_pattern(base, pattern, sizeof(pattern));
    int r2 = pp_find_module(pid, pattern, m, why, whylen);
    if (r2 == 0) r2 = try_module(pid, m, p, why, whylen);
    pp_module_close(m);
    if (r2 != -ENOENT || rc != -ENOENT) rc = r2;
  }
  free(m);
  return rc;
}
