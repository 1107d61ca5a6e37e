/* .NET diagnostic IPC client (see ipc.h and docs/dotnet.md). */
#include "ipc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "nettrace.h"

static const uint8_t ipc_magic[14] = "DOTNET_IPC_V1";

/* TMPDIR from the target's initial environment (readable by root); the
 * runtime places its socket there, /tmp when unset or empty. */
static void target_tmpdir(uint32_t pid, char *out, size_t cap) {
  snprintf(out, cap, "/tmp");
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/environ", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  static char env[65536];
  ssize_t n = read(fd, env, sizeof(env) - 1);
  close(fd);
  if (n <= 0) return;
  env[n] = '\0';
  for (char *p = env; p < env + n; p += strlen(p) + 1) {
    if (strncmp(p, "TMPDIR=", 7) == 0 && p[7] == '/') {
      snprintf(out, cap, "%s", p + 7);
      size_t l = strlen(out);
      while (l > 1 && out[l - 1] == '/')
        out[--l] = '\0';
      return;
    }
  }
}

int dotnet_ipc_find_socket(const struct pp_host *host, uint32_t pid, char *out, size_t outlen) {
  char root[PATH_MAX], tmp[PATH_MAX], dir[PATH_MAX];
  uint32_t nspid = pid;
  uint64_t start = 0;
  if (host->proc_root(host, pid, root, sizeof(root)) < 0) snprintf(root, sizeof(root), "/");
  host->proc_ns_pid(host, pid, &nspid);
  int rc = host->proc_start_time(host, pid, &start);
  if (rc < 0) return rc;
  target_tmpdir(pid, tmp, sizeof(tmp));
  if (snprintf(dir, sizeof(dir), "%s%s", strcmp(root, "/") == 0 ? "" : root, tmp) >=
      (int)sizeof(dir))
    return -ENAMETOOLONG;
  /* the expected name carries the start time: exact match first */
  if (snprintf(out, outlen, "%s/dotnet-diagnostic-%u-%llu-socket", dir, nspid,
               (unsigned long long)start) >= (int)outlen)
    return -ENAMETOOLONG;
  struct stat st;
  if (stat(out, &st) == 0 && S_ISSOCK(st.st_mode)) return 0;
  /* the key may differ (e.g. a clock-tick conversion in a container): the
   * newest socket of this nspid, as the official client does */
  DIR *d = opendir(dir);
  if (!d) return -ENOENT;
  char prefix[64];
  snprintf(prefix, sizeof(prefix), "dotnet-diagnostic-%u-", nspid);
  size_t plen = strlen(prefix);
  time_t best = 0;
  int found = -ENOENT;
  struct dirent *de;
  while ((de = readdir(d))) {
    size_t l = strlen(de->d_name);
    if (strncmp(de->d_name, prefix, plen) != 0 || l < 7 || strcmp(de->d_name + l - 7, "-socket"))
      continue;
    char cand[PATH_MAX];
    if (snprintf(cand, sizeof(cand), "%s/%s", dir, de->d_name) >= (int)sizeof(cand)) continue;
    if (stat(cand, &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_mtime < best) continue;
    best = st.st_mtime;
    if (snprintf(out, outlen, "%s", cand) < (int)outlen) found = 0;
  }
  closedir(d);
  return found;
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

/* connect() to a path that may exceed sun_path (deep container roots):
 * through an O_PATH descriptor of its directory. */
static int connect_path(const char *path, int timeout_ms) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -errno;
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  int dfd = -1;
  if (strlen(path) < sizeof(sa.sun_path)) {
    memcpy(sa.sun_path, path, strlen(path) + 1);
  } else {
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX];
    if (!slash || (size_t)(slash - path) >= sizeof(dir)) {
      close(fd);
      return -ENAMETOOLONG;
    }
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = '\0';
    dfd = open(dir, O_PATH | O_CLOEXEC);
    if (dfd < 0 || snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", dfd,
                            slash + 1) >= (int)sizeof(sa.sun_path)) {
      if (dfd >= 0) close(dfd);
      close(fd);
      return -ENAMETOOLONG;
    }
  }
  int rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
  if (rc < 0 && errno == EINPROGRESS) {
    rc = wait_fd(fd, POLLOUT, timeout_ms);
    int err = 0;
    socklen_t el = sizeof(err);
    if (rc == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err) rc = -err;
  } else if (rc < 0) {
    rc = -errno;
  }
  if (dfd >= 0) close(dfd);
  if (rc < 0) {
    close(fd);
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

int dotnet_ipc_send_command(const char *sock, uint8_t set, uint8_t id, const void *payload,
                            size_t len, int timeout_ms) {
  if (len > UINT16_MAX - 20) return -EMSGSIZE;
  int fd = connect_path(sock, timeout_ms);
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

int dotnet_ipc_call(const char *sock, uint8_t set, uint8_t id, const void *payload, size_t len,
                    uint8_t *reply, size_t cap, size_t *reply_len, uint32_t *hresult,
                    int timeout_ms) {
  int fd = dotnet_ipc_send_command(sock, set, id, payload, len, timeout_ms);
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
