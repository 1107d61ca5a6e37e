/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one way into a target's files.
 *
 * Every path a target names (its executable and libraries from its maps, a
 * perf map or jitdump it writes, its temporary directory, an IPC socket) is
 * a path in the target's own filesystem view, and the target controls that
 * view: in its own user and mount namespace an unprivileged process can put
 * a symbolic link, a FIFO, a device node or a bind mount of any host file it
 * can see at that path. The agent runs as root, so opening such a path the
 * ordinary way would let the target make it read a host file it could not
 * read itself, block forever on a FIFO, or open a device.
 *
 * So every open here:
 *  - resolves the path inside the target's root (/proc/PID/root):
 *    openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS) where the kernel has
 *    it (5.6+); elsewhere a component-by-component walk that refuses every
 *    symbolic link and "..";
 *  - opens nothing but the kind asked for: a regular file (never a FIFO or a
 *    device, so it never blocks), a directory, or a socket to connect to;
 *  - checks identity: a file the target maps must be the very inode its
 *    maps name (device, inode), so a mount over the path is refused; a file
 *    the target writes for us (perf map, jitdump, socket) must be owned by
 *    the target's effective user, so a link or mount to a host file owned by
 *    someone else is refused.
 * A refused open returns a negative errno (-ELOOP, -EXDEV, -EPERM,
 * -EINVAL...) and writes a one-line reason that names the path and why,
 * for a [Profiling skipped: ...] status.
 */
#ifndef POLYPROF_KIT_TARGET_FILES_H
#define POLYPROF_KIT_TARGET_FILES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the file must be (flags of pp_target_open). A regular file opened
 * without an identity must be owned by the target's effective uid unless
 * PP_TF_ANY_OWNER says otherwise; a directory only with PP_TF_OWNED. */
#define PP_TF_OWNED 1u     /* owned by the target's effective uid */
#define PP_TF_DIR 2u       /* a directory (O_RDONLY | O_DIRECTORY) instead of a regular file */
#define PP_TF_ANY_OWNER 4u /* a regular file without identity whose owner does not matter */
/* A regular file without identity that the target itself may read, whoever
 * owns it (a debug file in its root): readable by its effective uid (0:
 * any file), its effective gid, or anyone, by the file's mode. Checked
 * before the file is opened, so a mount or link of a file the target could
 * not read (a root-only host file) is refused without being opened. */
#define PP_TF_READABLE 8u

/* Identity of a file the target maps, from its /proc/PID/maps line. */
struct pp_file_id {
  uint32_t dev_major, dev_minor;
  uint64_t inode;
};

/* Opens `path`, as process `pid` sees it, read-only (O_CLOEXEC |
 * O_NONBLOCK), inside the process's root. flags: PP_TF_*. `id` (optional):
 * the file must be this inode. *st (optional) gets its stat. Returns the fd
 * or -errno; reason (optional, cap bytes) says why it was refused. */
int pp_target_open(uint32_t pid, const char *path, unsigned flags, const struct pp_file_id *id,
                   struct stat *st, char *reason, size_t cap);

/* Opens a file the target maps, the mapping's [start, end) given: through
 * its path in the target's root with the identity check, else (deleted,
 * replaced, hidden by a mount, an overlay whose path shows another inode)
 * through /proc/PID/map_files, which is that mapping's own file. */
int pp_target_open_mapped(uint32_t pid, const char *path, const struct pp_file_id *id,
                          uint64_t start, uint64_t end, char *reason, size_t cap);

/* Connects a new unix stream socket to the socket at `path` in the target's
 * root, which must be a socket owned by the target's effective uid (the
 * check the runtimes' own tools make). The connect does not block: a
 * process that accepts nothing now (listen queue full) gives -EAGAIN. The
 * returned socket is blocking. Returns the connected fd or -errno. */
int pp_target_connect_unix(uint32_t pid, const char *path, char *reason, size_t cap);

/* The same checks as pp_target_connect_unix, without connecting: an O_PATH
 * descriptor of the socket, for a caller that must connect with other
 * credentials than its own (a runtime that accepts only its own user as a
 * peer, where that user could not resolve the path itself): connect to
 * "/proc/self/fd/N" once the credentials are switched. Returns it or -errno. */
int pp_target_socket(uint32_t pid, const char *path, char *reason, size_t cap);

/* Opens a host path read-only, for the file of a process that is gone (its
 * root went with it): only a regular file, looked up without following a
 * final link (an O_PATH handle: no FIFO wait, no device open), and, with
 * `same`, only that very inode (st_dev and st_ino: what the process had
 * mapped). *st (optional) gets its stat. Returns the fd, -EINVAL (not a
 * regular file), -ESTALE (another inode) or -errno. */
int pp_open_host_file(const char *path, const struct stat *same, struct stat *st);

/* The target's effective uid and gid as the agent sees them (host ids). */
int pp_target_ids(uint32_t pid, uid_t *uid, gid_t *gid);

/* Component-by-component open beneath dirfd refusing links, "." and "..",
 * and anything but a regular file (the walk pp_target_open falls back to).
 * Returns the fd or -errno. */
int pp_open_beneath(int dirfd, const char *path);

#ifdef __cplusplus
}
#endif

#endif
