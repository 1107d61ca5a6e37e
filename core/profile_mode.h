/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Profile types (`--mode cpu|wall|offcpu|alloc`, profiling.mode): what each
 * one is called, counts in and is written as, which plugin can give which,
 * and how one plugin snapshot holding several types is cut into one profile
 * per type.
 *
 * A plugin tags a sample with its type (pp_sample.type); the sink keeps it
 * as a marker frame (profile_marker.h). The output stage splits each
 * snapshot by type (pp_profile_type_extract) before the merge and writes
 * one set of files per type.
 */
#ifndef PP_PROFILE_MODE_H
#define PP_PROFILE_MODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "config.h"
#include "polyprof/plugin.h"
#include "profile.h"

#define PP_TYPE_BIT(t) (1u << (t))
#define PP_TYPES_CPU_ONLY PP_TYPE_BIT(PP_PROFILE_CPU)

struct pp_profile_type_desc {
  const char *name;       /* "offcpu": --mode value, file name part */
  const char *gp_mode;    /* the header's profiling_mode (gProfiler's word) */
  const char *unit;       /* the header's unit and the HTML's: "samples" */
  const char *pprof_type; /* pprof sample type: "cpu", "off_cpu"... */
  const char *pprof_unit; /* pprof sample unit: "count", "microseconds"... */
  const char *pyroscope;  /* Pyroscope application name suffix (__name__): "cpu" */
  const char *pyro_units; /* Pyroscope units: "samples", "bytes" */
  unsigned pyro_rate;     /* Pyroscope sampleRate: counts per second (0: --frequency) */
};

const struct pp_profile_type_desc *pp_profile_type(unsigned type); /* NULL if out of range */

/* "cpu,offcpu" -> bitmask of PP_TYPE_BIT. gProfiler's "allocation" is
 * alloc; "none" alone is 0 (no profiling). 0 or -1 with err naming the
 * word that is not a type. */
int pp_profile_types_parse(const char *text, uint32_t *mask, char *err, size_t errlen);

/* The PP_SESSION_* bits for a mask. */
uint32_t pp_profile_types_session_flags(uint32_t mask);

/* Number of types in the mask. */
unsigned pp_profile_types_count(uint32_t mask);

/* What a session of these types asks of one plugin. The core maps wall
 * onto the runtime plugins' own wall knobs (see profile_mode_plugins.c);
 * a plugin switched that way emits untagged samples that are wall samples. */
struct pp_plugin_types {
  uint32_t gives;        /* types this plugin contributes */
  bool untagged_is_wall; /* its CPU-tagged samples are wall samples */
};

/* What plugin `plugin` gives in this configuration (profile_mode_plugins.c). */
struct pp_plugin_types pp_profile_types_of(const struct pp_config *cfg, const char *plugin,
                                           bool system_wide);
/* Before a plugin starts: map --mode wall onto its wall knob and log, once,
 * each requested type it cannot give (the other types go on). */
void pp_profile_types_apply(struct pp_config *cfg, const char *plugin, bool system_wide);
/* Capabilities a plugin needs on top of its descriptor's for this run
 * (PP_CAP_* bits): uprobe events (perf's native allocations, set through
 * its native_alloc option) take CAP_SYS_ADMIN, held as a step privilege
 * the plugin raises only around opening them. */
uint64_t pp_profile_types_step_caps(const struct pp_plugin_config *pc);
/* What pp_profile_types_step_caps() may add for this plugin when the run
 * asks for it (`polyprof check` shows it as conditional). */
uint64_t pp_profile_types_step_caps_possible(const struct pp_plugin *desc);
/* Once the enabled plugins are known: one line for each requested type
 * none of them gives. */
void pp_profile_types_check_sources(const struct pp_config *cfg, const char *const *names,
                                    const bool *system_wide, size_t n);

/* The file-name part of type t in a session of `mask`: "" for cpu or a
 * single type (gProfiler's names), ".offcpu" otherwise. */
const char *pp_profile_type_infix(uint32_t mask, unsigned type, char *buf, size_t len);
/* "last_profile.col" -> "last_profile.offcpu.col" with infix ".offcpu". */
void pp_profile_type_link(const char *link, const char *infix, char *buf, size_t len);

/* Copy into `dst` (cleared first) the stacks of `src` of type `type`,
 * without their marker, plus every pid record and counter. With
 * untagged_as set, untagged stacks count as that type instead of CPU. 0 or
 * -ENOMEM. */
int pp_profile_type_extract(struct pp_profile *dst, const struct pp_profile *src, unsigned type,
                            int untagged_as);

/* The type a .col header (JSON text) records; cpu when it says none (a
 * file written before types, or by gProfiler). */
unsigned pp_profile_type_of_header(const char *header_json);

/* Stamp a header (pp_col_header's object) with the type: profile_type,
 * profile_unit, and profiling_mode (also in metadata) set to the type's
 * gProfiler word. */
void pp_profile_type_stamp_header(json_t *header, unsigned type);

#endif
