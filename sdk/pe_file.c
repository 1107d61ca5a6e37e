/* SPDX-License-Identifier: Apache-2.0 */
/*
 * PE/COFF headers. See pe_file.h. Layout: the DOS header's e_lfanew (at
 * 0x3c) points at "PE\0\0", the 20-byte COFF header, the optional header
 * (PE32 or PE32+, whose data directories hold the CLI header's at index
 * 14) and the 40-byte section headers.
 */
#include "pe_file.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PE_HEADERS_MAX (64u << 10) /* e_lfanew plus headers: far more than any linker writes */
#define PE_DIR_CLI 14

int pe_fail(int rc, char *why, size_t cap, const char *fmt, ...) {
  if (why && cap) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
  }
  return rc;
}

int pe_pread_all(int fd, void *buf, size_t len, uint64_t off) {
  size_t got = 0;
  while (got < len) {
    ssize_t r = pread(fd, (uint8_t *)buf + got, len - got, (off_t)(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -EIO;
    got += (size_t)r;
  }
  return 0;
}

int pe_file_open(int fd, struct pe_file *pe, char *why, size_t why_cap) {
  memset(pe, 0, sizeof(*pe));
  pe->fd = fd;
  struct stat sb;
  if (fstat(fd, &sb) < 0) return -EIO;
  if (!S_ISREG(sb.st_mode)) return pe_fail(-ENOEXEC, why, why_cap, "not a regular file");
  pe->file_size = (uint64_t)sb.st_size;
  uint8_t dos[64];
  if (pe->file_size < sizeof(dos) || pe_pread_all(fd, dos, sizeof(dos), 0) < 0)
    return pe_fail(-ENOEXEC, why, why_cap, "shorter than a DOS header");
  if (dos[0] != 'M' || dos[1] != 'Z') return pe_fail(-ENOEXEC, why, why_cap, "no MZ signature");
  uint32_t lfanew = pe_u32(dos + 0x3c);
  if (lfanew < sizeof(dos) || lfanew > PE_HEADERS_MAX)
    return pe_fail(-ENOEXEC, why, why_cap, "PE header offset %u out of range", lfanew);
  uint8_t coff[24];
  if ((uint64_t)lfanew + sizeof(coff) > pe->file_size ||
      pe_pread_all(fd, coff, sizeof(coff), lfanew) < 0)
    return pe_fail(-ENOEXEC, why, why_cap, "file ends in the PE header");
  if (memcmp(coff, "PE\0\0", 4) != 0) return pe_fail(-ENOEXEC, why, why_cap, "no PE signature");
  pe->machine = pe_u16(coff + 4);
  unsigned nsec = pe_u16(coff + 6);
  unsigned optsz = pe_u16(coff + 20);
  if (nsec == 0 || nsec > PE_MAX_SECTIONS)
    return pe_fail(-ENOEXEC, why, why_cap, "%u sections (1..%u)", nsec, PE_MAX_SECTIONS);
  size_t hdr_len = (size_t)optsz + 40u * nsec;
  uint64_t opt_off = (uint64_t)lfanew + sizeof(coff);
  if (opt_off + hdr_len > pe->file_size || opt_off + hdr_len > PE_HEADERS_MAX + 4096u)
    return pe_fail(-ENOEXEC, why, why_cap, "section table past the end of the headers");
  uint8_t *h = malloc(hdr_len);
  if (!h) return -ENOMEM;
  if (pe_pread_all(fd, h, hdr_len, opt_off) < 0) {
    free(h);
    return -EIO;
  }
  unsigned magic = optsz >= 2 ? pe_u16(h) : 0;
  unsigned ndir_at = magic == 0x10b ? 92 : magic == 0x20b ? 108 : 0;
  if (!ndir_at || optsz < ndir_at + 4) {
    free(h);
    return pe_fail(-ENOEXEC, why, why_cap, "optional header magic %#x / size %u not PE32 or PE32+",
                   magic, optsz);
  }
  uint32_t ndir = pe_u32(h + ndir_at);
  size_t cli_at = ndir_at + 4 + 8u * PE_DIR_CLI;
  if (ndir > PE_DIR_CLI && cli_at + 8 <= optsz) {
    pe->cli_rva = pe_u32(h + cli_at);
    pe->cli_size = pe_u32(h + cli_at + 4);
  }
  for (unsigned i = 0; i < nsec; i++) {
    const uint8_t *s = h + optsz + 40u * i;
    struct pe_section *x = &pe->sec[pe->nsec];
    x->vsize = pe_u32(s + 8);
    x->va = pe_u32(s + 12);
    x->raw_size = pe_u32(s + 16);
    x->raw = pe_u32(s + 20);
    /* file data past the end of the file is not there to read */
    if ((uint64_t)x->raw + x->raw_size > pe->file_size) {
      if (x->raw >= pe->file_size)
        x->raw_size = 0;
      else
        x->raw_size = (uint32_t)(pe->file_size - x->raw);
    }
    if ((uint64_t)x->va + x->vsize > UINT32_MAX) continue;
    pe->nsec++;
  }
  free(h);
  return 0;
}

int pe_rva_to_offset(const struct pe_section *sec, unsigned nsec, uint32_t rva, uint32_t len,
                     uint64_t *off) {
  for (unsigned i = 0; i < nsec; i++) {
    const struct pe_section *s = &sec[i];
    uint32_t span = s->raw_size < s->vsize || !s->vsize ? s->raw_size : s->vsize;
    if (rva >= s->va && (uint64_t)rva - s->va + len <= span) {
      *off = (uint64_t)s->raw + (rva - s->va);
      return 0;
    }
  }
  return -ERANGE;
}

int pe_offset_to_rva(const struct pe_section *sec, unsigned nsec, uint64_t off, uint32_t *rva) {
  for (unsigned i = 0; i < nsec; i++) {
    const struct pe_section *s = &sec[i];
    uint32_t span = s->raw_size < s->vsize || !s->vsize ? s->raw_size : s->vsize;
    if (off >= s->raw && off - s->raw < span) {
      *rva = s->va + (uint32_t)(off - s->raw);
      return 0;
    }
  }
  return -ERANGE;
}

int pe_read_rva(const struct pe_file *pe, uint32_t rva, uint32_t len, uint8_t **out) {
  uint64_t off;
  if (len == 0 || pe_rva_to_offset(pe->sec, pe->nsec, rva, len, &off) < 0) return -ERANGE;
  uint8_t *b = malloc(len);
  if (!b) return -ENOMEM;
  if (pe_pread_all(pe->fd, b, len, off) < 0) {
    free(b);
    return -EIO;
  }
  *out = b;
  return 0;
}
