/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Whether code at a path may be loaded or executed by the agent: plugins
 * (dlopen) and the worker executable run with the agent's privileges, so
 * whoever can replace one of them, or rename any directory on the way to
 * it, owns the host. docs/security.md, "Plugin and worker-binary loading".
 */
#ifndef PP_SUPPORT_TRUSTED_PATH_H
#define PP_SUPPORT_TRUSTED_PATH_H

#include <stdbool.h>
#include <stddef.h>

/* Walk path from "/" one component at a time, following symlinks (each
 * link checked where it lies, at most 32 of them): every directory and the
 * final object must be owned by root or by the agent's effective user
 * (rootless mode: the invoking user) and not writable by group or others.
 * An intermediate directory that is world-writable but sticky (/tmp) is
 * accepted: nobody but its owner may rename or remove what is in it. With
 * want_dir the final object must be a directory, else a regular file.
 * 0, or a negative errno with err naming the offending path and why. */
int pp_trusted_path_check(const char *path, bool want_dir, char *err, size_t errlen);

#endif
