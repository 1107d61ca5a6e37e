"""The agent end to end with the example plugin against real processes.

A sleeping process and a busy one are profiled for one short session; the
.col must show the sleeper blocked in the kernel's nanosleep and the busy
process running, with gProfiler's line layout and header, and the HTML and
symlinks must be there.
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402

example = os.path.join(u.PLUGIN_DIR, "example.so")
if not os.path.exists(example):
    u.skip("example plugin not built: " + example)

plugins = u.plugin_dir_with(example)
out = u.tempdir("ppout-")
sleeper = u.spawn(["sleep", "300"])
busy = u.spawn([sys.executable, "-c", "import sys\nwhile True: pass"])
try:
    time.sleep(0.3)
    r = u.run_agent(out, plugins, "--example-mode", "states", "--pids", "%d,%d" % (sleeper.pid, busy.pid), "-f", "20",
                    duration=3)
    u.check(r.returncode == 0, "agent exits 0 (got %d; stderr: %s)" % (r.returncode, r.stderr[-2000:]))
    col = os.path.join(out, "last_profile.col")
    html = os.path.join(out, "last_flamegraph.html")
    u.check(os.path.islink(col) and os.path.exists(col), "last_profile.col is a symlink to a file")
    u.check(os.path.islink(html) and os.path.exists(html), "last_flamegraph.html is a symlink to a file")
    u.check(os.readlink(col).startswith("profile_") and os.readlink(col).endswith(".col"),
            "symlink points at profile_<time>.col")
    header, stacks = u.parse_col(col)
    u.check(header is not None, "line 0 is a JSON header")
    keys = list(header.keys()) if header else []
    want = ["containers", "container_names_enabled", "metadata", "metrics", "application_metadata",
            "application_metadata_enabled", "profiling_mode"]
    u.check(keys[:len(want)] == want, "header keys in gProfiler order: %s" % keys[:len(want)])
    u.check(header and header["application_metadata"][0] is None, "application_metadata[0] is null")

    sleep_lines = [(f, c) for f, c in stacks if len(f) >= 3 and f[2] == "sleep"]
    u.check(any("[thread-state S]" in f and "hrtimer_nanosleep_[k]" in f for f, _ in sleep_lines),
            "sleeper shows [thread-state S];hrtimer_nanosleep_[k]: %s" % sleep_lines)
    with open("/proc/%d/comm" % busy.pid) as f:
        busy_comm = f.read().strip()
    busy_lines = [(f, c) for f, c in stacks if len(f) >= 3 and f[2] == busy_comm]
    running = sum(c for f, c in busy_lines if f[-1] == "[thread-state R]")
    total_busy = sum(c for _, c in busy_lines)
    # 20 Hz for ~3 s: about 60 observations, nearly all running
    u.check(total_busy >= 30, "busy process observed %d times (>= 30)" % total_busy)
    u.check(running >= 0.8 * max(total_busy, 1), "busy process mostly running (%d of %d)" % (running, total_busy))
    for f, c in stacks:
        if not f[0].isdigit():
            u.check(False, "line starts with an app-metadata index: %s" % f)
            break
    # application metadata set by the plugin ends up in the header table
    idx = int(sleep_lines[0][0][0]) if sleep_lines else 0
    meta = header["application_metadata"][idx] if header and idx < len(header["application_metadata"]) else None
    u.check(isinstance(meta, dict) and meta.get("example_threads") == 1,
            "sleeper's metadata carries example_threads=1: %s" % meta)
    u.check("polyprof" in header and "example" in header["polyprof"],
            "header has per-plugin stats: %s" % header.get("polyprof"))
    pids_seen = {f[2] for f, _ in stacks}
    u.check(pids_seen <= {"sleep", busy_comm}, "--pids restricts the profile: %s" % pids_seen)
    with open(html, encoding="utf-8") as f:
        page = f.read()
    u.check("hrtimer_nanosleep" in page, "flame graph embeds the frames")
finally:
    u.kill(sleeper)
    u.kill(busy)
u.finish()
