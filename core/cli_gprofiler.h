/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gProfiler flags polyprof accepts without an equivalent: a command line
 * written for gProfiler must start polyprof, and each such flag says once,
 * in one warning line, what polyprof does instead.
 */
#ifndef PP_CLI_GPROFILER_H
#define PP_CLI_GPROFILER_H

enum pp_gprofiler_value {
  PP_GP_BARE,     /* takes no value */
  PP_GP_VALUE,    /* the next word (or =value) belongs to it */
  PP_GP_OPTIONAL, /* the next word if it is not a flag (argparse's nargs="?") */
};

struct pp_gprofiler_flag {
  const char *name; /* "--min-duration" */
  enum pp_gprofiler_value value;
  const char *instead; /* what polyprof does instead, for the warning */
};

/* NULL if flag is not one of them. */
const struct pp_gprofiler_flag *pp_gprofiler_flag_find(const char *flag);

/* The warning line for f. */
void pp_gprofiler_flag_warn(const struct pp_gprofiler_flag *f);

#endif
