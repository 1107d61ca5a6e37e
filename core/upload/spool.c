/* SPDX-License-Identifier: Apache-2.0 */
/* Bounded on-disk spool of failed uploads (see spool.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "log.h"
#include "support/safe_file.h"
#include "upload/spool.h"

#define SUFFIX ".json.gz"
/* temp name of the versions before support/safe_file */
#define OLD_TEMP_PREFIX ".tmp-"

struct pp_spool {
  char *dir;
  size_t max_bytes;
  unsigned seq;
  pthread_mutex_t mu;
};

struct entry {
  char name[128];
  size_t size;
};

static int mkdir_p(const char *dir) {
  char buf[4096];
  snprintf(buf, sizeof(buf), "%s", dir);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buf, 0755) < 0 && errno != EEXIST) return -errno;
    *p = '/';
  }
  if (mkdir(buf, 0700) < 0 && errno != EEXIST) return -errno;
  return 0;
}

static struct entry *list(struct pp_spool *s, size_t *count, size_t *total);

struct pp_spool *pp_spool_open(const char *dir, size_t max_bytes, char *err, size_t errlen) {
  int rc = mkdir_p(dir);
  if (rc < 0) {
    snprintf(err, errlen, "spool %s: %s", dir, strerror(-rc));
    return NULL;
  }
  struct stat st;
  if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
    snprintf(err, errlen, "spool %s: not a directory", dir);
    return NULL;
  }
  /* profiles reveal what runs on the host: nobody else may read or plant
   * files here */
  if (st.st_uid != geteuid()) {
    snprintf(err, errlen, "spool %s: owned by uid %u, not by the agent (uid %u)", dir,
             (unsigned)st.st_uid, (unsigned)geteuid());
    return NULL;
  }
  if ((st.st_mode & 077) && chmod(dir, 0700) < 0) {
    snprintf(err, errlen, "spool %s: cannot make it private: %s", dir, strerror(errno));
    return NULL;
  }
  struct pp_spool *s = calloc(1, sizeof(*s));
  if (!s || !(s->dir = strdup(dir))) {
    free(s);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  s->max_bytes = max_bytes;
  pthread_mutex_init(&s->mu, NULL);
  free(list(s, &(size_t){0}, &(size_t){0})); /* sweeps what a crash left */
  return s;
}

void pp_spool_free(struct pp_spool *s) {
  if (!s) return;
  pthread_mutex_destroy(&s->mu);
  free(s->dir);
  free(s);
}

static int cmp_entry(const void *a, const void *b) {
  return strcmp(((const struct entry *)a)->name, ((const struct entry *)b)->name);
}

static bool is_entry(const char *name) {
  size_t n = strlen(name), sl = strlen(SUFFIX);
  return name[0] != '.' && n > sl && strcmp(name + n - sl, SUFFIX) == 0 && n < 128;
}

static bool is_temp(const char *name) {
  return pp_safe_is_temp_name(name) || strncmp(name, OLD_TEMP_PREFIX, strlen(OLD_TEMP_PREFIX)) == 0;
}

/* Entries sorted oldest first; *total their size. Temp files found here
 * were left by a crash (a put in progress holds the mutex): they are
 * removed, and any that cannot be counts toward the cap like an entry, so
 * crash leftovers can never grow the spool past it. Caller frees. */
static struct entry *list(struct pp_spool *s, size_t *count, size_t *total) {
  *count = 0;
  *total = 0;
  DIR *d = opendir(s->dir);
  if (!d) return NULL;
  struct entry *v = NULL;
  size_t cap = 0, swept = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    bool temp = is_temp(de->d_name);
    if (!temp && !is_entry(de->d_name)) continue;
    struct stat st;
    if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) continue;
    if (temp) {
      if (unlinkat(dirfd(d), de->d_name, 0) == 0)
        swept++;
      else if (S_ISREG(st.st_mode))
        *total += (size_t)st.st_size;
      continue;
    }
    if (!S_ISREG(st.st_mode)) continue;
    if (*count == cap) {
      cap = cap ? cap * 2 : 16;
      struct entry *nv = realloc(v, cap * sizeof(*v));
      if (!nv) break;
      v = nv;
    }
    /* is_entry() bounded the length below sizeof(name) */
    memcpy(v[*count].name, de->d_name, strlen(de->d_name) + 1);
    v[*count].size = (size_t)st.st_size;
    *total += (size_t)st.st_size;
    (*count)++;
  }
  closedir(d);
  if (swept)
    pp_log(PP_LOG_WARNING, "polyprof.upload",
           "spool %s: removed %zu incomplete file(s) left by an interrupted write", s->dir, swept);
  if (v) qsort(v, *count, sizeof(*v), cmp_entry);
  return v;
}

int pp_spool_put(struct pp_spool *s, time_t end, const char *id, const void *body, size_t len) {
  if (len > s->max_bytes) return -EFBIG;
  pthread_mutex_lock(&s->mu);
  size_t n, total;
  struct entry *v = list(s, &n, &total);
  size_t dropped = 0;
  for (size_t i = 0; i < n && total + len > s->max_bytes; i++) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", s->dir, v[i].name);
    if (unlink(path) == 0) {
      total -= v[i].size;
      dropped++;
    }
  }
  free(v);
  if (dropped)
    pp_log(PP_LOG_WARNING, "polyprof.upload",
           "spool %s full (cap %zu bytes): dropped the %zu oldest profile(s)", s->dir, s->max_bytes,
           dropped);
  char name[128], tmp[4200], path[4200];
  snprintf(name, sizeof(name), "%010lld-%06u-%.32s" SUFFIX, (long long)end, s->seq++ % 1000000u,
           id);
  snprintf(path, sizeof(path), "%s/%s", s->dir, name);
  int fd = pp_safe_create_temp(s->dir, "spool", 0600, tmp, sizeof(tmp));
  int rc = fd < 0 ? fd : pp_safe_write_all(fd, body, len);
  if (fd >= 0) {
    /* the spool outlives the agent: the body itself must be on disk before
     * its name says it is complete */
    if (rc == 0 && fsync(fd) < 0) rc = -errno;
    if (close(fd) < 0 && rc == 0) rc = -errno;
    if (rc == 0)
      rc = pp_safe_rename_into_place(tmp, path);
    else
      unlink(tmp);
  }
  pthread_mutex_unlock(&s->mu);
  return rc;
}

int pp_spool_oldest(struct pp_spool *s, char *path, size_t pathlen, char id[33]) {
  pthread_mutex_lock(&s->mu);
  size_t n, total;
  struct entry *v = list(s, &n, &total);
  int rc = -ENOENT;
  if (n) {
    snprintf(path, pathlen, "%s/%s", s->dir, v[0].name);
    /* "<10 digits>-<6 digits>-<id>.json.gz" */
    const char *p = v[0].name + 18;
    size_t idl = strlen(v[0].name) >= 18 + strlen(SUFFIX) ? strlen(p) - strlen(SUFFIX) : 0;
    if (idl > 32) idl = 32;
    memcpy(id, p, idl);
    id[idl] = '\0';
    rc = 0;
  }
  free(v);
  pthread_mutex_unlock(&s->mu);
  return rc;
}

/* Whether body is one whole gzip member: a file cut short (a disk filled
 * before the spool wrote with fsync, a copy from an older agent, a hand
 * edit) must not be sent as a profile. Inflated into a scratch buffer that
 * is thrown away. */
static bool gzip_whole(const unsigned char *body, size_t len) {
  z_stream z;
  memset(&z, 0, sizeof(z));
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return false;
  unsigned char scratch[16384];
  z.next_in = (unsigned char *)body;
  z.avail_in = (uInt)len;
  int zr;
  do {
    z.next_out = scratch;
    z.avail_out = sizeof(scratch);
    zr = inflate(&z, Z_NO_FLUSH);
  } while (zr == Z_OK);
  bool ok = zr == Z_STREAM_END;
  inflateEnd(&z);
  return ok;
}

int pp_spool_read(struct pp_spool *s, const char *path, unsigned char **body, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return -errno;
  struct stat st;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > s->max_bytes ||
      (size_t)st.st_size > UINT32_MAX) {
    close(fd);
    return -EFBIG;
  }
  size_t size = (size_t)st.st_size;
  unsigned char *b = malloc(size + 1);
  /* a short read (the file shrank under us) is an error: the entry stays
   * for the next attempt instead of a part of it being sent */
  int rc = b ? pp_safe_read_exact(fd, b, size) : -ENOMEM;
  close(fd);
  if (rc == 0 && !gzip_whole(b, size)) rc = -EBADMSG;
  if (rc < 0) {
    free(b);
    return rc;
  }
  *body = b;
  *len = size;
  return 0;
}

int pp_spool_remove(struct pp_spool *s, const char *path) {
  pthread_mutex_lock(&s->mu);
  int rc = unlink(path) < 0 ? -errno : 0;
  pthread_mutex_unlock(&s->mu);
  return rc;
}

size_t pp_spool_count(struct pp_spool *s, size_t *bytes) {
  pthread_mutex_lock(&s->mu);
  size_t n, total;
  free(list(s, &n, &total));
  pthread_mutex_unlock(&s->mu);
  if (bytes) *bytes = total;
  return n;
}
