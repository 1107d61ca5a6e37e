/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jitdump reader. See jitdump.h.
 *
 * Layout (native byte order of the writer; a byte-swapped magic means the
 * other endianness and is refused):
 *   header  u32 magic 'JiTD', u32 version (1), u32 total_size (of the
 *           header), u32 elf_mach, u32 pad1, u32 pid, u64 timestamp,
 *           u64 flags
 *   record  u32 id, u32 total_size (of the record), u64 timestamp, then
 *     0 CODE_LOAD  u32 pid, u32 tid, u64 vma, u64 code_addr, u64 code_size,
 *                  u64 code_index, name (NUL-terminated), code bytes
 *     1 CODE_MOVE  u32 pid, u32 tid, u64 vma, u64 old_code_addr,
 *                  u64 new_code_addr, u64 code_size, u64 code_index
 *     3 CODE_CLOSE nothing follows
 *     2 DEBUG_INFO, 4 UNWINDING_INFO and ids added later are skipped by size.
 */
#include "polyprof/kit/jitdump.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "polyprof/kit/proc.h"
#include "polyprof/kit/target_files.h"

#define JITDUMP_MAGIC 0x4A695444u
#define HEADER_MIN 40u
/* The spec's header is 40 bytes; total_size leaves room for fields added
 * later, but not for a writer that points the first record anywhere. */
#define HEADER_MAX 4096u
#define PREFIX 16u
#define LOAD_FIXED (PREFIX + 40u)
#define MOVE_FIXED (PREFIX + 48u)
_Static_assert(PP_JITDUMP_CHUNK_MIN == LOAD_FIXED + PP_JITDUMP_NAME_MAX + 1, "chunk");
#define UPDATE_CHUNK (256u * 1024u)

enum { REC_CODE_LOAD = 0, REC_CODE_MOVE = 1, REC_CODE_CLOSE = 3 };

/* code_index -> stored name, for CODE_MOVE (which carries no name) */
struct code_name {
  uint64_t index;
  uint32_t name;
};

struct pp_jitdump {
  struct pp_perfmap *map;
  uint64_t offset; /* bytes consumed: the header and complete records */
  uint64_t max_bytes;
  int status; /* 0 reading, 1 closed by the writer, < 0 stopped on this error */
  bool have_header;
  bool have_file;
  uint64_t dev, ino; /* the file read so far */
  /* in increasing code_index order (writers count up), so a binary search
   * finds a moved blob's name */
  struct code_name *codes;
  size_t ncodes, codes_cap;
};

static uint32_t rd32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, sizeof(v));
  return v;
}

static uint64_t rd64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, sizeof(v));
  return v;
}

int pp_jitdump_new(size_t max_bytes, struct pp_jitdump **out) {
  struct pp_jitdump *d = calloc(1, sizeof(*d));
  if (!d) return -ENOMEM;
  d->map = pp_perfmap_new();
  if (!d->map) {
    free(d);
    return -ENOMEM;
  }
  d->max_bytes = max_bytes ? max_bytes : UINT64_MAX;
  *out = d;
  return 0;
}

void pp_jitdump_free(struct pp_jitdump *d) {
  if (!d) return;
  pp_perfmap_free(d->map);
  free(d->codes);
  free(d);
}

/* Forgets everything read: the file was replaced or truncated. */
static int reset(struct pp_jitdump *d) {
  struct pp_perfmap *m = pp_perfmap_new();
  if (!m) return -ENOMEM;
  pp_perfmap_free(d->map);
  d->map = m;
  d->offset = 0;
  d->status = 0;
  d->have_header = false;
  d->ncodes = 0;
  return 0;
}

const struct pp_perfmap *pp_jitdump_map(const struct pp_jitdump *d) {
  return d->map;
}

uint64_t pp_jitdump_offset(const struct pp_jitdump *d) {
  return d->offset;
}

static void remember_code(struct pp_jitdump *d, uint64_t index, uint32_t name) {
  /* an index that does not count up is not remembered: its moves, if any,
   * stay unnamed, and the table stays sorted */
  if (d->ncodes && index <= d->codes[d->ncodes - 1].index) return;
  if (d->ncodes == d->codes_cap) {
    size_t ncap = d->codes_cap ? d->codes_cap * 2 : 256;
    struct code_name *g = realloc(d->codes, ncap * sizeof(*g));
    if (!g) return; /* moves of this blob stay unnamed */
    d->codes = g;
    d->codes_cap = ncap;
  }
  d->codes[d->ncodes++] = (struct code_name){.index = index, .name = name};
}

static const struct code_name *find_code(const struct pp_jitdump *d, uint64_t index) {
  size_t lo = 0, hi = d->ncodes;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (d->codes[mid].index < index)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < d->ncodes && d->codes[lo].index == index ? &d->codes[lo] : NULL;
}

/* Copies a name the way perf-map names are kept: one line of text (control
 * characters would break the line-based outputs), bounded, no trailing
 * blanks. Returns the length, 0 if nothing is left. */
static size_t clean_name(const uint8_t *src, size_t n, char *dst) {
  if (n > PP_JITDUMP_NAME_MAX) {
    /* cut before a UTF-8 sequence the bound would split */
    n = PP_JITDUMP_NAME_MAX;
    size_t k = n;
    while (k > 0 && n - k < 4 && (src[k] & 0xC0) == 0x80)
      k--;
    if (k < n && (src[k] & 0xC0) == 0xC0) n = k;
  }
  for (size_t i = 0; i < n; i++)
    dst[i] = (src[i] < 0x20 || src[i] == 0x7f) ? '?' : (char)src[i];
  while (n > 0 && dst[n - 1] == ' ')
    n--;
  return n;
}

static int code_load(struct pp_jitdump *d, const uint8_t *r, size_t have, uint32_t size) {
  size_t lim = size < have ? size : have;
  if (lim <= LOAD_FIXED) return 0;
  uint64_t addr = rd64(r + 32), len = rd64(r + 40), index = rd64(r + 48);
  const uint8_t *name = r + LOAD_FIXED;
  /* the NUL must be inside the record; when only the head of a big record
   * is at hand, a name running past it is cut at the bound */
  const uint8_t *nul = memchr(name, 0, lim - LOAD_FIXED);
  size_t nlen;
  if (nul)
    nlen = (size_t)(nul - name);
  else if (lim < size && lim - LOAD_FIXED > PP_JITDUMP_NAME_MAX)
    nlen = PP_JITDUMP_NAME_MAX;
  else
    return 0;
  char clean[PP_JITDUMP_NAME_MAX];
  nlen = clean_name(name, nlen, clean);
  if (nlen == 0) return 0;
  int64_t ref = pp_perfmap_add(d->map, addr, len, clean, nlen);
  if (ref == -ENOMEM) return -ENOMEM;
  if (ref < 0) return 0; /* empty or wrapping range */
  remember_code(d, index, (uint32_t)ref);
  return 1;
}

static int code_move(struct pp_jitdump *d, const uint8_t *r, uint32_t size) {
  if (size < MOVE_FIXED) return 0;
  uint64_t to = rd64(r + 40), len = rd64(r + 48), index = rd64(r + 56);
  const struct code_name *c = find_code(d, index);
  if (!c) return 0;
  int rc = pp_perfmap_add_ref(d->map, to, len, c->name);
  if (rc == -ENOMEM) return -ENOMEM;
  return rc == 0;
}

/* The header or the record at r: have bytes of it are in memory, avail
 * exist in the file from there. A record not wholly in memory is read from
 * the head at hand only when it starts the buffer (it is bigger than a
 * chunk); otherwise 0 asks for a re-read from its start. Returns the bytes
 * it takes (> 0), 0 when it is not complete yet, or a negative errno;
 * *nsyms counts new symbols. */
static int64_t consume(struct pp_jitdump *d, const uint8_t *r, size_t have, uint64_t avail,
                       bool at_start, int *nsyms) {
  if (!d->have_header) {
    if (have < HEADER_MIN) return 0;
    uint32_t magic = rd32(r), version = rd32(r + 4), size = rd32(r + 8);
    /* a byte-swapped magic is a file of the other endianness: refused too */
    if (magic != JITDUMP_MAGIC || version != 1) return -EPROTO;
    if (size < HEADER_MIN || size > HEADER_MAX) return -EPROTO;
    if (size > avail) return 0;
    if (size > d->max_bytes) return -EFBIG;
    d->have_header = true;
    return size;
  }
  if (have < PREFIX) return 0;
  uint32_t id = rd32(r), size = rd32(r + 4);
  /* without its own size a record cannot be skipped: nothing after it can
   * be framed */
  if (size < PREFIX) return -EPROTO;
  if (size > avail) return 0;
  if (size > have && !at_start) return 0;
  if (d->offset + size > d->max_bytes) return -EFBIG;
  int rc = 0;
  if (id == REC_CODE_LOAD)
    rc = code_load(d, r, have, size);
  else if (id == REC_CODE_MOVE && have >= MOVE_FIXED)
    rc = code_move(d, r, size);
  else if (id == REC_CODE_CLOSE)
    d->status = 1;
  if (rc < 0) return rc;
  if (*nsyms < INT32_MAX) *nsyms += rc;
  return size;
}

/* Consumes the complete records buf holds (have bytes at d->offset; avail
 * in the file from there). */
static void consume_buf(struct pp_jitdump *d, const uint8_t *buf, size_t have, uint64_t avail,
                        int *nsyms) {
  size_t pos = 0;
  while (d->status == 0 && pos < have) {
    int64_t n = consume(d, buf + pos, have - pos, avail - pos, pos == 0, nsyms);
    if (n < 0) d->status = (int)n;
    if (n <= 0) break;
    d->offset += (uint64_t)n;
    /* a record bigger than the buffer was skipped: re-read after it */
    if ((uint64_t)n >= have - pos) break;
    pos += (size_t)n;
  }
}

static int finish(struct pp_jitdump *d, int nsyms) {
  if (nsyms) pp_perfmap_seal(d->map);
  if (d->status < 0) return d->status;
  return nsyms;
}

int pp_jitdump_parse(struct pp_jitdump *d, const uint8_t *buf, size_t len) {
  if (d->status != 0) return d->status < 0 ? d->status : 0;
  int nsyms = 0;
  consume_buf(d, buf, len, len, &nsyms);
  return finish(d, nsyms);
}

int pp_jitdump_read_fd(struct pp_jitdump *d, int fd, size_t chunk) {
  if (d->status != 0) return d->status < 0 ? d->status : 0;
  struct stat st;
  if (fstat(fd, &st) < 0) return -errno;
  uint64_t size = st.st_size > 0 ? (uint64_t)st.st_size : 0;
  if (size < d->offset) {
    /* shrunk: not the file we read (truncated and rewritten) */
    int rc = reset(d);
    if (rc < 0) return rc;
  }
  if (size == d->offset) return 0;
  if (chunk < PP_JITDUMP_CHUNK_MIN) chunk = PP_JITDUMP_CHUNK_MIN;
  uint64_t left = size - d->offset;
  if (chunk > left) chunk = (size_t)left;
  uint8_t *buf = malloc(chunk);
  if (!buf) return -ENOMEM;
  int nsyms = 0;
  while (d->status == 0 && d->offset < size) {
    left = size - d->offset;
    size_t want = left < chunk ? (size_t)left : chunk;
    ssize_t got = pread(fd, buf, want, (off_t)d->offset);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    uint64_t before = d->offset;
    consume_buf(d, buf, (size_t)got, left, &nsyms);
    /* nothing complete at the start of a chunk: the writer is mid-record */
    if (d->offset == before) break;
  }
  free(buf);
  return finish(d, nsyms);
}

int pp_jitdump_update(struct pp_jitdump *d, uint32_t pid, const char *path) {
  if (d->status != 0) return d->status < 0 ? d->status : 0;
  /* written by the target: must be its own file */
  int fd = pp_target_open(pid, path, 0, NULL, NULL, NULL, 0);
  if (fd < 0) return fd;
  struct stat st;
  if (fstat(fd, &st) < 0) {
    int rc = -errno;
    close(fd);
    return rc;
  }
  bool other = d->have_file && ((uint64_t)st.st_dev != d->dev || (uint64_t)st.st_ino != d->ino);
  if ((!d->have_file || other) && pp_proc_file_predates(pid, &st)) {
    close(fd);
    return -ESTALE;
  }
  if (other) {
    int rc = reset(d);
    if (rc < 0) {
      close(fd);
      return rc;
    }
  }
  d->have_file = true;
  d->dev = (uint64_t)st.st_dev;
  d->ino = (uint64_t)st.st_ino;
  int rc = pp_jitdump_read_fd(d, fd, UPDATE_CHUNK);
  close(fd);
  return rc;
}
