/* SPDX-License-Identifier: Apache-2.0 */
/* Capabilities for one step (polyprof/kit/cap_step.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* setns */
#endif
#include "polyprof/kit/cap_step.h"

#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "polyprof/plugin.h"

/* capget/capset of the calling thread (pid 0), version 3: two 32-bit
 * words per set. The raw calls: libcap is not a dependency of the kit. */
struct step_cap_header {
  uint32_t version;
  int pid;
};
struct step_cap_data {
  uint32_t effective, permitted, inheritable;
};
#define STEP_CAP_VERSION_3 0x20080522

enum {
  STEP_DAC_OVERRIDE = 1,
  STEP_FOWNER = 3,
  STEP_KILL = 5,
  STEP_SETGID = 6,
  STEP_SETUID = 7,
  STEP_SYS_CHROOT = 18,
  STEP_SYS_ADMIN = 21
};

static uint64_t caps_of(uint64_t needs) {
  uint64_t c = 0;
  if (needs & PP_CAP_NEEDS_NSENTER) c |= (1ull << STEP_SYS_ADMIN) | (1ull << STEP_SYS_CHROOT);
  if (needs & PP_CAP_NEEDS_SETID) c |= (1ull << STEP_SETUID) | (1ull << STEP_SETGID);
  if (needs & PP_CAP_NEEDS_KILL) c |= 1ull << STEP_KILL;
  if (needs & PP_CAP_NEEDS_FILE_OVERRIDE) c |= 1ull << STEP_DAC_OVERRIDE;
  if (needs & PP_CAP_NEEDS_FILE_OWNER) c |= 1ull << STEP_FOWNER;
  return c;
}

int pp_cap_step_begin(struct pp_cap_step *s, uint64_t needs) {
  memset(s, 0, sizeof(*s));
  struct step_cap_header h = {STEP_CAP_VERSION_3, 0};
  struct step_cap_data d[2];
  if (syscall(SYS_capget, &h, d) != 0) return -errno;
  uint64_t want = caps_of(needs);
  bool change = false;
  for (int i = 0; i < 2; i++) {
    s->saved[i] = d[i].effective;
    uint32_t add = (uint32_t)(want >> (32 * i)) & d[i].permitted & ~d[i].effective;
    if (add) change = true;
    d[i].effective |= add;
  }
  if (!change) return 0;
  if (syscall(SYS_capset, &h, d) != 0) return -errno;
  s->raised = 1;
  return 0;
}

void pp_cap_step_end(struct pp_cap_step *s) {
  if (!s->raised) return;
  int saved_errno = errno;
  struct step_cap_header h = {STEP_CAP_VERSION_3, 0};
  struct step_cap_data d[2];
  if (syscall(SYS_capget, &h, d) == 0) {
    for (int i = 0; i < 2; i++)
      d[i].effective = s->saved[i] & d[i].permitted;
    syscall(SYS_capset, &h, d);
  }
  s->raised = 0;
  errno = saved_errno;
}

int pp_setns_step(int fd, int nstype) {
  struct pp_cap_step s;
  pp_cap_step_begin(&s, PP_CAP_NEEDS_NSENTER);
  int rc = setns(fd, nstype);
  pp_cap_step_end(&s);
  return rc;
}
