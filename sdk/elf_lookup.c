/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Symbol and section lookup in an ELF file. Exported names are answered
 * through the file's GNU hash table with a handful of small preads, instead
 * of walking every dynamic symbol of a mapped file: walking the 75,000
 * symbols of /usr/bin/node through mmap pulls its whole .dynsym and .dynstr
 * (~6 MiB) into the caller's resident set, and into its VmHWM for good.
 * Names the table does not have (static symbols, a file without the table)
 * fall back to a walk of .symtab and .dynsym through libelf.
 *
 * The file is untrusted: every offset and count is checked against the
 * file and section sizes before it is read.
 */
#include "polyprof/kit/elf_lookup.h"

#include <elf.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE 4096u

#define MAX_SECTIONS 4096
#define MAX_NAME 256

struct exports_file {
  int fd;
  uint64_t size;
};

static bool read_at(const struct exports_file *f, uint64_t off, void *buf, size_t len) {
  if (off > f->size || len > f->size - off) return false;
  size_t got = 0;
  while (got < len) {
    ssize_t r = pread(f->fd, (char *)buf + got, len - got, (off_t)(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += (size_t)r;
  }
  return true;
}

static bool section_ok(const struct exports_file *f, const Elf64_Shdr *s) {
  return s->sh_offset <= f->size && s->sh_size <= f->size - s->sh_offset;
}

static bool read_section(const struct exports_file *f, const Elf64_Ehdr *eh, uint32_t idx,
                         Elf64_Shdr *out) {
  if (idx == 0 || idx >= eh->e_shnum) return false;
  return read_at(f, eh->e_shoff + (uint64_t)idx * sizeof(*out), out, sizeof(*out)) &&
         section_ok(f, out);
}

static uint32_t gnu_hash(const char *s) {
  uint32_t h = 5381;
  for (; *s; s++)
    h = h * 33 + (unsigned char)*s;
  return h;
}

struct gnu_table {
  Elf64_Shdr hash, dynsym, dynstr;
  uint32_t nbuckets, symoffset, bloom_words;
  uint64_t buckets_off, chain_off; /* file offsets */
  uint64_t nsyms;
};

/* 1: defined in .dynsym (*out gets it), 0: not there, <0: the table is
 * unreadable. */
static int lookup(const struct exports_file *f, const struct gnu_table *t, const char *name,
                  Elf64_Sym *out) {
  uint32_t h = gnu_hash(name);
  uint32_t sym;
  if (!read_at(f, t->buckets_off + (uint64_t)(h % t->nbuckets) * 4, &sym, 4)) return -EINVAL;
  if (sym == 0) return 0;
  if (sym < t->symoffset) return -EINVAL;
  size_t want = strlen(name);
  /* a chain ends at a value with bit 0 set; also stop at the end of .dynsym
   * so a corrupt table cannot loop */
  for (; sym < t->nsyms; sym++) {
    uint32_t c;
    if (!read_at(f, t->chain_off + (uint64_t)(sym - t->symoffset) * 4, &c, 4)) return -EINVAL;
    if ((c | 1) == (h | 1)) {
      Elf64_Sym s;
      if (!read_at(f, t->dynsym.sh_offset + (uint64_t)sym * sizeof(s), &s, sizeof(s)))
        return -EINVAL;
      char got[MAX_NAME + 1];
      if (s.st_shndx != SHN_UNDEF && want <= MAX_NAME && s.st_name < t->dynstr.sh_size &&
          want + 1 <= t->dynstr.sh_size - s.st_name &&
          read_at(f, t->dynstr.sh_offset + s.st_name, got, want + 1) &&
          memcmp(got, name, want) == 0 && got[want] == '\0') {
        *out = s;
        return 1;
      }
    }
    if (c & 1) return 0;
  }
  return -EINVAL;
}

static int find_gnu_table(const struct exports_file *f, const Elf64_Ehdr *eh, struct gnu_table *t) {
  for (uint32_t i = 1; i < eh->e_shnum; i++) {
    if (!read_section(f, eh, i, &t->hash) || t->hash.sh_type != SHT_GNU_HASH) continue;
    if (!read_section(f, eh, t->hash.sh_link, &t->dynsym) || t->dynsym.sh_type != SHT_DYNSYM ||
        t->dynsym.sh_entsize != sizeof(Elf64_Sym))
      return -EINVAL;
    if (!read_section(f, eh, t->dynsym.sh_link, &t->dynstr) || t->dynstr.sh_type != SHT_STRTAB)
      return -EINVAL;
    uint32_t hdr[4];
    if (t->hash.sh_size < sizeof(hdr) || !read_at(f, t->hash.sh_offset, hdr, sizeof(hdr)))
      return -EINVAL;
    t->nbuckets = hdr[0];
    t->symoffset = hdr[1];
    t->bloom_words = hdr[2];
    t->nsyms = t->dynsym.sh_size / sizeof(Elf64_Sym);
    uint64_t fixed = sizeof(hdr) + (uint64_t)t->bloom_words * 8 + (uint64_t)t->nbuckets * 4;
    if (t->nbuckets == 0 || fixed > t->hash.sh_size || t->symoffset > t->nsyms) return -EINVAL;
    t->buckets_off = t->hash.sh_offset + sizeof(hdr) + (uint64_t)t->bloom_words * 8;
    t->chain_off = t->buckets_off + (uint64_t)t->nbuckets * 4;
    /* the chain array must cover every symbol from symoffset on */
    if ((t->nsyms - t->symoffset) * 4 > t->hash.sh_size - fixed) return -EINVAL;
    return 0;
  }
  return -ENOENT;
}

/* GNU hash pass: fills values/sizes of the names it finds. Returns how many
 * were found, -ENOTSUP (not 64-bit little-endian, or no table: walk
 * instead), -ENOEXEC or -EINVAL. */
static int gnu_hash_pass(int fd, const char *const *names, size_t n, uint64_t *values,
                         uint64_t *sizes) {
  struct stat st;
  if (fstat(fd, &st) < 0) return -errno;
  if (!S_ISREG(st.st_mode)) return -EINVAL;
  struct exports_file f = {fd, (uint64_t)st.st_size};
  Elf64_Ehdr eh;
  if (!read_at(&f, 0, &eh, sizeof(eh)) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return -ENOEXEC;
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
      eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum > MAX_SECTIONS)
    return -ENOTSUP;
  struct gnu_table t;
  int rc = find_gnu_table(&f, &eh, &t);
  if (rc < 0) return rc == -ENOENT ? -ENOTSUP : rc;
  int found = 0;
  for (size_t i = 0; i < n; i++) {
    Elf64_Sym s;
    rc = lookup(&f, &t, names[i], &s);
    if (rc < 0) return rc;
    if (rc && s.st_value) {
      values[i] = s.st_value;
      if (sizes) sizes[i] = s.st_size;
      found++;
    }
  }
  return found;
}

/* libelf on fd, refusing a file whose section headers lie past its end
 * (cut short: libelf would answer "no symbols", not "broken"). */
static int begin(int fd, Elf **out) {
  if (elf_version(EV_CURRENT) == EV_NONE) return -ENOTSUP;
  struct stat st;
  if (fstat(fd, &st) < 0) return -errno;
  Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
  if (!e || elf_kind(e) != ELF_K_ELF) {
    if (e) elf_end(e);
    return -ENOEXEC;
  }
  GElf_Ehdr eh;
  size_t nsec = 0;
  if (!gelf_getehdr(e, &eh) || elf_getshdrnum(e, &nsec) != 0 || eh.e_shoff > (uint64_t)st.st_size ||
      (uint64_t)nsec * eh.e_shentsize > (uint64_t)st.st_size - eh.e_shoff) {
    elf_end(e);
    return -EINVAL;
  }
  *out = e;
  return 0;
}

/* Walk pass for the names still at 0: .symtab (complete when the file is
 * not stripped) unless exported_only, then .dynsym. */
static int walk_pass(int fd, const char *const *names, size_t n, bool exported_only,
                     uint64_t *values, uint64_t *sizes, int found) {
  Elf *e;
  int rc = begin(fd, &e);
  if (rc < 0) return rc;
  for (int pass = exported_only ? 1 : 0; pass < 2 && found < (int)n; pass++) {
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(e, scn))) {
      GElf_Shdr sh;
      if (!gelf_getshdr(scn, &sh)) continue;
      if (sh.sh_type != (pass == 0 ? SHT_SYMTAB : SHT_DYNSYM) || sh.sh_entsize == 0) continue;
      Elf_Data *d = elf_getdata(scn, NULL);
      if (!d) continue;
      size_t count = sh.sh_size / sh.sh_entsize;
      for (size_t k = 0; k < count && found < (int)n; k++) {
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
  elf_end(e);
  return found;
}

int pp_elf_lookup_symbols(int fd, const char *const *names, size_t n, unsigned flags,
                          uint64_t *values, uint64_t *sizes) {
  for (size_t i = 0; i < n; i++) {
    values[i] = 0;
    if (sizes) sizes[i] = 0;
  }
  int found = gnu_hash_pass(fd, names, n, values, sizes);
  if (found == -ENOEXEC || found == -EINVAL) return found;
  if (found < 0) found = 0; /* no table: the walk answers alone */
  if (found == (int)n) return found;
  return walk_pass(fd, names, n, flags & PP_ELF_EXPORTED_ONLY, values, sizes, found);
}

int pp_elf_find_section(int fd, const char *name, uint64_t *vaddr, uint64_t *size) {
  Elf *e;
  int rc = begin(fd, &e);
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
  elf_end(e);
  return rc;
}

int pp_elf_load_bias(int fd, uint64_t map_start, uint64_t *bias) {
  Elf *e;
  int rc = begin(fd, &e);
  if (rc < 0) return rc;
  GElf_Ehdr eh;
  size_t n;
  rc = -ENOEXEC;
  if (gelf_getehdr(e, &eh) && elf_getphdrnum(e, &n) == 0) {
    for (size_t i = 0; i < n; i++) {
      GElf_Phdr ph;
      if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD) continue;
      /* the lowest PT_LOAD's page-aligned vaddr is what the mapping at
       * offset 0 starts with */
      uint64_t align = ph.p_align > PAGE ? ph.p_align : PAGE;
      *bias = eh.e_type == ET_DYN ? map_start - (ph.p_vaddr & ~(align - 1)) : 0;
      rc = 0;
      break;
    }
  }
  elf_end(e);
  return rc;
}
