/* SPDX-License-Identifier: Apache-2.0 */
/*
 * PE/COFF image headers (the envelope of a .NET assembly): the section
 * table, the data directory of the CLI header, and reading a range of the
 * image by RVA from the file. Internal to the kit (pe_r2r.c).
 */
#ifndef POLYPROF_SDK_PE_FILE_H
#define POLYPROF_SDK_PE_FILE_H

#include <stddef.h>
#include <stdint.h>

#define PE_MAX_SECTIONS 96

struct pe_section {
  uint32_t va, vsize;     /* where the image has it */
  uint32_t raw, raw_size; /* where the file has it */
};

struct pe_file {
  int fd;
  uint64_t file_size;
  uint16_t machine; /* as written (R2R images xor it with an OS value) */
  unsigned nsec;
  struct pe_section sec[PE_MAX_SECTIONS];
  uint32_t cli_rva, cli_size; /* CLI (COR20) header; 0: not .NET */
};

/* Reads the headers of the image open at fd. 0 or -ENOEXEC (why says
 * what is wrong), -EIO. */
int pe_file_open(int fd, struct pe_file *pe, char *why, size_t why_cap);

/* File offset of the len bytes at rva, all inside one section's file
 * data. -ERANGE otherwise. */
int pe_rva_to_offset(const struct pe_section *sec, unsigned nsec, uint32_t rva, uint32_t len,
                     uint64_t *off);
/* RVA of a file offset inside some section's file data, or -ERANGE. */
int pe_offset_to_rva(const struct pe_section *sec, unsigned nsec, uint64_t off, uint32_t *rva);

/* Reads the len bytes at rva into a new buffer (the caller frees it).
 * -ERANGE (not in the file), -ENOMEM, -EIO. */
int pe_read_rva(const struct pe_file *pe, uint32_t rva, uint32_t len, uint8_t **out);

/* Writes the reason (printf-style) into why[cap] when why is given and
 * returns rc: the image readers' one way to refuse with a reason. */
int pe_fail(int rc, char *why, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Reads exactly len bytes at off. 0 or -EIO. */
int pe_pread_all(int fd, void *buf, size_t len, uint64_t off);

static inline uint16_t pe_u16(const uint8_t *p) {
  return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t pe_u32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

#endif
