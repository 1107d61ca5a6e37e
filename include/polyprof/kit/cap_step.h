/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Capabilities for one step. A plugin that declares a need as a step
 * (PP_CAP_STEP_NSENTER, _SETID, _KILL, _FILE_OVERRIDE, _FILE_OWNER beside the NEEDS bit) runs with
 * those capabilities permitted but not effective: a bug elsewhere in the
 * plugin cannot use them by accident, and a file or socket opened on a
 * target's say-so is opened without them. Around the step that needs them
 * the plugin raises them, for the calling thread only (capabilities are
 * per thread), and lowers them right after:
 *
 *   struct pp_cap_step s;
 *   pp_cap_step_begin(&s, PP_CAP_NEEDS_NSENTER);
 *   int rc = setns(fd, CLONE_NEWNET);
 *   pp_cap_step_end(&s);
 *
 * This narrows what the capability reaches; it is not a barrier against
 * code already running in the worker, which could raise them itself
 * (docs/security.md). Under a host that does not know the STEP bits the
 * capabilities are effective all along and these calls change nothing.
 */
#ifndef POLYPROF_KIT_CAP_STEP_H
#define POLYPROF_KIT_CAP_STEP_H

#include <stdint.h>

#include "polyprof/plugin.h" /* the PP_CAP_NEEDS_* bits */

struct pp_cap_step {
  uint32_t saved[2]; /* the thread's effective set before the step */
  int raised;        /* 1 if begin changed it */
};

/* Raise the capabilities of the NEEDS bits in `needs` (PP_CAP_NEEDS_NSENTER:
 * CAP_SYS_ADMIN and CAP_SYS_CHROOT; PP_CAP_NEEDS_SETID: CAP_SETUID and
 * CAP_SETGID; PP_CAP_NEEDS_KILL: CAP_KILL; PP_CAP_NEEDS_FILE_OVERRIDE:
 * CAP_DAC_OVERRIDE; PP_CAP_NEEDS_FILE_OWNER: CAP_FOWNER) that the thread holds permitted into its
 * effective set. One it does not hold is left out: the step then fails with its own EPERM, which
 * names the real cause better. 0, or -errno if the sets could not be read or written (the step may
 * still work if they were effective). */
int pp_cap_step_begin(struct pp_cap_step *s, uint64_t needs);

/* The effective set as it was before pp_cap_step_begin(). Keeps errno. */
void pp_cap_step_end(struct pp_cap_step *s);

/* setns(fd, nstype) with PP_CAP_NEEDS_NSENTER raised for that call only:
 * 0 or -1 with errno set, like setns(). */
int pp_setns_step(int fd, int nstype);

#endif
