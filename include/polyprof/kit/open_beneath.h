/*
 * Opening a file that another process named (a path from its
 * /proc/PID/maps) under that process's root, /proc/PID/root. Going through
 * the root link alone is not enough: an absolute symbolic link inside the
 * target's tree would resolve against the agent's root, and ".." or a link
 * could climb out of it. So every component is opened on its own, never
 * following a link.
 */
#ifndef PP_SUPPORT_OPEN_BENEATH_H
#define PP_SUPPORT_OPEN_BENEATH_H

#include <stdint.h>

/* Opens path (absolute or not, as seen from dirfd) read-only, refusing
 * symbolic links in any component, "." and ".." components and anything
 * but a regular file. Returns the fd (O_CLOEXEC) or -errno. */
int pp_open_beneath(int dirfd, const char *path);

/* Same under /proc/<pid>/root. */
int pp_open_in_proc_root(uint32_t pid, const char *path);

#endif
