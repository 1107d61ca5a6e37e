/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ELF symbols, build-ids, debuglinks and Go versions through libelf. See
 * elf_symbols.h.
 */
#include "polyprof/kit/elf_symbols.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "polyprof/kit/target_files.h"

struct esym {
  uint64_t addr;
  uint32_t size; /* 0: up to the next symbol; clamped to 4 GiB */
  uint32_t name; /* offset into blob, or into the file's string section */
};

/* Names are the bulk of a symbol table (a C++ library: ~60 bytes of name
 * per 16-byte entry). With PP_ELF_NAMES_IN_FILE they stay in the file and
 * are read when a symbol is looked up (once per new frame per session):
 * the table keeps a descriptor of the file and where its string section
 * is, not the strings. */
struct pp_elf_symtab {
  struct esym *s;
  size_t n;
  char *blob; /* names, when not read from the file */
  size_t blob_len;
  int fd;                     /* >= 0: names are read from this file */
  uint64_t str_off, str_size; /* the string section in it */
};

static pthread_once_t elf_once = PTHREAD_ONCE_INIT;
static void elf_init_once(void) {
  elf_version(EV_CURRENT);
}

/* ---- symbol table ---- */

struct cand {
  uint64_t addr, size;
  const char *name;
  uint32_t name_off; /* in the string section */
  int score;
};

/* Among aliases at one address keep what perf would show: a sized symbol
 * over an unsized one, strong over weak, global over local, fewer leading
 * underscores. */
static int sym_score(const GElf_Sym *s, const char *name) {
  int score = 0;
  if (s->st_size) score += 64;
  if (GELF_ST_BIND(s->st_info) != STB_WEAK) score += 32;
  if (GELF_ST_BIND(s->st_info) == STB_GLOBAL) score += 16;
  int us = 0;
  while (name[us] == '_' && us < 3)
    us++;
  score += 4 * (3 - us);
  return score;
}

static int cmp_cand(const void *a, const void *b) {
  const struct cand *x = a, *y = b;
  if (x->addr != y->addr) return x->addr < y->addr ? -1 : 1;
  if (x->score != y->score) return x->score > y->score ? -1 : 1;
  return strcmp(x->name, y->name);
}

#define EXEC_SCN_BYTES 1024

/* Executable sections as a bitmap, for assembler labels (STT_NOTYPE) such
 * as ld.so's _dl_start_user, which perf also shows. */
static void exec_sections(Elf *elf, unsigned char exec_scn[EXEC_SCN_BYTES]) {
  memset(exec_scn, 0, EXEC_SCN_BYTES);
  size_t nscn = 0;
  if (elf_getshdrnum(elf, &nscn) != 0) nscn = 0;
  for (size_t k = 1; k < nscn && k < 8 * EXEC_SCN_BYTES; k++) {
    GElf_Shdr xs;
    Elf_Scn *x = elf_getscn(elf, k);
    if (x && gelf_getshdr(x, &xs) && (xs.sh_flags & SHF_EXECINSTR))
      exec_scn[k / 8] |= (unsigned char)(1u << (k % 8));
  }
}

/* Whether a symbol is code perf would name: functions, GNU ifuncs, and
 * visible labels in executable sections. */
static int is_code(unsigned char info, unsigned char other, size_t shndx, uint64_t value,
                   const unsigned char exec_scn[EXEC_SCN_BYTES]) {
  int type = GELF_ST_TYPE(info);
  if (shndx == SHN_UNDEF || value == 0) return 0;
  if (type == STT_NOTYPE) {
    int vis = GELF_ST_VISIBILITY(other);
    return shndx < SHN_LORESERVE && shndx < 8 * EXEC_SCN_BYTES &&
           (exec_scn[shndx / 8] & (1u << (shndx % 8))) && vis != STV_HIDDEN && vis != STV_INTERNAL;
  }
  return type == STT_FUNC || type == STT_GNU_IFUNC;
}

/* Collects function symbols of one symbol section into cands. */
static int collect(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh, struct cand **cands, size_t *n,
                   size_t *cap) {
  Elf_Data *data = elf_getdata(scn, NULL);
  if (!data || !sh->sh_entsize) return 0;
  size_t count = data->d_size / sizeof(Elf64_Sym);
  if (gelf_getclass(elf) == ELFCLASS32) count = data->d_size / sizeof(Elf32_Sym);
  unsigned char exec_scn[EXEC_SCN_BYTES];
  exec_sections(elf, exec_scn);
  for (size_t i = 0; i < count; i++) {
    GElf_Sym sym;
    if (!gelf_getsym(data, (int)i, &sym)) break;
    if (!is_code(sym.st_info, sym.st_other, sym.st_shndx, sym.st_value, exec_scn)) continue;
    const char *name = elf_strptr(elf, sh->sh_link, sym.st_name);
    if (!name || !*name) continue;
    if (*n == *cap) {
      size_t ncap = *cap ? *cap * 2 : 1024;
      struct cand *g = realloc(*cands, ncap * sizeof(*g));
      if (!g) return -ENOMEM;
      *cands = g;
      *cap = ncap;
    }
    (*cands)[(*n)++] = (struct cand){.addr = sym.st_value,
                                     .size = sym.st_size,
                                     .name = name,
                                     .name_off = sym.st_name,
                                     .score = sym_score(&sym, name)};
  }
  return 0;
}

/* The sorted table. file_fd >= 0: names stay in that file's string
 * section (at str_off, str_size bytes) and the table keeps a duplicate of
 * the descriptor; else they are copied into one blob. */
static int build_symtab(struct cand *c, size_t n, int file_fd, uint64_t str_off, uint64_t str_size,
                        struct pp_elf_symtab **out) {
  qsort(c, n, sizeof(*c), cmp_cand);
  struct pp_elf_symtab *t = calloc(1, sizeof(*t));
  if (!t) return -ENOMEM;
  t->fd = -1;
  size_t blob = 0, kept = 0;
  for (size_t i = 0; i < n; i++) {
    if (i > 0 && c[i].addr == c[i - 1].addr) continue;
    if (file_fd < 0) blob += strlen(c[i].name) + 1;
    kept++;
  }
  if (file_fd >= 0) {
    t->fd = fcntl(file_fd, F_DUPFD_CLOEXEC, 0);
    t->str_off = str_off;
    t->str_size = str_size;
  }
  t->s = malloc((kept ? kept : 1) * sizeof(*t->s));
  t->blob = file_fd < 0 ? malloc(blob ? blob : 1) : NULL;
  if (!t->s || (file_fd < 0 && !t->blob) || (file_fd >= 0 && t->fd < 0)) {
    pp_elf_symtab_free(t);
    return -ENOMEM;
  }
  for (size_t i = 0; i < n; i++) {
    if (i > 0 && c[i].addr == c[i - 1].addr) continue;
    uint32_t name = c[i].name_off;
    if (file_fd < 0) {
      size_t l = strlen(c[i].name);
      memcpy(t->blob + t->blob_len, c[i].name, l + 1);
      name = (uint32_t)t->blob_len;
      t->blob_len += l + 1;
    }
    t->s[t->n++] = (struct esym){.addr = c[i].addr,
                                 .size = c[i].size > UINT32_MAX ? UINT32_MAX : (uint32_t)c[i].size,
                                 .name = name};
  }
  *out = t;
  return 0;
}

/* ---- tables read from the file, names left there ---- */

/* A big binary's symbol section is read in chunks with pread, not through
 * libelf's mapping, and no name is touched while building: node's .symtab
 * is 2.6 MB and its names 7.5 MB, which would otherwise all be resident in
 * this process while the table is built (a peak that stays in VmHWM). The
 * entry's size field carries the alias score in its top bits until the
 * table is sorted. */
#define SYM_CHUNK 2048
#define SCORE_SHIFT 29
#define SIZE_MASK ((1u << SCORE_SHIFT) - 1) /* 512 MiB: larger sizes are clamped */

struct file_names {
  int fd;
  uint64_t off, size;
};

/* Up to cap-1 bytes of the name at off (NUL-terminated), "" if unreadable. */
static void peek_name(const struct file_names *f, uint32_t off, char *buf, size_t cap) {
  buf[0] = '\0';
  if (off >= f->size) return;
  size_t want = f->size - off < cap - 1 ? (size_t)(f->size - off) : cap - 1;
  ssize_t r = pread(f->fd, buf, want, (off_t)(f->off + off));
  buf[r > 0 ? (size_t)r : 0] = '\0';
}

static int underscores(const char *s) {
  int us = 0;
  while (s[us] == '_' && us < 3)
    us++;
  return us;
}

/* Address, then score; only aliases at one address with equal scores read
 * their names (a few per library), to prefer fewer leading underscores as
 * sym_score() does. */
static int cmp_file_sym(const void *a, const void *b, void *arg) {
  const struct esym *x = a, *y = b;
  if (x->addr != y->addr) return x->addr < y->addr ? -1 : 1;
  unsigned sx = x->size >> SCORE_SHIFT, sy = y->size >> SCORE_SHIFT;
  if (sx != sy) return sx > sy ? -1 : 1;
  if (x->name == y->name) return 0;
  char nx[128], ny[128];
  peek_name(arg, x->name, nx, sizeof(nx));
  peek_name(arg, y->name, ny, sizeof(ny));
  int ux = underscores(nx), uy = underscores(ny);
  if (ux != uy) return ux < uy ? -1 : 1;
  return strcmp(nx, ny);
}

static int pread_all(int fd, void *buf, size_t len, uint64_t off) {
  size_t got = 0;
  while (got < len) {
    ssize_t r = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -EIO;
    got += (size_t)r;
  }
  return 0;
}

/* The table of symbol section sh, straight from the file (ELF64 in this
 * machine's byte order). *out stays NULL if it has no code symbols. */
static int load_from_file(Elf *elf, int fd, const GElf_Shdr *sh, struct pp_elf_symtab **out) {
  GElf_Shdr ss;
  Elf_Scn *str = elf_getscn(elf, sh->sh_link);
  if (sh->sh_type == SHT_NOBITS || sh->sh_entsize != sizeof(Elf64_Sym) || !str ||
      !gelf_getshdr(str, &ss) || ss.sh_type != SHT_STRTAB || ss.sh_size == 0 ||
      ss.sh_size > UINT32_MAX)
    return 0;
  unsigned char exec_scn[EXEC_SCN_BYTES];
  exec_sections(elf, exec_scn);
  Elf64_Sym *chunk = malloc(SYM_CHUNK * sizeof(*chunk));
  if (!chunk) return -ENOMEM;
  struct esym *v = NULL;
  size_t n = 0, cap = 0, count = sh->sh_size / sizeof(Elf64_Sym);
  int rc = 0;
  for (size_t i = 0; i < count && rc == 0; i += SYM_CHUNK) {
    size_t k = count - i < SYM_CHUNK ? count - i : SYM_CHUNK;
    if (pread_all(fd, chunk, k * sizeof(*chunk), sh->sh_offset + i * sizeof(*chunk)) < 0)
      break; /* a truncated file: what was read is still a table */
    for (size_t j = 0; j < k; j++) {
      const Elf64_Sym *y = &chunk[j];
      if (!is_code(y->st_info, y->st_other, y->st_shndx, y->st_value, exec_scn)) continue;
      if (y->st_name == 0 || y->st_name >= ss.sh_size) continue; /* no name */
      if (n == cap) {
        size_t ncap = cap ? cap * 2 : 1024;
        struct esym *g = realloc(v, ncap * sizeof(*g));
        if (!g) {
          rc = -ENOMEM;
          break;
        }
        v = g;
        cap = ncap;
      }
      unsigned bind = GELF_ST_BIND(y->st_info);
      unsigned score =
          (y->st_size ? 4u : 0) | (bind != STB_WEAK ? 2u : 0) | (bind == STB_GLOBAL ? 1u : 0);
      uint32_t size = y->st_size > SIZE_MASK ? SIZE_MASK : (uint32_t)y->st_size;
      v[n++] = (struct esym){
          .addr = y->st_value, .size = size | (score << SCORE_SHIFT), .name = y->st_name};
    }
  }
  free(chunk);
  if (rc < 0 || n == 0) {
    free(v);
    return rc;
  }
  struct file_names names = {.fd = fd, .off = ss.sh_offset, .size = ss.sh_size};
  qsort_r(v, n, sizeof(*v), cmp_file_sym, &names);
  size_t kept = 0;
  for (size_t i = 0; i < n; i++) {
    if (kept > 0 && v[i].addr == v[kept - 1].addr) continue;
    v[kept] = v[i];
    v[kept++].size &= SIZE_MASK;
  }
  struct esym *g = realloc(v, kept * sizeof(*v));
  if (g) v = g;
  struct pp_elf_symtab *t = calloc(1, sizeof(*t));
  int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (!t || dfd < 0) {
    free(t);
    free(v);
    if (dfd >= 0) close(dfd);
    return -ENOMEM;
  }
  *t = (struct pp_elf_symtab){
      .s = v, .n = kept, .fd = dfd, .str_off = ss.sh_offset, .str_size = ss.sh_size};
  *out = t;
  return 0;
}

/* This machine reads the file's symbols as they are. */
static int native_elf64(Elf *elf) {
  const char *id = elf_getident(elf, NULL);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  const int data = ELFDATA2LSB;
#else
  const int data = ELFDATA2MSB;
#endif
  return id && id[EI_CLASS] == ELFCLASS64 && id[EI_DATA] == data;
}

/* ---- notes, debuglink, Go ---- */

static void read_build_id(Elf_Data *d, struct pp_elf_info *info) {
  size_t off = 0, name_off, desc_off;
  GElf_Nhdr nh;
  while (info->build_id_len == 0 && (off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
    if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && name_off + 4 <= d->d_size &&
        memcmp((const char *)d->d_buf + name_off, "GNU", 4) == 0 && nh.n_descsz > 0 &&
        nh.n_descsz <= PP_ELF_BUILD_ID_MAX && desc_off + nh.n_descsz <= d->d_size) {
      memcpy(info->build_id, (const char *)d->d_buf + desc_off, nh.n_descsz);
      info->build_id_len = (uint8_t)nh.n_descsz;
    }
  }
}

static void read_debuglink(Elf_Data *d, struct pp_elf_info *info) {
  const char *p = d->d_buf;
  size_t n = d->d_size;
  if (!p || n < 5) return;
  size_t l = strnlen(p, n);
  if (l == 0 || l >= n || l >= sizeof(info->debuglink)) return;
  /* name, NUL, padding to 4, then the CRC32 of the debug file */
  size_t crc_off = (l + 1 + 3) & ~(size_t)3;
  if (crc_off + 4 > n) return;
  if (memchr(p, '/', l)) return; /* a bare file name, never a path */
  memcpy(info->debuglink, p, l);
  info->debuglink[l] = '\0';
  memcpy(&info->debuglink_crc, p + crc_off, 4);
}

/* Copies len bytes at ELF virtual address vaddr out of the section holding
 * them (used for the pre-1.18 Go build info, which stores pointers). */
static int read_vaddr(Elf *elf, uint64_t vaddr, void *buf, size_t len) {
  Elf_Scn *scn = NULL;
  while ((scn = elf_nextscn(elf, scn))) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS || !(sh.sh_flags & SHF_ALLOC)) continue;
    if (vaddr < sh.sh_addr || vaddr - sh.sh_addr >= sh.sh_size) continue;
    Elf_Data *d = elf_getdata(scn, NULL);
    uint64_t off = vaddr - sh.sh_addr;
    if (!d || !d->d_buf || off > d->d_size || len > d->d_size - off) return -1;
    memcpy(buf, (const char *)d->d_buf + off, len);
    return 0;
  }
  return -1;
}

static uint64_t read_ptr(const unsigned char *p, int psize, int big_endian) {
  uint64_t v = 0;
  for (int i = 0; i < psize; i++) {
    int idx = big_endian ? i : psize - 1 - i;
    v = (v << 8) | p[idx];
  }
  return v;
}

static void set_go_version(struct pp_elf_info *info, const char *s, size_t n) {
  /* n >= 2 first: strncmp would read s[1] past a 1-byte string at the end
   * of the section */
  if (n < 2 || n >= sizeof(info->go_version) || s[0] != 'g' || s[1] != 'o') return;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e) return;
  memcpy(info->go_version, s, n);
  info->go_version[n] = '\0';
}

/* .go.buildinfo: 14-byte magic, pointer size, flags. Go >= 1.18 (flags bit
 * 1) stores the version inline as a varint-prefixed string at offset 32;
 * older releases store a pointer to a Go string header at offset 16. */
static void read_go_buildinfo(Elf *elf, Elf_Data *d, struct pp_elf_info *info) {
  const unsigned char *p = d->d_buf;
  size_t n = d->d_size;
  static const char magic[14] = "\xff Go buildinf:";
  if (!p || n < 32 || memcmp(p, magic, 14) != 0) return;
  int psize = p[14], flags = p[15];
  if (flags & 2) {
    uint64_t len = 0;
    size_t i = 32;
    for (int shift = 0; i < n && shift < 35; shift += 7) {
      unsigned char b = p[i++];
      len |= (uint64_t)(b & 0x7f) << shift;
      if (!(b & 0x80)) break;
    }
    if (len <= n - i) set_go_version(info, (const char *)p + i, (size_t)len);
    return;
  }
  if (psize != 4 && psize != 8) return;
  int be = (flags & 1) != 0;
  uint64_t hdr = read_ptr(p + 16, psize, be);
  unsigned char sh[16];
  if (read_vaddr(elf, hdr, sh, 2 * (size_t)psize) < 0) return;
  uint64_t sptr = read_ptr(sh, psize, be), slen = read_ptr(sh + psize, psize, be);
  char ver[32];
  if (slen == 0 || slen >= sizeof(ver)) return;
  if (read_vaddr(elf, sptr, ver, (size_t)slen) < 0) return;
  set_go_version(info, ver, (size_t)slen);
}

/* ---- main loader ---- */

static int load_elf(Elf *elf, int fd, unsigned flags, struct pp_elf_info *info,
                    struct pp_elf_symtab **symtab) {
  memset(info, 0, sizeof(*info));
  if (symtab) *symtab = NULL;
  if (elf_kind(elf) != ELF_K_ELF) return -ENOEXEC;
  GElf_Ehdr eh;
  if (!gelf_getehdr(elf, &eh)) return -ENOEXEC;
  info->type = eh.e_type;
  info->machine = eh.e_machine;

  size_t phnum = 0;
  if (elf_getphdrnum(elf, &phnum) != 0) phnum = 0;
  for (size_t i = 0; i < phnum && i < 4096; i++) {
    GElf_Phdr ph;
    if (!gelf_getphdr(elf, (int)i, &ph)) break;
    if (ph.p_type == PT_INTERP) info->has_interp = 1;
    if (ph.p_type == PT_LOAD && info->nloads < PP_ELF_MAX_LOADS)
      info->loads[info->nloads++] = (struct pp_elf_load){.vaddr = ph.p_vaddr,
                                                         .memsz = ph.p_memsz,
                                                         .offset = ph.p_offset,
                                                         .filesz = ph.p_filesz,
                                                         .flags = ph.p_flags};
    if (ph.p_type == PT_NOTE && info->build_id_len == 0 && ph.p_filesz < (1u << 20)) {
      Elf_Data *d = elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz, ELF_T_NHDR);
      if (d) read_build_id(d, info);
    }
  }

  size_t shstrndx;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0) shstrndx = 0;
  Elf_Scn *scn = NULL, *symtab_scn = NULL, *dynsym_scn = NULL;
  GElf_Shdr symtab_sh = {0}, dynsym_sh = {0};
  while ((scn = elf_nextscn(elf, scn))) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) continue;
    const char *name = shstrndx ? elf_strptr(elf, shstrndx, sh.sh_name) : NULL;
    if (sh.sh_type == SHT_SYMTAB) {
      symtab_scn = scn;
      symtab_sh = sh;
      info->has_symtab = sh.sh_size > 0;
    } else if (sh.sh_type == SHT_DYNSYM) {
      dynsym_scn = scn;
      dynsym_sh = sh;
      info->has_dynsym = sh.sh_size > 0;
    }
    if (!name) continue;
    if (sh.sh_type == SHT_NOTE && info->build_id_len == 0) {
      Elf_Data *d = elf_getdata(scn, NULL);
      if (d) read_build_id(d, info);
    } else if (strcmp(name, ".gnu_debuglink") == 0) {
      Elf_Data *d = elf_getdata(scn, NULL);
      if (d) read_debuglink(d, info);
    } else if (strcmp(name, ".eh_frame_hdr") == 0 && sh.sh_type != SHT_NOBITS) {
      info->eh_frame_hdr_vaddr = sh.sh_addr;
      info->eh_frame_hdr_offset = sh.sh_offset;
      info->eh_frame_hdr_size = sh.sh_size;
    } else if (strcmp(name, ".eh_frame") == 0 && sh.sh_type != SHT_NOBITS) {
      info->eh_frame_vaddr = sh.sh_addr;
      info->eh_frame_offset = sh.sh_offset;
      info->eh_frame_size = sh.sh_size;
    } else if (strcmp(name, ".debug_frame") == 0 && sh.sh_type != SHT_NOBITS) {
      info->debug_frame_offset = sh.sh_offset;
      info->debug_frame_size = sh.sh_size;
    } else if (strcmp(name, ".go.buildinfo") == 0) {
      info->is_go = 1;
      Elf_Data *d = elf_getdata(scn, NULL);
      if (d) read_go_buildinfo(elf, d, info);
    } else if (strcmp(name, ".note.go.buildid") == 0 || strcmp(name, ".gopclntab") == 0) {
      info->is_go = 1;
    }
  }

  if (!symtab || !(flags & (PP_ELF_WANT_SYMTAB | PP_ELF_WANT_DYNSYM))) return 0;
  if (fd >= 0 && (flags & PP_ELF_NAMES_IN_FILE) && native_elf64(elf)) {
    int rc = 0;
    if ((flags & PP_ELF_WANT_SYMTAB) && symtab_scn)
      rc = load_from_file(elf, fd, &symtab_sh, symtab);
    /* a .symtab without functions (strip --strip-debug leftovers) does not count */
    if ((flags & PP_ELF_WANT_SYMTAB) && !*symtab) info->has_symtab = 0;
    if (rc == 0 && !*symtab && (flags & PP_ELF_WANT_DYNSYM) && dynsym_scn)
      rc = load_from_file(elf, fd, &dynsym_sh, symtab);
    return rc;
  }
  struct cand *c = NULL;
  size_t n = 0, cap = 0;
  int rc = 0;
  const GElf_Shdr *used = NULL;
  if ((flags & PP_ELF_WANT_SYMTAB) && symtab_scn) {
    rc = collect(elf, symtab_scn, &symtab_sh, &c, &n, &cap);
    used = &symtab_sh;
  }
  /* a .symtab without functions (strip --strip-debug leftovers) does not count */
  if ((flags & PP_ELF_WANT_SYMTAB) && n == 0) info->has_symtab = 0;
  if (rc == 0 && n == 0 && (flags & PP_ELF_WANT_DYNSYM) && dynsym_scn) {
    rc = collect(elf, dynsym_scn, &dynsym_sh, &c, &n, &cap);
    used = &dynsym_sh;
  }
  if (rc == 0 && n > 0) {
    /* names stay in the file only if its string section is plainly there
     * (collect() read every name through libelf, which checked them) */
    uint64_t str_off = 0, str_size = 0;
    int file_fd = -1;
    GElf_Shdr ss;
    Elf_Scn *str = used ? elf_getscn(elf, used->sh_link) : NULL;
    if (fd >= 0 && (flags & PP_ELF_NAMES_IN_FILE) && str && gelf_getshdr(str, &ss) &&
        ss.sh_type == SHT_STRTAB && ss.sh_size > 0 && ss.sh_size <= UINT32_MAX) {
      file_fd = fd;
      str_off = ss.sh_offset;
      str_size = ss.sh_size;
    }
    rc = build_symtab(c, n, file_fd, str_off, str_size, symtab);
  }
  free(c);
  return rc;
}

int pp_elf_load(int fd, unsigned flags, struct pp_elf_info *info, struct pp_elf_symtab **symtab) {
  pthread_once(&elf_once, elf_init_once);
  Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
  if (!elf) return -ENOEXEC;
  int rc = load_elf(elf, fd, flags, info, symtab);
  elf_end(elf);
  return rc;
}

int pp_elf_load_memory(const void *image, size_t size, unsigned flags, struct pp_elf_info *info,
                       struct pp_elf_symtab **symtab) {
  pthread_once(&elf_once, elf_init_once);
  /* elf_memory wants a writable pointer but ELF_C_READ never writes */
  Elf *elf = elf_memory((char *)(uintptr_t)image, size);
  if (!elf) return -ENOEXEC;
  int rc = load_elf(elf, -1, flags, info, symtab);
  elf_end(elf);
  return rc;
}

void pp_elf_symtab_free(struct pp_elf_symtab *t) {
  if (!t) return;
  if (t->fd >= 0) close(t->fd);
  free(t->s);
  free(t->blob);
  free(t);
}

int pp_elf_symtab_has_file(const struct pp_elf_symtab *t) {
  return t && t->fd >= 0;
}

/* The name at off in the file's string section, into buf. The file is as
 * hostile as any: the name must end within the section (a longer one than
 * buf holds is cut). */
static const char *name_from_file(const struct pp_elf_symtab *t, uint32_t off, char *buf,
                                  size_t cap) {
  if (!buf || cap < 2 || off >= t->str_size) return NULL;
  uint64_t left = t->str_size - off;
  size_t want = left < cap - 1 ? (size_t)left : cap - 1;
  ssize_t r;
  do {
    r = pread(t->fd, buf, want, (off_t)(t->str_off + off));
  } while (r < 0 && errno == EINTR);
  if (r <= 0) return NULL;
  if (memchr(buf, '\0', (size_t)r)) return buf[0] ? buf : NULL;
  if ((uint64_t)r == left) return NULL; /* runs off the section: not a name */
  buf[r] = '\0';                        /* longer than buf: cut */
  return buf;
}

/* The symbol covering vaddr, or NULL. */
static const struct esym *find(const struct pp_elf_symtab *t, uint64_t vaddr) {
  if (!t || t->n == 0 || vaddr < t->s[0].addr) return NULL;
  size_t lo = 0, hi = t->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (t->s[mid].addr <= vaddr)
      lo = mid + 1;
    else
      hi = mid;
  }
  const struct esym *s = &t->s[lo - 1];
  if (s->size) {
    if (vaddr - s->addr >= s->size) return NULL;
  } else if (lo == t->n && vaddr - s->addr > (1u << 16)) {
    return NULL; /* unsized last symbol: do not stretch it over the world */
  }
  return s;
}

int pp_elf_symtab_find(const struct pp_elf_symtab *t, uint64_t vaddr, uint64_t *start) {
  const struct esym *s = find(t, vaddr);
  if (s && start) *start = s->addr;
  return s != NULL;
}

const char *pp_elf_symtab_lookup(const struct pp_elf_symtab *t, uint64_t vaddr, uint64_t *start,
                                 char *buf, size_t cap) {
  const struct esym *s = find(t, vaddr);
  if (!s) return NULL;
  if (start) *start = s->addr;
  if (t->fd >= 0) return name_from_file(t, s->name, buf, cap);
  return t->blob + s->name;
}

size_t pp_elf_symtab_count(const struct pp_elf_symtab *t) {
  return t ? t->n : 0;
}

size_t pp_elf_symtab_bytes(const struct pp_elf_symtab *t) {
  return t ? sizeof(*t) + t->n * sizeof(struct esym) + t->blob_len : 0;
}

int pp_elf_offset_to_vaddr(const struct pp_elf_info *info, uint64_t offset, uint64_t *vaddr) {
  for (unsigned i = 0; i < info->nloads; i++) {
    const struct pp_elf_load *l = &info->loads[i];
    /* mappings start page-aligned, so the page holding the segment start
     * also belongs to it */
    uint64_t pstart = l->offset & ~(uint64_t)0xfff;
    if (offset >= pstart && offset < l->offset + (l->filesz ? l->filesz : 1)) {
      *vaddr = l->vaddr - (l->offset - offset);
      return 0;
    }
  }
  return -ENOENT;
}

char *pp_elf_build_id_hex(const struct pp_elf_info *info, char *buf, size_t cap) {
  static const char hex[] = "0123456789abcdef";
  size_t j = 0;
  for (unsigned i = 0; i < info->build_id_len && j + 2 < cap; i++) {
    buf[j++] = hex[info->build_id[i] >> 4];
    buf[j++] = hex[info->build_id[i] & 15];
  }
  if (cap) buf[j < cap ? j : cap - 1] = '\0';
  return buf;
}

/* ---- separate debug files ---- */

static int try_file(const char *p, const struct pp_elf_info *want, int check_id, char *out,
                    size_t cap) {
  int fd = open(p, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -ENOENT;
  struct pp_elf_info di;
  int rc = pp_elf_load(fd, 0, &di, NULL);
  close(fd);
  if (rc < 0) return -ENOENT;
  if (check_id && want->build_id_len && di.build_id_len &&
      (di.build_id_len != want->build_id_len ||
       memcmp(di.build_id, want->build_id, di.build_id_len) != 0))
    return -ENOENT;
  if ((size_t)snprintf(out, cap, "%s", p) >= cap) return -ENOENT;
  return 0;
}

int pp_elf_find_debug_file(const char *root, const char *path, const struct pp_elf_info *info,
                           char *out, size_t cap) {
  const char *roots[2] = {root && *root ? root : "", ""};
  int nroots = (root && *root) ? 2 : 1;
  char p[4096], hex[2 * PP_ELF_BUILD_ID_MAX + 1];
  if (info->build_id_len >= 2) {
    pp_elf_build_id_hex(info, hex, sizeof(hex));
    for (int r = 0; r < nroots; r++) {
      if ((size_t)snprintf(p, sizeof(p), "%s/usr/lib/debug/.build-id/%.2s/%s.debug", roots[r], hex,
                           hex + 2) < sizeof(p) &&
          try_file(p, info, 0, out, cap) == 0)
        return 0;
    }
  }
  if (!info->debuglink[0] || !path || path[0] != '/') return -ENOENT;
  const char *slash = strrchr(path, '/');
  int dlen = (int)(slash - path); /* "" for objects in "/" */
  for (int r = 0; r < nroots; r++) {
    /* <dir>/<link>, <dir>/.debug/<link>, /usr/lib/debug<dir>/<link> */
    static const char *const pre[3] = {"", "", "/usr/lib/debug"};
    static const char *const mid[3] = {"/", "/.debug/", "/"};
    for (int i = 0; i < 3; i++) {
      if ((size_t)snprintf(p, sizeof(p), "%s%s%.*s%s%s", roots[r], pre[i], dlen, path, mid[i],
                           info->debuglink) >= sizeof(p))
        continue;
      /* the debuglink may name the object itself: that is not a debug file */
      if (i == 0 && strcmp(p + strlen(roots[r]), path) == 0) continue;
      if (try_file(p, info, 1, out, cap) == 0) return 0;
    }
  }
  return -ENOENT;
}

/* The object's build-id is what ties a debug file to it: a file in the
 * process's root need not be owned by the process (distributions install
 * debug files as root), so its owner proves nothing, but a debug file of
 * another build would name the wrong functions. */
static int debug_fd_matches(int fd, const struct pp_elf_info *want) {
  struct pp_elf_info di;
  if (pp_elf_load(fd, 0, &di, NULL) < 0) return 0;
  if (!want->build_id_len) return 1;
  return di.build_id_len == want->build_id_len &&
         memcmp(di.build_id, want->build_id, di.build_id_len) == 0;
}

static int open_in_target(uint32_t pid, const char *p, const struct pp_elf_info *want) {
  int fd = pp_target_open(pid, p, PP_TF_READABLE, NULL, NULL, NULL, 0);
  if (fd < 0) return -ENOENT;
  if (debug_fd_matches(fd, want)) return fd;
  close(fd);
  return -ENOENT;
}

/* A host candidate under /usr/lib/debug, a tree only the host's root
 * writes: a regular file, checked on an O_PATH handle before it is opened. */
static int open_on_host(const char *p, const struct pp_elf_info *want) {
  int pfd = open(p, O_PATH | O_CLOEXEC);
  if (pfd < 0) return -ENOENT;
  struct stat st;
  int fd = -ENOENT;
  if (fstat(pfd, &st) == 0 && S_ISREG(st.st_mode)) {
    char self[48];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
    fd = open(self, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0 && !debug_fd_matches(fd, want)) {
      close(fd);
      fd = -ENOENT;
    }
  }
  close(pfd);
  return fd < 0 ? -ENOENT : fd;
}

int pp_elf_open_debug_file(uint32_t pid, const char *path, const struct pp_elf_info *info) {
  char p[4096], hex[2 * PP_ELF_BUILD_ID_MAX + 1];
  int fd;
  if (info->build_id_len >= 2) {
    pp_elf_build_id_hex(info, hex, sizeof(hex));
    snprintf(p, sizeof(p), "/usr/lib/debug/.build-id/%.2s/%s.debug", hex, hex + 2);
    if ((fd = open_in_target(pid, p, info)) >= 0 || (fd = open_on_host(p, info)) >= 0) return fd;
  }
  /* the debuglink is a file name: one with a '/' could leave the folders */
  const char *link = info->debuglink;
  if (!link[0] || strchr(link, '/') || !strcmp(link, ".") || !strcmp(link, "..") || !path ||
      path[0] != '/' || strstr(path, "/../") || strstr(path, "/./"))
    return -ENOENT;
  const char *slash = strrchr(path, '/');
  int dlen = (int)(slash - path);
  static const char *const pre[3] = {"", "", "/usr/lib/debug"};
  static const char *const mid[3] = {"/", "/.debug/", "/"};
  for (int i = 0; i < 3; i++) {
    if ((size_t)snprintf(p, sizeof(p), "%s%.*s%s%s", pre[i], dlen, path, mid[i], link) >= sizeof(p))
      continue;
    /* the debuglink may name the object itself: that is not a debug file */
    if (i == 0 && strcmp(p, path) == 0) continue;
    if ((fd = open_in_target(pid, p, info)) >= 0) return fd;
  }
  if ((size_t)snprintf(p, sizeof(p), "/usr/lib/debug%.*s/%s", dlen, path, link) < sizeof(p) &&
      (fd = open_on_host(p, info)) >= 0)
    return fd;
  return -ENOENT;
}
