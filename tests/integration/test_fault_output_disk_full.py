"""Fault: the disk holding the output directory fills up, then space frees.

The output directory is a 1 MiB tmpfs (room for about 20 sessions of this
test, so the disk is full only while the test wants it). After the first
session a filler file takes all of it but 16 KiB, so a small .col may still fit while the
flame graph does not: the write fails half-way (ENOSPC).

Expected (docs/operations.md, "Failure behaviour"): an error naming the
file, the directory and "No space left on device"; no partial or temp file
is ever visible (writes go to a temp name and are renamed only when
complete); the refused files are kept in memory and written, in order, at
the first session after the filler is removed; in the end every session
the agent logged is on disk with exactly its samples and every flame graph
is complete; the agent never dies and exits 0.
"""
import errno
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import faultutil as fu  # noqa: E402
import pputil as u  # noqa: E402

if os.geteuid() != 0:
    u.skip("needs root to mount a small tmpfs")
plugin = os.path.join(u.TEST_PLUGIN_DIR, "ta_ok.so")
if not os.path.exists(plugin):
    u.skip("test plugin not built: " + plugin)
plugins = u.plugin_dir_with(plugin)


def fill(path, leave):
    """Writes path until the filesystem is full, then gives back `leave` bytes."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    size = 0
    try:
        while True:
            size += os.write(fd, b"\0" * 4096)
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
    finally:
        os.close(fd)
    os.truncate(path, max(0, size - leave))


def complete_html(path):
    with open(path, "rb") as f:
        f.seek(-64, os.SEEK_END)
        return b"</html>" in f.read()


fs = fu.Tmpfs("1m")
filler = os.path.join(fs.path, "filler")
catter = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
agent = None
partial_seen = []
try:
    agent = fu.Agent(fs.path, plugins, "", "--pids", str(catter.pid), duration=2)
    u.check(agent.wait_sessions(1), "first session ran")
    fill(filler, 16 * 1024)
    u.check(agent.wait_log("No space left on device; kept in memory"), "a refused file is logged")
    n = len(agent.session_lines())
    deadline = time.time() + 60
    while time.time() < deadline and len(agent.session_lines()) < n + 2:
        # readers must never see a partial file: every visible .col is whole
        for p in fu.cols(fs.path):
            try:
                u.parse_col(p)
            except Exception as e:  # truncated JSON header or count
                partial_seen.append("%s: %s" % (p, e))
        time.sleep(0.1)
    u.check(partial_seen == [], "no partial .col ever visible while full: %s" % partial_seen[:2])
    u.check(fu.leftovers(fs.path) == [], "no temp file left while full: %s" % fu.leftovers(fs.path))
    full_lines = [l for l in agent.log().splitlines() if "not written" in l]
    u.check(full_lines and all(fs.path in l and "No space left on device" in l for l in full_lines),
            "every error names the directory and the cause: %s" % full_lines[:1])
    os.unlink(filler)
    n = len(agent.session_lines())
    u.check(agent.wait_log("takes files again"), "recovery is logged once space is free")
    u.check(agent.wait_sessions(n + 2), "two more sessions ran")
    u.check(agent.alive(), "the agent never died")
    rc = agent.stop()
    u.check(rc == 0, "agent exit 0 on SIGTERM (got %s)" % rc)

    totals = fu.session_totals(agent.log())
    files = fu.cols(fs.path)
    u.check(len(files) == len(totals), "every session is on disk: %d files for %d sessions"
            % (len(files), len(totals)))
    u.check([fu.col_total(p) for p in files] == totals,
            "each .col has exactly the samples its session logged, in order")
    htmls = sorted(os.path.join(fs.path, n) for n in os.listdir(fs.path)
                   if n.startswith("profile_") and n.endswith(".html"))
    u.check(len(htmls) == len(totals) and all(complete_html(h) for h in htmls),
            "every flame graph is on disk and complete (%d)" % len(htmls))
    u.check(fu.leftovers(fs.path) == [], "no temp file left: %s" % fu.leftovers(fs.path))
finally:
    if agent:
        agent.kill()
    u.kill(catter)
    fs.umount()
u.finish()
