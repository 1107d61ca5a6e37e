"""Fault: the output directory becomes read-only, then writable again.

The output directory is a tmpfs of its own, remounted read-only after the
first session (root ignores mode bits, so only a read-only mount really
refuses it) and read-write again two sessions later.

Expected (docs/operations.md, "Failure behaviour"): each refused session
logs an error naming the file, the directory and "Read-only file system",
and is kept in memory (bounded by output.pending_max_bytes); the first
session after the directory is writable again writes every kept session,
in order, under its own name, then its own; at the end every session the
agent logged is on disk with exactly the samples it logged, last_profile.col
points at the newest, no temp file is left, and the agent exits 0.
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import faultutil as fu  # noqa: E402
import pputil as u  # noqa: E402

if os.geteuid() != 0:
    u.skip("needs root to mount a tmpfs and remount it read-only")
plugin = os.path.join(u.TEST_PLUGIN_DIR, "ta_ok.so")
if not os.path.exists(plugin):
    u.skip("test plugin not built: " + plugin)
plugins = u.plugin_dir_with(plugin)

fs = fu.Tmpfs("16m")
catter = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
agent = None
try:
    agent = fu.Agent(fs.path, plugins, "", "--pids", str(catter.pid), duration=2)
    u.check(agent.wait_sessions(1), "first session ran")
    u.check(fs.remount("ro"), "output directory remounted read-only")
    u.check(agent.wait_log("Read-only file system; kept in memory"), "a refused session is logged")
    u.check(agent.wait_sessions(3), "two sessions ran while read-only")
    refused = [l for l in agent.log().splitlines() if "not written" in l]
    u.check(refused and all(fs.path in l and "Read-only file system" in l and
                        (".col" in l or ".html" in l) for l in refused),
            "every error names the file, the directory and the cause: %s" % refused[:1])
    u.check(len(fu.cols(fs.path)) == 1, "nothing written while read-only")
    u.check(fs.remount("rw"), "output directory writable again")
    n_before = len(agent.session_lines())
    u.check(agent.wait_log("takes files again"), "recovery is logged")
    u.check(agent.wait_sessions(n_before + 2), "two more sessions ran")
    u.check(agent.alive(), "the agent never died")
    rc = agent.stop()
    u.check(rc == 0, "agent exit 0 on SIGTERM (got %s)" % rc)

    log = agent.log()
    totals = fu.session_totals(log)
    files = fu.cols(fs.path)
    u.check(len(files) == len(totals), "every session is on disk: %d files for %d sessions"
            % (len(files), len(totals)))
    u.check([fu.col_total(p) for p in files] == totals,
            "each file has exactly the samples its session logged, in order")
    htmls = [n for n in os.listdir(fs.path) if n.startswith("profile_") and n.endswith(".html")]
    u.check(len(htmls) == len(totals), "and every flame graph (%d)" % len(htmls))
    link = os.readlink(os.path.join(fs.path, "last_profile.col"))
    u.check(link == os.path.basename(files[-1]), "last_profile.col points at the newest (%s)" % link)
    u.check(fu.leftovers(fs.path) == [], "no temp file left: %s" % fu.leftovers(fs.path))
    u.check("lost" not in log, "nothing reported lost")
finally:
    if agent:
        agent.kill()
    u.kill(catter)
    fs.umount()
u.finish()
