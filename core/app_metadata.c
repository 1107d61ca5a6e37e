/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Application metadata of one process: ELF facts of its executable and of
 * the runtime library it maps (build ids, machine, interpreter), AT_EXECFN
 * from its auxv and memory. All of it is read from files or memory another
 * process controls, so every size and offset is checked before use.
 */
#include "app_metadata.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "metadata.h"
#include "polyprof/kit/proc.h"
#include "polyprof/kit/remote.h"

#define MAX_PHDRS 4096
#define MAX_NOTE_BYTES (64 * 1024)
#define MAX_MAPS_LINES 200000
#define MAX_AUXV_BYTES 4096

/* ---- ELF ---- */

static bool host_is_le(void) {
  const uint16_t one = 1;
  return *(const uint8_t *)&one == 1;
}

struct elf_reader {
  int fd;
  off_t size;
  bool swap;
};

static uint16_t rd16(const struct elf_reader *r, uint16_t v) {
  return r->swap ? __builtin_bswap16(v) : v;
}
static uint32_t rd32(const struct elf_reader *r, uint32_t v) {
  return r->swap ? __builtin_bswap32(v) : v;
}
static uint64_t rd64(const struct elf_reader *r, uint64_t v) {
  return r->swap ? __builtin_bswap64(v) : v;
}

static bool read_at(const struct elf_reader *r, uint64_t off, void *buf, size_t len) {
  if (off > (uint64_t)r->size || len > (uint64_t)r->size - off) return false;
  size_t done = 0;
  while (done < len) {
    ssize_t n = pread(r->fd, (char *)buf + done, len - done, (off_t)(off + done));
    if (n <= 0) return false;
    done += (size_t)n;
  }
  return true;
}

static size_t align4(size_t v) {
  return (v + 3) & ~(size_t)3;
}

/* Walk the notes of one PT_NOTE segment for NT_GNU_BUILD_ID. */
static void scan_notes(const struct elf_reader *r, uint64_t off, uint64_t len,
                       struct pp_elf_facts *out) {
  if (len > MAX_NOTE_BYTES) len = MAX_NOTE_BYTES;
  unsigned char *buf = malloc(len ? len : 1);
  if (!buf || !read_at(r, off, buf, len)) {
    free(buf);
    return;
  }
  size_t p = 0;
  while (p + 12 <= len) {
    uint32_t namesz, descsz, type;
    memcpy(&namesz, buf + p, 4);
    memcpy(&descsz, buf + p + 4, 4);
    memcpy(&type, buf + p + 8, 4);
    namesz = rd32(r, namesz);
    descsz = rd32(r, descsz);
    type = rd32(r, type);
    p += 12;
    if (namesz > len - p || align4(namesz) > len - p) break;
    size_t name_off = p;
    p += align4(namesz);
    if (descsz > len - p) break;
    if (type == NT_GNU_BUILD_ID && namesz == 4 && memcmp(buf + name_off, "GNU", 4) == 0 &&
        descsz > 0 && descsz * 2 < sizeof(out->build_id)) {
      for (uint32_t i = 0; i < descsz; i++)
        snprintf(out->build_id + i * 2, 3, "%02x", buf[p + i]);
      break;
    }
    if (align4(descsz) > len - p) break;
    p += align4(descsz);
  }
  free(buf);
}

int pp_elf_facts_fd(int fd, struct pp_elf_facts *out) {
  memset(out, 0, sizeof(*out));
  struct stat st;
  if (fstat(fd, &st) != 0) return -errno;
  struct elf_reader r = {.fd = fd, .size = st.st_size};
  unsigned char ident[EI_NIDENT];
  if (!read_at(&r, 0, ident, sizeof(ident)) || memcmp(ident, ELFMAG, SELFMAG) != 0) return -ENOEXEC;
  if (ident[EI_CLASS] != ELFCLASS32 && ident[EI_CLASS] != ELFCLASS64) return -ENOEXEC;
  if (ident[EI_DATA] != ELFDATA2LSB && ident[EI_DATA] != ELFDATA2MSB) return -ENOEXEC;
  r.swap = (ident[EI_DATA] == ELFDATA2LSB) != host_is_le();
  out->elf_class = ident[EI_CLASS];
  uint64_t phoff;
  unsigned phnum, phentsize;
  if (out->elf_class == ELFCLASS64) {
    Elf64_Ehdr eh;
    if (!read_at(&r, 0, &eh, sizeof(eh))) return -ENOEXEC;
    out->machine = rd16(&r, eh.e_machine);
    phoff = rd64(&r, eh.e_phoff);
    phnum = rd16(&r, eh.e_phnum);
    phentsize = rd16(&r, eh.e_phentsize);
    if (phnum && phentsize != sizeof(Elf64_Phdr)) return 0;
  } else {
    Elf32_Ehdr eh;
    if (!read_at(&r, 0, &eh, sizeof(eh))) return -ENOEXEC;
    out->machine = rd16(&r, eh.e_machine);
    phoff = rd32(&r, eh.e_phoff);
    phnum = rd16(&r, eh.e_phnum);
    phentsize = rd16(&r, eh.e_phentsize);
    if (phnum && phentsize != sizeof(Elf32_Phdr)) return 0;
  }
  if (phnum > MAX_PHDRS) phnum = MAX_PHDRS;
  for (unsigned i = 0; i < phnum; i++) {
    uint32_t type;
    uint64_t off, filesz;
    if (out->elf_class == ELFCLASS64) {
      Elf64_Phdr ph;
      if (!read_at(&r, phoff + (uint64_t)i * sizeof(ph), &ph, sizeof(ph))) break;
      type = rd32(&r, ph.p_type);
      off = rd64(&r, ph.p_offset);
      filesz = rd64(&r, ph.p_filesz);
    } else {
      Elf32_Phdr ph;
      if (!read_at(&r, phoff + (uint64_t)i * sizeof(ph), &ph, sizeof(ph))) break;
      type = rd32(&r, ph.p_type);
      off = rd32(&r, ph.p_offset);
      filesz = rd32(&r, ph.p_filesz);
    }
    if (type == PT_INTERP && !out->dynamic) {
      out->dynamic = true;
      size_t n = filesz < sizeof(out->interp) - 1 ? (size_t)filesz : sizeof(out->interp) - 1;
      if (read_at(&r, off, out->interp, n))
        out->interp[n] = '\0';
      else
        out->interp[0] = '\0';
    } else if (type == PT_NOTE && !out->build_id[0]) {
      scan_notes(&r, off, filesz, out);
    }
  }
  return 0;
}

const char *pp_elf_machine_name(unsigned machine) {
  switch (machine) {
    case EM_X86_64:
      return "x86_64";
    case EM_AARCH64:
      return "aarch64";
    case EM_386:
      return "i386";
    case EM_ARM:
      return "arm";
    case EM_PPC64:
      return "ppc64le";
    case EM_S390:
      return "s390x";
    case EM_RISCV:
      return "riscv64";
    default:
      return NULL;
  }
}

/* ---- AT_EXECFN ---- */

/* Read a NUL-terminated string from another process. The read is split at
 * page boundaries so a string near the end of a mapping is not lost to an
 * EFAULT on the following page. */
static int read_remote_string(uint32_t pid, uint64_t addr, char *buf, size_t len) {
  if (len < 2 || addr == 0) return -EINVAL;
  long page = sysconf(_SC_PAGESIZE);
  if (page <= 0) page = 4096;
  struct iovec remote[4], local = {.iov_base = buf, .iov_len = len - 1};
  size_t n = 0, want = len - 1;
  uint64_t a = addr;
  while (want && n < 4) {
    size_t chunk = (size_t)((uint64_t)page - (a % (uint64_t)page));
    if (chunk > want) chunk = want;
    remote[n].iov_base = (void *)(uintptr_t)a;
    remote[n].iov_len = chunk;
    n++;
    a += chunk;
    want -= chunk;
  }
  local.iov_len = len - 1 - want;
  ssize_t got = process_vm_readv((pid_t)pid, &local, 1, remote, n, 0);
  if (got <= 0) return got == 0 ? -EFAULT : -errno;
  if (!memchr(buf, '\0', (size_t)got)) return -ENAMETOOLONG;
  return buf[0] ? 0 : -ENOENT;
}

int pp_proc_execfn(uint32_t pid, int elf_class, char *buf, size_t len) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/auxv", pid);
  unsigned char auxv[MAX_AUXV_BYTES];
  size_t n = 0;
  int rc = pp_read_file(path, (char *)auxv, sizeof(auxv), &n);
  if (rc) return rc;
  uint64_t execfn = 0;
  size_t word = elf_class == ELFCLASS32 ? 4 : 8;
  for (size_t off = 0; off + 2 * word <= n; off += 2 * word) {
    uint64_t type = 0, val = 0;
    if (word == 8) {
      memcpy(&type, auxv + off, 8);
      memcpy(&val, auxv + off + 8, 8);
    } else {
      uint32_t t32, v32;
      memcpy(&t32, auxv + off, 4);
      memcpy(&v32, auxv + off + 4, 4);
      type = t32;
      val = v32;
    }
    if (type == AT_NULL) break;
    if (type == AT_EXECFN) {
      execfn = val;
      break;
    }
  }
  if (!execfn) return -ENOENT;
  return read_remote_string(pid, execfn, buf, len);
}

/* ---- mapped runtime libraries ---- */

/* First mapped file whose path contains `needle` (e.g. "/libpython"). */
static bool find_mapped(uint32_t pid, const char *needle, char *out, size_t len) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/maps", pid);
  FILE *f = fopen(path, "re");
  if (!f) return false;
  char *line = NULL;
  size_t cap = 0;
  bool found = false;
  for (int lines = 0; !found && lines < MAX_MAPS_LINES && getline(&line, &cap, f) > 0; lines++) {
    char *p = strchr(line, '/');
    if (!p || !strstr(p, needle)) continue;
    p[strcspn(p, "\n")] = '\0';
    char *del = strstr(p, " (deleted)");
    if (del) *del = '\0';
    if (strlen(p) < len) {
      memcpy(out, p, strlen(p) + 1);
      found = true;
    }
  }
  free(line);
  fclose(f);
  return found;
}

/* "buildid:<hex>" of a file, or JSON null. */
static json_t *elfid_of(const char *path) {
  int fd = pp_open_regular(path);
  if (fd < 0) return json_null();
  struct pp_elf_facts ef;
  int rc = pp_elf_facts_fd(fd, &ef);
  close(fd);
  if (rc || !ef.build_id[0]) return json_null();
  char text[160];
  snprintf(text, sizeof(text), "buildid:%s", ef.build_id);
  return json_string(text);
}

static json_t *mapped_elfid(uint32_t pid, const char *needle) {
  /* the path in the maps is the process's view, and the process controls
   * it (a link, a FIFO, a device or a mount of a host file can be put
   * there after it mapped the library): the kit opens the very file it
   * maps (identity-checked, else the mapping's own file) or nothing */
  char pattern[64];
  snprintf(pattern, sizeof(pattern), "%s*", needle[0] == '/' ? needle + 1 : needle);
  struct pp_module *m = malloc(sizeof(*m)); /* large (PATH_MAX) */
  if (!m) return json_null();
  struct pp_elf_facts ef;
  int rc = pp_find_module(pid, pattern, m, NULL, 0);
  if (rc == 0) {
    rc = pp_elf_facts_fd(m->fd, &ef);
    pp_module_close(m);
  }
  free(m);
  if (rc || !ef.build_id[0]) return json_null();
  char text[160];
  snprintf(text, sizeof(text), "buildid:%s", ef.build_id);
  return json_string(text);
}

/* "Python X.Y" from the interpreter's name (python3.11, libpython3.11.so). */
static json_t *python_version_from_names(uint32_t pid, const char *exe) {
  char lib[PATH_MAX];
  const char *cands[2] = {exe, NULL};
  if (find_mapped(pid, "/libpython", lib, sizeof(lib))) cands[1] = lib;
  for (int i = 1; i >= 0; i--) {
    if (!cands[i]) continue;
    const char *b = strrchr(cands[i], '/');
    b = b ? b + 1 : cands[i];
    const char *v = strncmp(b, "libpython", 9) == 0 ? b + 9
                    : strncmp(b, "python", 6) == 0  ? b + 6
                                                    : NULL;
    unsigned major, minor;
    int used = 0;
    if (v && sscanf(v, "%u.%u%n", &major, &minor, &used) == 2 && used > 0 && major >= 2 &&
        major <= 9 && minor < 100) {
      char text[32];
      snprintf(text, sizeof(text), "Python %u.%u", major, minor);
      return json_string(text);
    }
  }
  return json_null();
}

static void set_new(json_t *o, const char *k, json_t *v) {
  if (v) json_object_set_new(o, k, v);
}

json_t *pp_app_metadata_collect(uint32_t pid, enum pp_runtime rt, const char *exe,
                                bool force_base) {
  if (pid == 0) return NULL;
  if (!force_base && (rt == PP_RT_UNKNOWN || rt == PP_RT_PHP)) return NULL;
  char exe_buf[PATH_MAX];
  int exe_rc = 0;
  if (!exe) {
    exe_rc = pp_proc_exe(pid, exe_buf, sizeof(exe_buf));
    if (exe_rc == -ESRCH || exe_rc == -ENOENT) {
      /* gone, or a kernel thread: nothing to describe */
      char comm[32];
      if (pp_proc_comm(pid, comm, sizeof(comm)) != 0) return NULL;
    }
    exe = exe_rc == 0 ? exe_buf : NULL;
  }
  char proc_exe[64];
  snprintf(proc_exe, sizeof(proc_exe), "/proc/%u/exe", pid);
  struct pp_elf_facts ef;
  int fd = pp_open_regular(proc_exe);
  int ef_rc = fd < 0 ? fd : pp_elf_facts_fd(fd, &ef);
  if (fd >= 0) close(fd);

  json_t *md = json_object();
  if (!md) return NULL;
  switch (rt) {
    case PP_RT_PYTHON:
      set_new(md, "python_version", python_version_from_names(pid, exe));
      set_new(md, "exe_elfid", elfid_of(proc_exe));
      set_new(md, "libpython_elfid", mapped_elfid(pid, "/libpython"));
      set_new(md, "sys_maxunicode", json_null());
      break;
    case PP_RT_JAVA:
      set_new(md, "libjvm_elfid", mapped_elfid(pid, "/libjvm"));
      break;
    case PP_RT_RUBY:
      set_new(md, "exe_elfid", elfid_of(proc_exe));
      set_new(md, "libruby_elfid", mapped_elfid(pid, "/libruby"));
      break;
    case PP_RT_NODE:
      if (ef_rc == 0) {
        set_new(md, "link", json_string(ef.dynamic ? "dynamic" : "static"));
        const char *libc = !ef.dynamic                     ? NULL
                           : strstr(ef.interp, "ld-musl")  ? "musl"
                           : strstr(ef.interp, "ld-linux") ? "glibc"
                                                           : NULL;
        set_new(md, "libc", libc ? json_string(libc) : json_null());
      }
      break;
    default:
      break;
  }
  /* errors become "error: <what>" strings, as gProfiler's do */
  set_new(md, "exe",
          exe ? pp_json_string_lossy(exe, strlen(exe))
              : json_string(exe_rc == -EACCES || exe_rc == -EPERM ? "error: PermissionError"
                                                                  : "error: OSError"));
  char execfn[PATH_MAX];
  int xrc = ef_rc == 0 ? pp_proc_execfn(pid, ef.elf_class, execfn, sizeof(execfn)) : ef_rc;
  if (xrc == 0)
    set_new(md, "execfn", pp_json_string_lossy(execfn, strlen(execfn)));
  else
    set_new(
        md, "execfn",
        json_string(xrc == -EPERM || xrc == -EACCES ? "error: PermissionError" : "error: OSError"));
  const char *arch = ef_rc == 0 ? pp_elf_machine_name(ef.machine) : NULL;
  char unknown_arch[48];
  if (ef_rc == 0 && !arch) {
    snprintf(unknown_arch, sizeof(unknown_arch), "error: unknown e_machine %u", ef.machine);
    arch = unknown_arch;
  }
  set_new(md, "arch",
          json_string(arch                                  ? arch
                      : ef_rc == -EACCES || ef_rc == -EPERM ? "error: PermissionError"
                                                            : "error: OSError"));
  return md;
}

json_t *pp_app_metadata_merge(const json_t *core, const char *plugin_json) {
  json_t *plugin = NULL;
  if (plugin_json && *plugin_json) {
    json_error_t err;
    plugin = json_loads(plugin_json, JSON_REJECT_DUPLICATES, &err);
    if (plugin && !json_is_object(plugin)) {
      json_decref(plugin);
      plugin = NULL;
    }
  }
  if (!core && !plugin) return NULL;
  json_t *out = json_object();
  if (!out) {
    json_decref(plugin);
    return NULL;
  }
  /* runtime keys of the core first, the plugin's (which win) next, the
   * base keys last: the order gProfiler's dicts have */
  static const char *const base[] = {"exe", "execfn", "arch"};
  const char *k;
  json_t *v;
  if (core) {
    json_object_foreach((json_t *)core, k, v) {
      bool is_base = false;
      for (size_t i = 0; i < 3; i++)
        is_base |= strcmp(k, base[i]) == 0;
      if (!is_base) json_object_set(out, k, v);
    }
  }
  if (plugin) json_object_update(out, plugin);
  for (size_t i = 0; core && i < 3; i++) {
    json_t *bv = json_object_get(core, base[i]);
    if (bv && !json_object_get(out, base[i])) json_object_set(out, base[i], bv);
  }
  json_decref(plugin);
  if (json_object_size(out) == 0) {
    json_decref(out);
    return NULL;
  }
  return out;
}
