/*
 * Remote memory reads and runtime symbol lookup (see remote.h).
 */
#include "polyprof/kit/remote.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "polyprof/kit/proc.h"

#define PAGE 4096u

int pp_remote_read(pid_t pid, uint64_t addr, void *buf, size_t len) {
  if (len == 0) return 0;
  if (len > PP_REMOTE_MAX_READ || addr == 0 || addr + len < addr) return -EINVAL;
  struct iovec local = {.iov_base = buf, .iov_len = len};
  struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};
  ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
  if (n < 0) return -errno;
  return (size_t)n == len ? 0 : -EFAULT;
}

int pp_remote_readv(pid_t pid, const struct pp_remote_iov *iov, size_t n) {
  struct iovec local[64], remote[64];
  if (n > 64) return -EINVAL;
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    if (iov[i].len > PP_REMOTE_MAX_READ || iov[i].addr == 0) return -EINVAL;
    local[i] = (struct iovec){.iov_base = iov[i].buf, .iov_len = iov[i].len};
    remote[i] = (struct iovec){.iov_base = (void *)(uintptr_t)iov[i].addr, .iov_len = iov[i].len};
    total += iov[i].len;
  }
  ssize_t got = process_vm_readv(pid, local, (unsigned long)n, remote, (unsigned long)n, 0);
  if (got < 0) return -errno;
  return (size_t)got == total ? 0 : -EFAULT;
}

ssize_t pp_remote_read_str(pid_t pid, uint64_t addr, char *buf, size_t cap) {
  if (cap == 0) return -EINVAL;
  size_t at = 0;
  while (at + 1 < cap) {
    /* never cross a page boundary: the next page may be unmapped */
    uint64_t a = addr + at;
    size_t chunk = PAGE - (size_t)(a % PAGE);
    if (chunk > cap - 1 - at) chunk = cap - 1 - at;
    int rc = pp_remote_read(pid, a, buf + at, chunk);
    if (rc < 0) {
      buf[at] = '\0';
      return rc;
    }
    char *nul = memchr(buf + at, '\0', chunk);
    if (nul) return (ssize_t)(nul - buf);
    at += chunk;
  }
  buf[at] = '\0';
  return (ssize_t)at;
}

/* --- ELF ---------------------------------------------------------------- */

static int open_elf(const char *path, int *fd_out, Elf **elf_out) {
  if (elf_version(EV_CURRENT) == EV_NONE) return -ENOTSUP;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return -errno;
  Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
  if (!e || elf_kind(e) != ELF_K_ELF) {
    if (e) elf_end(e);
    close(fd);
    return -ENOEXEC;
  }
  *fd_out = fd;
  *elf_out = e;
  return 0;
}

static void close_elf(int fd, Elf *e) {
  elf_end(e);
  close(fd);
}

/* Lowest PT_LOAD's page-aligned vaddr and file offset: the bias is where the
 * mapping of that offset starts minus this vaddr. */
static int first_load(Elf *e, uint64_t *vaddr, uint64_t *offset, int *is_dyn) {
  GElf_Ehdr eh;
  if (!gelf_getehdr(e, &eh)) return -ENOEXEC;
  *is_dyn = eh.e_type == ET_DYN;
  size_t n;
  if (elf_getphdrnum(e, &n) != 0) return -ENOEXEC;
  for (size_t i = 0; i < n; i++) {
    GElf_Phdr ph;
    if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD) continue;
    uint64_t align = ph.p_align > PAGE ? ph.p_align : PAGE;
    *vaddr = ph.p_vaddr & ~(align - 1);
    *offset = ph.p_offset & ~(align - 1);
    return 0;
  }
  return -ENOEXEC;
}

int pp_elf_lookup_symbols(const char *path, const char *const *names, uint64_t *values,
                          uint64_t *sizes, size_t n) {
  int fd;
  Elf *e;
  int rc = open_elf(path, &fd, &e);
  if (rc < 0) return rc;
  for (size_t i = 0; i < n; i++) {
    values[i] = 0;
    if (sizes) sizes[i] = 0;
  }
  int found = 0;
  /* .symtab first (complete when not stripped), then .dynsym */
  for (int pass = 0; pass < 2 && found < (int)n; pass++) {
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(e, scn))) {
      GElf_Shdr sh;
      if (!gelf_getshdr(scn, &sh)) continue;
      if (sh.sh_type != (pass == 0 ? SHT_SYMTAB : SHT_DYNSYM) || sh.sh_entsize == 0) continue;
      Elf_Data *d = elf_getdata(scn, NULL);
      if (!d) continue;
      size_t count = sh.sh_size / sh.sh_entsize;
      for (size_t k = 0; k < count; k++) {
        GElf_Sym sym;
        if (!gelf_getsym(d, (int)k, &sym) || sym.st_value == 0 || sym.st_shndx == SHN_UNDEF)
          continue;
        const char *nm = elf_strptr(e, sh.sh_link, sym.st_name);
        if (!nm) continue;
        for (size_t i = 0; i < n; i++) {
          if (values[i] || strcmp(nm, names[i]) != 0) continue;
          values[i] = sym.st_value;
          if (sizes) sizes[i] = sym.st_size;
          found++;
        }
      }
    }
  }
  close_elf(fd, e);
  return found;
}

int pp_elf_find_section(const char *path, const char *name, uint64_t *vaddr, uint64_t *size) {
  int fd;
  Elf *e;
  int rc = open_elf(path, &fd, &e);
  if (rc < 0) return rc;
  size_t shstrndx;
  rc = -ENOENT;
  if (elf_getshdrstrndx(e, &shstrndx) == 0) {
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(e, scn))) {
      GElf_Shdr sh;
      if (!gelf_getshdr(scn, &sh)) continue;
      const char *nm = elf_strptr(e, shstrndx, sh.sh_name);
      if (nm && strcmp(nm, name) == 0) {
        *vaddr = sh.sh_addr;
        *size = sh.sh_size;
        rc = 0;
        break;
      }
    }
  }
  close_elf(fd, e);
  return rc;
}

/* --- modules ------------------------------------------------------------ */

int pp_find_module(uint32_t pid, const char *pattern, struct pp_module *m) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/maps", pid);
  FILE *f = fopen(path, "re");
  if (!f) return errno == ENOENT ? -ESRCH : -errno;
  char exe[PATH_MAX] = "";
  pp_proc_exe(pid, exe, sizeof(exe));
  memset(m, 0, sizeof(*m));
  char line[PATH_MAX + 128];
  uint64_t off0_start = 0, off0_end = 0;
  int have = 0;
  while (fgets(line, sizeof(line), f)) {
    unsigned long long start, end, offset;
    char perms[8];
    int pathpos = 0;
    if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &offset, &pathpos) < 4 ||
        pathpos == 0)
      continue;
    char *p = line + pathpos;
    p[strcspn(p, "\n")] = '\0';
    if (p[0] != '/') continue;
    const char *base = strrchr(p, '/') + 1;
    if (have) {
      if (strcmp(p, m->path) != 0) continue;
    } else {
      if (fnmatch(pattern, base, 0) != 0) continue;
      snprintf(m->path, sizeof(m->path), "%s", p);
      m->start = start;
      have = 1;
    }
    if (start < m->start) m->start = start;
    if (end > m->end) m->end = end;
    if (offset == 0 && !off0_start) {
      off0_start = start;
      off0_end = end;
    }
  }
  fclose(f);
  if (!have) return -ENOENT;

  static const char deleted[] = " (deleted)";
  size_t pl = strlen(m->path);
  char clean[PATH_MAX];
  snprintf(clean, sizeof(clean), "%s", m->path);
  if (pl > sizeof(deleted) - 1 && strcmp(clean + pl - (sizeof(deleted) - 1), deleted) == 0)
    clean[pl - (sizeof(deleted) - 1)] = '\0';
  m->is_exe = strcmp(clean, exe) == 0 || strcmp(m->path, exe) == 0;
  /* through the target's root so containers and private mounts work */
  snprintf(m->open_path, sizeof(m->open_path), "/proc/%u/root%s", pid, clean);
  if (access(m->open_path, R_OK) != 0) {
    /* a deleted or hidden file is still reachable through map_files */
    snprintf(m->open_path, sizeof(m->open_path), "/proc/%u/map_files/%llx-%llx", pid,
             (unsigned long long)off0_start, (unsigned long long)off0_end);
  }
  int fd;
  Elf *e;
  int rc = open_elf(m->open_path, &fd, &e);
  if (rc < 0) return rc;
  uint64_t vaddr = 0, offset = 0;
  int is_dyn = 0;
  rc = first_load(e, &vaddr, &offset, &is_dyn);
  close_elf(fd, e);
  if (rc < 0) return rc;
  if (!is_dyn)
    m->bias = 0; /* ET_EXEC is mapped where it says */
  else
    m->bias = (off0_start ? off0_start : m->start) - vaddr;
  return 0;
}
