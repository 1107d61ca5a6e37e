/* SPDX-License-Identifier: Apache-2.0 */
/*
 * See fuzz_memimage.h.
 */
#include "fuzz_memimage.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "polyprof/kit/remote.h"

#define IMAGE_MAX_SEGMENTS 4096

struct segment {
  uint64_t addr;
  const uint8_t *bytes;
  uint32_t len;
};

static struct segment segs[IMAGE_MAX_SEGMENTS];
static size_t nsegs;

static int image_read(pid_t pid, uint64_t addr, void *buf, size_t len) {
  (void)pid;
  for (size_t i = 0; i < nsegs; i++) {
    const struct segment *s = &segs[i];
    if (addr >= s->addr && addr - s->addr <= s->len && len <= s->len - (addr - s->addr)) {
      memcpy(buf, s->bytes + (addr - s->addr), len);
      return 0;
    }
  }
  return -EFAULT;
}

const uint8_t *pp_fuzz_image_load(const uint8_t *data, size_t size, size_t hdr_len) {
  nsegs = 0;
  if (size < hdr_len) return NULL;
  size_t o = hdr_len;
  while (size - o >= 12 && nsegs < IMAGE_MAX_SEGMENTS) {
    uint64_t addr;
    uint32_t len;
    memcpy(&addr, data + o, 8);
    memcpy(&len, data + o + 8, 4);
    o += 12;
    if (len > size - o) len = (uint32_t)(size - o); /* the last one may be cut */
    segs[nsegs++] = (struct segment){addr, data + o, len};
    o += len;
  }
  pp_remote_set_reader(image_read);
  return data;
}

void pp_fuzz_image_unload(void) {
  pp_remote_set_reader(NULL);
  nsegs = 0;
}

/* ---- recording ---- */

static struct {
  uint64_t addr;
  uint8_t *bytes;
  uint32_t len;
} rec[IMAGE_MAX_SEGMENTS];
static size_t nrec;

static int record_read(pid_t pid, uint64_t addr, void *buf, size_t len) {
  struct iovec local = {.iov_base = buf, .iov_len = len};
  struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};
  ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
  if (n < 0) return -errno;
  if ((size_t)n != len) return -EFAULT;
  for (size_t i = 0; i < nrec; i++)
    if (addr >= rec[i].addr && addr - rec[i].addr <= rec[i].len &&
        len <= rec[i].len - (addr - rec[i].addr))
      return 0; /* already kept (the walker reads some twice) */
  if (nrec < IMAGE_MAX_SEGMENTS && (rec[nrec].bytes = malloc(len))) {
    memcpy(rec[nrec].bytes, buf, len);
    rec[nrec].addr = addr;
    rec[nrec].len = (uint32_t)len;
    nrec++;
  }
  return 0;
}

void pp_fuzz_image_record_start(void) {
  nrec = 0;
  pp_remote_set_reader(record_read);
}

int pp_fuzz_image_record_write(const char *path, const void *hdr, size_t hdr_len) {
  pp_remote_set_reader(NULL);
  FILE *f = fopen(path, "wbe");
  if (!f) return -1;
  fwrite(hdr, 1, hdr_len, f);
  for (size_t i = 0; i < nrec; i++) {
    fwrite(&rec[i].addr, 8, 1, f);
    fwrite(&rec[i].len, 4, 1, f);
    fwrite(rec[i].bytes, 1, rec[i].len, f);
    free(rec[i].bytes);
  }
  nrec = 0;
  return fclose(f) == 0 ? 0 : -1;
}
