/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pprof writer: the merged profile as perftools.profiles.Profile (our
 * core/output/profile.proto, encoded with protobuf-c), gzipped as pprof
 * tools expect on disk. Encoded straight from pp_profile, no text round
 * trip. Each distinct frame becomes a Location with one Line (function,
 * line); functions are (name, file) pairs so runtime frames keep file and
 * line; frames are grouped into one Mapping per runtime kind ("python",
 * "kernel"...), which pprof shows as the object name. Process facts travel
 * as sample labels: comm, pid, container, appid, and for a Kubernetes
 * container pod, namespace and k8s.pod.label.<key> (k8s_labels.h).
 */
#ifndef PP_OUTPUT_PPROF_H
#define PP_OUTPUT_PPROF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "profile.h"

struct pp_pprof_info {
  time_t start, end; /* session; 0 if unknown */
  int frequency;     /* Hz, for the cpu nanoseconds value (0: samples only) */
  /* the sample type and unit of a profile that is not cpu samples (wall,
   * off_cpu/microseconds, alloc_space/bytes); NULL: cpu */
  const char *sample_type, *sample_unit;
};

/* Uncompressed protobuf bytes (*out malloc'd). 0 or -errno. */
int pp_pprof_encode(const struct pp_profile *p, const struct pp_pprof_info *info, uint8_t **out,
                    size_t *len);
/* gzip(pp_pprof_encode) to f. 0 or -errno. */
int pp_pprof_write(FILE *f, const struct pp_profile *p, const struct pp_pprof_info *info);

#endif
