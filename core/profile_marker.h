/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The profile-type marker: how a sample's type (pp_sample.type) travels
 * from a plugin's sink to the output stage. A non-CPU stack gets one extra
 * root frame, a pseudo frame named after the type number whose file is
 * PP_TYPE_MARKER_FILE (a string no real frame has), so the worker protocol,
 * the codec and the profile store carry the type unchanged and a CPU-only
 * session stays exactly what it was before types existed. The output stage
 * strips the marker again (profile_mode.h). Header-only: the worker links
 * it without the rest of the core.
 */
#ifndef PP_PROFILE_MARKER_H
#define PP_PROFILE_MARKER_H

#include <stdint.h>
#include <string.h>

#include "profile.h"

#define PP_TYPE_MARKER_FILE "\x01polyprof-type"

/* The marker frame of `type` (1 .. PP_PROFILE_TYPE_COUNT-1) in p, or
 * UINT32_MAX when out of memory. */
static inline uint32_t pp_type_marker_frame(struct pp_profile *p, uint32_t type) {
  char name[2] = {(char)('0' + type), '\0'};
  uint32_t n = pp_profile_intern(p, name, 1);
  uint32_t f = pp_profile_intern(p, PP_TYPE_MARKER_FILE, sizeof(PP_TYPE_MARKER_FILE) - 1);
  if (n == PP_NO_STR || f == PP_NO_STR) return UINT32_MAX;
  return pp_profile_intern_frame(p, n, f, 0, PP_FRAME_PSEUDO);
}

/* The type a stored stack is of: its marker's, or PP_PROFILE_CPU. */
static inline uint32_t pp_type_of_stack(const struct pp_profile *p, const struct pp_stack_rec *s) {
  if (!s->nframes) return PP_PROFILE_CPU;
  const struct pp_frame_rec *fr = pp_profile_frame(p, pp_profile_stack_frames(p, s)[0]);
  if (!fr || fr->kind != PP_FRAME_PSEUDO || fr->file == PP_NO_STR) return PP_PROFILE_CPU;
  if (pp_profile_str_len(p, fr->file) != sizeof(PP_TYPE_MARKER_FILE) - 1 ||
      memcmp(pp_profile_str(p, fr->file), PP_TYPE_MARKER_FILE, sizeof(PP_TYPE_MARKER_FILE) - 1))
    return PP_PROFILE_CPU;
  const char *name = pp_profile_str(p, fr->name);
  if (pp_profile_str_len(p, fr->name) != 1 || name[0] <= '0' ||
      name[0] >= '0' + PP_PROFILE_TYPE_COUNT)
    return PP_PROFILE_CPU;
  return (uint32_t)(name[0] - '0');
}

#endif
