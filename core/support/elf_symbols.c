/*
 * ELF symbols, build-ids, debuglinks and Go versions through libelf. See
 * elf_symbols.h.
 */
#include "support/elf_symbols.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct esym {
  uint64_t addr;
  uint32_t size; /* 0: up to the next symbol; clamped to 4 GiB */
  uint32_t name; /* offset into blob */
};

struct pp_elf_symtab {
  struct esym *s;
  size_t n;
  char *blob;
  size_t blob_len;
};

static pthread_once_t elf_once = PTHREAD_ONCE_INIT;
static void elf_init_once(void) {
  elf_version(EV_CURRENT);
}

/* ---- symbol table ---- */

struct cand {
  uint64_t addr, size;
  const char *name;
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

/* Collects function symbols of one symbol section into cands. */
static int collect(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh, struct cand **cands, size_t *n,
                   size_t *cap) {
  Elf_Data *data = elf_getdata(scn, NULL);
  if (!data || !sh->sh_entsize) return 0;
  size_t count = data->d_size / sizeof(Elf64_Sym);
  if (gelf_getclass(elf) == ELFCLASS32) count = data->d_size / sizeof(Elf32_Sym);
  /* executable sections, for assembler labels (STT_NOTYPE) such as
   * ld.so's _dl_start_user, which perf also shows */
  unsigned char exec_scn[1024] = {0};
  size_t nscn = 0;
  if (elf_getshdrnum(elf, &nscn) != 0) nscn = 0;
  for (size_t k = 1; k < nscn && k < 8 * sizeof(exec_scn); k++) {
    GElf_Shdr xs;
    Elf_Scn *x = elf_getscn(elf, k);
    if (x && gelf_getshdr(x, &xs) && (xs.sh_flags & SHF_EXECINSTR))
      exec_scn[k / 8] |= (unsigned char)(1u << (k % 8));
  }
  for (size_t i = 0; i < count; i++) {
    GElf_Sym sym;
    if (!gelf_getsym(data, (int)i, &sym)) break;
    int type = GELF_ST_TYPE(sym.st_info);
    if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0) continue;
    if (type == STT_NOTYPE) {
      int vis = GELF_ST_VISIBILITY(sym.st_other);
      size_t k = sym.st_shndx;
      if (k >= SHN_LORESERVE || k >= 8 * sizeof(exec_scn) || !(exec_scn[k / 8] & (1u << (k % 8))) ||
          vis == STV_HIDDEN || vis == STV_INTERNAL)
        continue;
    } else if (type != STT_FUNC && type != STT_GNU_IFUNC) {
      continue;
    }
    const char *name = elf_strptr(elf, sh->sh_link, sym.st_name);
    if (!name || !*name) continue;
    if (*n == *cap) {
      size_t ncap = *cap ? *cap * 2 : 1024;
      struct cand *g = realloc(*cands, ncap * sizeof(*g));
      if (!g) return -ENOMEM;
      *cands = g;
      *cap = ncap;
    }
    (*cands)[(*n)++] = (struct cand){
        .addr = sym.st_value, .size = sym.st_size, .name = name, .score = sym_score(&sym, name)};
  }
  return 0;
}

static int build_symtab(struct cand *c, size_t n, struct pp_elf_symtab **out) {
  qsort(c, n, sizeof(*c), cmp_cand);
  struct pp_elf_symtab *t = calloc(1, sizeof(*t));
  if (!t) return -ENOMEM;
  size_t blob = 0, kept = 0;
  for (size_t i = 0; i < n; i++) {
    if (i > 0 && c[i].addr == c[i - 1].addr) continue;
    blob += strlen(c[i].name) + 1;
    kept++;
  }
  t->s = malloc((kept ? kept : 1) * sizeof(*t->s));
  t->blob = malloc(blob ? blob : 1);
  if (!t->s || !t->blob) {
    pp_elf_symtab_free(t);
    return -ENOMEM;
  }
  for (size_t i = 0; i < n; i++) {
    if (i > 0 && c[i].addr == c[i - 1].addr) continue;
    size_t l = strlen(c[i].name);
    memcpy(t->blob + t->blob_len, c[i].name, l + 1);
    t->s[t->n++] = (struct esym){.addr = c[i].addr,
                                 .size = c[i].size > UINT32_MAX ? UINT32_MAX : (uint32_t)c[i].size,
                                 .name = (uint32_t)t->blob_len};
    t->blob_len += l + 1;
  }
  *out = t;
  return 0;
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

static int load_elf(Elf *elf, unsigned flags, struct pp_elf_info *info,
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
  struct cand *c = NULL;
  size_t n = 0, cap = 0;
  int rc = 0;
  if ((flags & PP_ELF_WANT_SYMTAB) && symtab_scn)
    rc = collect(elf, symtab_scn, &symtab_sh, &c, &n, &cap);
  /* a .symtab without functions (strip --strip-debug leftovers) does not count */
  if ((flags & PP_ELF_WANT_SYMTAB) && n == 0) info->has_symtab = 0;
  if (rc == 0 && n == 0 && (flags & PP_ELF_WANT_DYNSYM) && dynsym_scn)
    rc = collect(elf, dynsym_scn, &dynsym_sh, &c, &n, &cap);
  if (rc == 0 && n > 0) rc = build_symtab(c, n, symtab);
  free(c);
  return rc;
}

int pp_elf_load(int fd, unsigned flags, struct pp_elf_info *info, struct pp_elf_symtab **symtab) {
  pthread_once(&elf_once, elf_init_once);
  Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
  if (!elf) return -ENOEXEC;
  int rc = load_elf(elf, flags, info, symtab);
  elf_end(elf);
  return rc;
}

int pp_elf_load_memory(const void *image, size_t size, unsigned flags, struct pp_elf_info *info,
                       struct pp_elf_symtab **symtab) {
  pthread_once(&elf_once, elf_init_once);
  /* elf_memory wants a writable pointer but ELF_C_READ never writes */
  Elf *elf = elf_memory((char *)(uintptr_t)image, size);
  if (!elf) return -ENOEXEC;
  int rc = load_elf(elf, flags, info, symtab);
  elf_end(elf);
  return rc;
}

void pp_elf_symtab_free(struct pp_elf_symtab *t) {
  if (!t) return;
  free(t->s);
  free(t->blob);
  free(t);
}

const char *pp_elf_symtab_lookup(const struct pp_elf_symtab *t, uint64_t vaddr, uint64_t *start) {
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
  if (start) *start = s->addr;
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
