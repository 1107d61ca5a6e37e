/* SPDX-License-Identifier: Apache-2.0 */
/*
 * .NET diagnostic IPC client (see dotnet.h and docs/dotnet.md): finding a
 * process's diagnostic socket, also inside containers, framing commands and
 * reading replies with deadlines. Replies come from the target and are
 * untrusted; so are the paths: its TMPDIR and the entries of that directory
 * are resolved in its root and checked by the kit (kit/target_files.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "dotnet.h"
#include "polyprof/kit/cap_step.h"

static const uint8_t ipc_magic[14] = "DOTNET_IPC_V1";

/* TMPDIR from the target's initial environment (readable by root); the
 * runtime places its socket there, /tmp when unset, empty or not absolute.
 * Only a path: it is opened inside the target's root, by the kit. */
static void target_tmpdir(uint32_t pid, char *out, size_t cap) {
  snprintf(out, cap, "/tmp");
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/environ", pid);
  static char env[65536];
  size_t n = 0;
  if (pp_read_file(path, env, sizeof(env), &n) < 0 || n == 0) return;
  for (char *p = env; p < env + n; p += strlen(p) + 1) {
    if (strncmp(p, "TMPDIR=", 7) == 0 && p[7] == '/') {
      if (strlen(p + 7) >= cap) return; /* the runtime could not use it either */
      snprintf(out, cap, "%s", p + 7);
      size_t l = strlen(out);
      while (l > 1 && out[l - 1] == '/')
        out[--l] = '\0';
      return;
    }
  }
}

/* Checks one socket path (the kit's checks, no connection): 0 if usable. */
static int try_socket(uint32_t pid, const char *path, char *reason, size_t cap) {
  int pfd = pp_target_socket(pid, path, reason, cap);
  if (pfd < 0) return pfd;
  close(pfd);
  return 0;
}

/* The runtime, running as the target's user, creates its socket in the
 * directory; a directory that user cannot enter is not one the runtime
 * used, only one a link points at: it is not listed. */
static bool user_can_enter(const struct stat *st, uid_t uid, gid_t gid) {
  if (uid == 0 || st->st_uid == uid) return true;
  if (st->st_gid == gid) return (st->st_mode & S_IXGRP) != 0;
  return (st->st_mode & S_IXOTH) != 0;
}

int dotnet_ipc_find_socket(uint32_t pid, uint32_t nspid, uint64_t start, char *out, size_t outlen,
                           char *reason, size_t cap) {
  char dir[PATH_MAX], why[256] = "";
  reason[0] = '\0';
  target_tmpdir(pid, dir, sizeof(dir));
  const char *sep = strcmp(dir, "/") == 0 ? "" : "/";
  struct stat dst;
  int dfd = pp_target_open(pid, dir, PP_TF_DIR, NULL, &dst, why, sizeof(why));
  if (dfd < 0) {
    if (dfd == -ENOENT || dfd == -ESRCH) return dfd;
    snprintf(reason, cap, "diagnostic socket directory (TMPDIR): %s", why);
    return dfd;
  }
  uid_t uid;
  gid_t gid;
  int rc = pp_target_ids(pid, &uid, &gid);
  if (rc == 0 && !user_can_enter(&dst, uid, gid)) {
    snprintf(reason, cap, "TMPDIR %.100s is a directory uid %u cannot enter (owner %u, mode %03o)",
             dir, (unsigned)uid, (unsigned)dst.st_uid, (unsigned)(dst.st_mode & 0777));
    rc = -EACCES;
  }
  if (rc < 0) {
    close(dfd);
    return rc;
  }
  /* the expected name carries the start time: exact match first */
  if (snprintf(out, outlen, "%s%sdotnet-diagnostic-%u-%llu-socket", dir, sep, nspid,
               (unsigned long long)start) >= (int)outlen) {
    close(dfd);
    return -ENAMETOOLONG;
  }
  rc = try_socket(pid, out, reason, cap);
  if (rc != -ENOENT) {
    close(dfd);
    return rc;
  }
  reason[0] = '\0';
  /* the key may differ (e.g. a clock-tick conversion in a container): the
   * newest socket of this nspid, as the official client does */
  DIR *d = fdopendir(dfd);
  if (!d) {
    close(dfd);
    return -ENOMEM;
  }
  char prefix[64], best[NAME_MAX + 1] = "", other[NAME_MAX + 1] = "";
  snprintf(prefix, sizeof(prefix), "dotnet-diagnostic-%u-", nspid);
  size_t plen = strlen(prefix);
  time_t best_mtime = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    size_t l = strlen(de->d_name);
    if (strncmp(de->d_name, prefix, plen) != 0 || l < 7 || strcmp(de->d_name + l - 7, "-socket"))
      continue;
    struct stat st;
    /* the entry itself, not what a link names: nothing is opened here */
    if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!S_ISSOCK(st.st_mode)) {
      snprintf(other, sizeof(other), "%s", de->d_name);
      continue;
    }
    if (best[0] && st.st_mtime < best_mtime) continue;
    best_mtime = st.st_mtime;
    snprintf(best, sizeof(best), "%s", de->d_name);
  }
  closedir(d);
  /* no socket, but something in a socket's place: the kit says why it is
   * not one (a link, a FIFO...), for the target's status */
  const char *name = best[0] ? best : other;
  if (!name[0]) return -ENOENT;
  if (snprintf(out, outlen, "%s%s%s", dir, sep, name) >= (int)outlen) return -ENAMETOOLONG;
  rc = try_socket(pid, out, reason, cap);
  return rc == -ENOENT ? -EIO : rc; /* it was there a moment ago */
}

static int wait_fd(int fd, short ev, int timeout_ms) {
  struct pollfd p = {.fd = fd, .events = ev};
  int r;
  do
    r = poll(&p, 1, timeout_ms);
  while (r < 0 && errno == EINTR);
  if (r < 0) return -errno;
  if (r == 0) return -ETIMEDOUT;
  return 0;
}

/* A connection to the target's socket, checked by the kit (in its root, a
 * socket, owned by its euid) and made through that very inode. Made here
 * rather than by pp_target_connect_unix() because it must not block: a
 * target whose listen backlog is full would hold a blocking connect()
 * forever. Non-blocking afterwards too, for the deadlines. */
static int connect_target(uint32_t pid, const char *path, int timeout_ms) {
  int pfd = pp_target_socket(pid, path, NULL, 0);
  if (pfd < 0) return pfd;
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d", pfd);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int rc = fd < 0 ? -errno : 0;
  /* the socket is the runtime's, mode 0600 as its user: writing to it (the
   * connect) is the one step that needs CAP_DAC_OVERRIDE */
  struct pp_cap_step dac;
  pp_cap_step_begin(&dac, PP_CAP_NEEDS_FILE_OVERRIDE);
  if (rc == 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) rc = -errno;
  pp_cap_step_end(&dac);
  if (rc < 0 && fd >= 0) {
    if (rc == -EINPROGRESS) {
      rc = wait_fd(fd, POLLOUT, timeout_ms);
      int err = 0;
      socklen_t el = sizeof(err);
      if (rc == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err) rc = -err;
    }
  }
  close(pfd);
  if (rc < 0) {
    if (fd >= 0) close(fd);
    return rc;
  }
  return fd;
}

static int write_all(int fd, const uint8_t *b, size_t n, int timeout_ms) {
  while (n > 0) {
    ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        int rc = wait_fd(fd, POLLOUT, timeout_ms);
        if (rc < 0) return rc;
        continue;
      }
      return -errno;
    }
    b += w;
    n -= (size_t)w;
  }
  return 0;
}

static int read_exact(int fd, uint8_t *b, size_t n, int timeout_ms) {
  while (n > 0) {
    ssize_t r = recv(fd, b, n, 0);
    if (r == 0) return -ECONNRESET; /* target closed: exited or rejected us */
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        int rc = wait_fd(fd, POLLIN, timeout_ms);
        if (rc < 0) return rc;
        continue;
      }
      return -errno;
    }
    b += r;
    n -= (size_t)r;
  }
  return 0;
}

int dotnet_ipc_send_command(uint32_t pid, const char *sock, uint8_t set, uint8_t id,
                            const void *payload, size_t len, int timeout_ms) {
  if (len > UINT16_MAX - 20) return -EMSGSIZE;
  int fd = connect_target(pid, sock, timeout_ms);
  if (fd < 0) return fd;
  uint8_t hdr[20];
  memcpy(hdr, ipc_magic, 14);
  uint16_t size = (uint16_t)(20 + len);
  hdr[14] = (uint8_t)size;
  hdr[15] = (uint8_t)(size >> 8);
  hdr[16] = set;
  hdr[17] = id;
  hdr[18] = hdr[19] = 0;
  int rc = write_all(fd, hdr, sizeof(hdr), timeout_ms);
  if (rc == 0 && len) rc = write_all(fd, payload, len, timeout_ms);
  if (rc < 0) {
    close(fd);
    return rc;
  }
  return fd;
}

int dotnet_ipc_read_reply(int fd, int timeout_ms, uint8_t *payload, size_t cap, size_t *len,
                          uint32_t *hresult) {
  uint8_t hdr[20];
  int rc = read_exact(fd, hdr, sizeof(hdr), timeout_ms);
  if (rc < 0) return rc;
  if (memcmp(hdr, ipc_magic, 14) != 0) return -EBADMSG;
  size_t size = (size_t)hdr[14] | ((size_t)hdr[15] << 8);
  if (size < 20 || size - 20 > DOTNET_IPC_MAX_PAYLOAD) return -EBADMSG;
  size_t plen = size - 20;
  uint8_t tmp[DOTNET_IPC_MAX_PAYLOAD];
  rc = read_exact(fd, tmp, plen, timeout_ms);
  if (rc < 0) return rc;
  if (hdr[16] != 0xff) return -EBADMSG;
  if (hdr[17] == 0xff) { /* error: a 4-byte HRESULT (trust size, not the spec table) */
    if (hresult)
      *hresult = plen >= 4 ? (uint32_t)tmp[0] | ((uint32_t)tmp[1] << 8) | ((uint32_t)tmp[2] << 16) |
                                 ((uint32_t)tmp[3] << 24)
                           : 0;
    return -EPROTO;
  }
  if (hdr[17] != 0x00) return -EBADMSG;
  size_t k = plen < cap ? plen : cap;
  if (payload && k) memcpy(payload, tmp, k);
  if (len) *len = k;
  return 0;
}

int dotnet_ipc_call(uint32_t pid, const char *sock, uint8_t set, uint8_t id, const void *payload,
                    size_t len, uint8_t *reply, size_t cap, size_t *reply_len, uint32_t *hresult,
                    int timeout_ms) {
  int fd = dotnet_ipc_send_command(pid, sock, set, id, payload, len, timeout_ms);
  if (fd < 0) return fd;
  int rc = dotnet_ipc_read_reply(fd, timeout_ms, reply, cap, reply_len, hresult);
  close(fd);
  return rc;
}

static int put_u32(uint8_t *b, size_t cap, size_t *o, uint32_t v) {
  if (cap - *o < 4) return -ENOSPC;
  for (int i = 0; i < 4; i++)
    b[(*o)++] = (uint8_t)(v >> (8 * i));
  return 0;
}

static int put_string(uint8_t *b, size_t cap, size_t *o, const char *s) {
  if (!s || !*s) return put_u32(b, cap, o, 0);
  size_t n = strlen(s);
  if (put_u32(b, cap, o, (uint32_t)(n + 1)) < 0 || cap - *o < 2 * (n + 1)) return -ENOSPC;
  for (size_t i = 0; i <= n; i++) { /* our strings are ASCII */
    b[(*o)++] = (uint8_t)s[i];
    b[(*o)++] = 0;
  }
  return 0;
}

long dotnet_ipc_collect2_payload(uint8_t *buf, size_t cap, uint32_t buffer_mb, int rundown,
                                 const struct dotnet_provider_cfg *p, size_t n) {
  size_t o = 0;
  if (put_u32(buf, cap, &o, buffer_mb) < 0 || put_u32(buf, cap, &o, 1 /* nettrace */) < 0 ||
      cap - o < 1)
    return -ENOSPC;
  buf[o++] = rundown ? 1 : 0;
  if (put_u32(buf, cap, &o, (uint32_t)n) < 0) return -ENOSPC;
  for (size_t i = 0; i < n; i++) {
    if (put_u32(buf, cap, &o, (uint32_t)p[i].keywords) < 0 ||
        put_u32(buf, cap, &o, (uint32_t)(p[i].keywords >> 32)) < 0 ||
        put_u32(buf, cap, &o, p[i].level) < 0 || put_string(buf, cap, &o, p[i].name) < 0 ||
        put_string(buf, cap, &o, p[i].args) < 0)
      return -ENOSPC;
  }
  return (long)o;
}

/* An IPC string: u32 count of UTF-16 units (with NUL), then the units. */
static int get_string(const uint8_t *p, size_t len, size_t *o, char *out, size_t cap) {
  out[0] = '\0';
  if (len - *o < 4) return -EBADMSG;
  uint32_t units = (uint32_t)p[*o] | ((uint32_t)p[*o + 1] << 8) | ((uint32_t)p[*o + 2] << 16) |
                   ((uint32_t)p[*o + 3] << 24);
  *o += 4;
  if (units == 0) return 0;
  if (units > (len - *o) / 2) return -EBADMSG;
  dotnet_utf16z_to_utf8(p + *o, (size_t)units * 2, out, cap);
  *o += (size_t)units * 2;
  return 0;
}

int dotnet_ipc_parse_info2(const uint8_t *p, size_t len, struct dotnet_proc_info *out) {
  memset(out, 0, sizeof(*out));
  if (len < 8 + 16) return -EBADMSG;
  for (int i = 7; i >= 0; i--)
    out->pid = (out->pid << 8) | p[i];
  size_t o = 8 + 16; /* pid, runtime cookie GUID */
  char os[64];
  if (get_string(p, len, &o, out->command_line, sizeof(out->command_line)) < 0 ||
      get_string(p, len, &o, os, sizeof(os)) < 0 ||
      get_string(p, len, &o, out->arch, sizeof(out->arch)) < 0 ||
      get_string(p, len, &o, out->entrypoint, sizeof(out->entrypoint)) < 0 ||
      get_string(p, len, &o, out->version, sizeof(out->version)) < 0)
    return -EBADMSG;
  return 0;
}
