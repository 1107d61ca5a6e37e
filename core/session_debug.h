/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Debug output of a session: each plugin's unmerged per-pid totals
 * (output.debug_plugin_totals). See session_debug.c for the format.
 */
#ifndef PP_SESSION_DEBUG_H
#define PP_SESSION_DEBUG_H

struct pp_agent;

/* Write <output_dir>/<stem>.plugins.json for this session's snapshots and
 * merged profile. Failures are logged, never fatal. */
void pp_agent_write_plugin_totals(struct pp_agent *a, const char *stem);

#endif
