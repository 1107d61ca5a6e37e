/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The perf-map files a runtime writes because the plugin asked it to
 * (EnablePerfMap): /tmp/perf-<nspid>.map and, on .NET 8,
 * /tmp/perfinfo-<nspid>.map (its image loads), in the target's root. The runtime removes
 * neither, at DisablePerfMap or at exit, so without this a host running
 * many short .NET processes would collect one file per process. Only the
 * files polyprof caused are removed: never those of a process started with
 * DOTNET_PerfMapEnabled / COMPlus_PerfMapEnabled (it writes them itself),
 * never one that was there before EnablePerfMap.
 *
 * The agent is root and the target's /tmp is the target's to change, so:
 * the directory is opened once, inside the target's root (the kit), before
 * EnablePerfMap, and that descriptor is what every later look and the
 * removal go through (no path is resolved again, the target's exit and
 * its mount namespace's end do not matter); a file is recorded (device,
 * inode) when it appears, only if it is a regular file owned by the
 * target's effective uid; at removal it must still be that very inode,
 * looked at without following a link, before unlinkat removes the name.
 * A link or anything else planted at the name is left as it is, and a
 * link is never followed (unlinkat removes a name, never what it points
 * at). /tmp is sticky: removing another user's file from a /tmp that root
 * does not own (a container's) needs CAP_FOWNER, raised for the unlinkat
 * alone (PP_CAP_STEP_FILE_OWNER), with CAP_DAC_OVERRIDE too when the
 * directory is one only its owner may write; neither where not needed.
 *
 * When: perf names a process's JIT frames from the map, re-read whenever
 * an address is not in its copy, as it drains its ring buffers (every
 * 100 ms), for samples of a process that has exited too (a host process's
 * map is then read from the host's /tmp). So a map is kept while its
 * process lives and the agent runs, and removed:
 *  - after the process exited (or exec'd into something else): the plugin
 *    releases it at the end of the session in which it exited, and the
 *    files go REMOVE_GRACE_NS after that, when perf has drained and named
 *    that session's last samples (its snapshot runs beside ours);
 *  - when the plugin stops (agent stop, reload) for a live process, after
 *    DisablePerfMap: the core stops plugins only after the last session's
 *    profile was written, so perf has named everything.
 * A worker that is killed removes nothing: those files stay, as before.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dotnet.h"
#include "polyprof/kit/cap_step.h"
#include "polyprof/kit/target_files.h"

#define REMOVE_GRACE_NS 2000000000ull
#define SWEEP_EVERY_NS 500000000ull /* released processes looked at (a /proc read each) */
/* processes whose files wait for removal at once: a busy build host's
 * short processes of one session (each holds its /tmp open; the worker's
 * descriptor limit is raised to the hard limit, up to 65536) */
#define MAX_RECORDS 4096

static const char *const map_prefixes[DOTNET_MAPFILES] = {"perf", "perfinfo"};

static void file_name(const struct dotnet_mapfiles *mf, int i, char *out, size_t cap) {
  snprintf(out, cap, "%s-%u.map", map_prefixes[i], mf->nspid);
}

/* Whether the process was started with the runtime's own perf map on
 * (DOTNET_PerfMapEnabled or COMPlus_PerfMapEnabled, non-zero): then its
 * files are its own. An environment that cannot be read whole counts as
 * set: a file is only removed when it is known to be ours. */
static bool writes_its_own_map(uint32_t pid) {
  static char env[262144];
  char path[64];
  size_t n = 0;
  snprintf(path, sizeof(path), "/proc/%u/environ", pid);
  if (pp_read_file(path, env, sizeof(env), &n) < 0 || n >= sizeof(env) - 1) return true;
  for (char *p = env; p < env + n; p += strlen(p) + 1) {
    const char *v = NULL;
    if (strncmp(p, "DOTNET_PerfMapEnabled=", 22) == 0) v = p + 22;
    if (strncmp(p, "COMPlus_PerfMapEnabled=", 23) == 0) v = p + 23;
    if (!v) continue;
    /* the runtime reads its DWORD settings in hex; anything unparsable
     * is taken as on */
    char *end = NULL;
    unsigned long x = strtoul(v, &end, 16);
    if (!*v || *end || x != 0) return true;
  }
  return false;
}

static struct dotnet_mapfiles *find(struct dotnet_state *st, uint32_t pid, uint64_t start_time) {
  for (size_t i = 0; i < st->n_mapfiles; i++)
    if (st->mapfiles[i]->pid == pid && st->mapfiles[i]->start_time == start_time)
      return st->mapfiles[i];
  return NULL;
}

static void drop(struct dotnet_state *st, size_t i) {
  struct dotnet_mapfiles *mf = st->mapfiles[i];
  if (mf->tmp >= 0) close(mf->tmp);
  free(mf);
  st->mapfiles[i] = st->mapfiles[--st->n_mapfiles];
}

struct dotnet_mapfiles *dotnet_mapfiles_before_enable(struct dotnet_state *st, uint32_t pid,
                                                      uint32_t nspid, uint64_t start_time) {
  struct dotnet_mapfiles *mf = find(st, pid, start_time);
  if (mf) { /* attached again (an exec, a retry): what was ours stays ours */
    mf->released = false;
    return mf;
  }
  if (st->n_mapfiles >= MAX_RECORDS) {
    PP_INFO(st->host, "pid %u: %u processes' perf maps already wait for removal: this one's stays",
            pid, MAX_RECORDS);
    return NULL;
  }
  if (writes_its_own_map(pid)) {
    PP_INFO(st->host, "pid %u: started with its perf map on (PerfMapEnabled): its files are left",
            pid);
    return NULL;
  }
  char why[256] = "";
  int tmp = pp_target_open(pid, "/tmp", PP_TF_DIR, NULL, NULL, why, sizeof(why));
  uid_t uid = 0;
  gid_t gid = 0;
  if (tmp < 0 || pp_target_ids(pid, &uid, &gid) < 0) {
    PP_INFO(st->host, "pid %u: its perf map will stay in its /tmp: %s", pid,
            why[0] ? why : "its ids cannot be read");
    if (tmp >= 0) close(tmp);
    return NULL;
  }
  mf = calloc(1, sizeof(*mf));
  struct dotnet_mapfiles **v =
      mf ? realloc(st->mapfiles, (st->n_mapfiles + 1) * sizeof(*st->mapfiles)) : NULL;
  if (!v) {
    free(mf);
    close(tmp);
    return NULL;
  }
  st->mapfiles = v;
  st->mapfiles[st->n_mapfiles++] = mf;
  *mf = (struct dotnet_mapfiles){
      .tmp = tmp, .uid = uid, .pid = pid, .nspid = nspid, .start_time = start_time};
  for (int i = 0; i < DOTNET_MAPFILES; i++) {
    char name[48];
    struct stat sb;
    file_name(mf, i, name, sizeof(name));
    /* whatever is at the name already (a file, a link) is not ours */
    mf->f[i].ours = fstatat(tmp, name, &sb, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT;
    if (!mf->f[i].ours)
      PP_INFO(st->host, "pid %u: /tmp/%s was there before its perf map was enabled: it is left",
              pid, name);
  }
  return mf;
}

void dotnet_mapfiles_note(struct dotnet_state *st, struct dotnet_mapfiles *mf) {
  if (!mf) return;
  for (int i = 0; i < DOTNET_MAPFILES; i++) {
    struct dotnet_mapfile *f = &mf->f[i];
    if (!f->ours || f->seen) continue;
    char name[48];
    struct stat sb;
    file_name(mf, i, name, sizeof(name));
    if (fstatat(mf->tmp, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) continue; /* not yet */
    f->seen = true;
    if (!S_ISREG(sb.st_mode) || sb.st_uid != mf->uid) {
      /* not what the runtime writes: planted, left alone */
      f->ours = false;
      PP_INFO(st->host, "pid %u: /tmp/%s is not a regular file of uid %u: it is left", mf->pid,
              name, (unsigned)mf->uid);
      continue;
    }
    f->dev = sb.st_dev;
    f->ino = sb.st_ino;
  }
}

/* The capabilities removing a name of `file_uid` from the directory takes
 * (the kernel's rules, for our euid): write and search on the directory
 * (CAP_DAC_OVERRIDE where its mode does not give them: a /tmp only its
 * owner may write), and, the directory being sticky, owning the file or
 * the directory (CAP_FOWNER otherwise: the host's /tmp is root's, a
 * container's tmpfs /tmp is not). */
static uint64_t removal_needs(int dir, uid_t file_uid) {
  struct stat sb;
  if (fstat(dir, &sb) != 0) return PP_CAP_NEEDS_FILE_OWNER | PP_CAP_NEEDS_FILE_OVERRIDE;
  uid_t me = geteuid();
  mode_t wx = sb.st_uid == me ? S_IWUSR | S_IXUSR : S_IWOTH | S_IXOTH;
  uint64_t needs = 0;
  if ((sb.st_mode & wx) != wx) needs |= PP_CAP_NEEDS_FILE_OVERRIDE;
  if ((sb.st_mode & S_ISVTX) && sb.st_uid != me && file_uid != me) needs |= PP_CAP_NEEDS_FILE_OWNER;
  return needs;
}

static void remove_files(struct dotnet_state *st, struct dotnet_mapfiles *mf) {
  dotnet_mapfiles_note(st, mf); /* written after the last look */
  for (int i = 0; i < DOTNET_MAPFILES; i++) {
    struct dotnet_mapfile *f = &mf->f[i];
    if (!f->ours || !f->seen) continue;
    char name[48];
    struct stat sb;
    file_name(mf, i, name, sizeof(name));
    if (fstatat(mf->tmp, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) continue; /* gone already */
    if (!S_ISREG(sb.st_mode) || sb.st_uid != mf->uid || sb.st_dev != f->dev ||
        sb.st_ino != f->ino) {
      PP_INFO(st->host, "pid %u: /tmp/%s is no longer the file its runtime wrote: it is left",
              mf->pid, name);
      continue;
    }
    struct pp_cap_step step;
    pp_cap_step_begin(&step, removal_needs(mf->tmp, sb.st_uid));
    int rc = unlinkat(mf->tmp, name, 0);
    pp_cap_step_end(&step);
    if (rc == 0)
      PP_DEBUG(st->host, "pid %u: /tmp/%s removed", mf->pid, name);
    else if (errno != ENOENT)
      PP_WARNING(st->host, "pid %u: cannot remove /tmp/%s from its root: %s", mf->pid, name,
                 strerror(errno));
  }
}

void dotnet_mapfiles_release(struct dotnet_mapfiles *mf) {
  if (!mf || mf->released) return;
  mf->released = true;
  mf->released_ns = pp_clock_ns();
}

void dotnet_mapfiles_sweep(struct dotnet_state *st, bool all) {
  uint64_t now = pp_clock_ns();
  if (!all && now - st->mapfiles_swept_ns < SWEEP_EVERY_NS) return;
  st->mapfiles_swept_ns = now;
  for (size_t i = st->n_mapfiles; i-- > 0;) {
    struct dotnet_mapfiles *mf = st->mapfiles[i];
    if (!all && (!mf->released || now - mf->released_ns < REMOVE_GRACE_NS)) continue;
    uint64_t start = 0;
    bool taken = pp_proc_start_time(mf->pid, &start) == 0;
    bool same = taken && start == mf->start_time;
    /* a process that lives on in another image may still be profiled by
     * perf from this map (an exec into another .NET program rewrites the
     * same file): kept until it exits or the plugin stops */
    if (!all && same) continue;
    if (taken && !same) {
      /* the pid went to another process, whose runtime may have opened
       * (and truncated, same inode) the name the first one used */
      PP_INFO(st->host, "pid %u: another process has that pid now: /tmp/perf-%u.map is left",
              mf->pid, mf->nspid);
    } else {
      remove_files(st, mf);
    }
    drop(st, i);
  }
  if (all) {
    free(st->mapfiles);
    st->mapfiles = NULL;
  }
}
