/* SPDX-License-Identifier: Apache-2.0 */
#include "pidns.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "polyprof/kit/proc.h"

int pp_pidns_link_is_init(const char *link) {
  if (strncmp(link, "pid:[", 5) != 0) return -1;
  char *end;
  errno = 0;
  unsigned long long ino = strtoull(link + 5, &end, 10);
  if (errno || end == link + 5 || strcmp(end, "]") != 0) return -1;
  return ino == PP_PIDNS_INIT_INO;
}

/* Older way, for a /proc without ns links: more than one pid in NSpid means
 * the /proc we read belongs to an ancestor namespace of ours. */
static bool nspid_single(void) {
  char buf[4096];
  if (pp_read_file("/proc/self/status", buf, sizeof(buf), NULL) < 0) return true;
  const char *p = strstr(buf, "\nNSpid:");
  if (!p) return true;
  p += 7;
  int numbers = 0;
  while (*p && *p != '\n') {
    while (*p == ' ' || *p == '\t')
      p++;
    if (*p >= '0' && *p <= '9') {
      numbers++;
      while (*p >= '0' && *p <= '9')
        p++;
    } else if (*p && *p != '\n') {
      p++;
    }
  }
  return numbers <= 1;
}

bool pp_pidns_is_init(void) {
  char link[64];
  ssize_t n = readlink("/proc/self/ns/pid", link, sizeof(link) - 1);
  if (n > 0) {
    link[n] = '\0';
    int r = pp_pidns_link_is_init(link);
    if (r >= 0) return r == 1;
  }
  return nspid_single();
}
