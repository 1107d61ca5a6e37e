"""Helpers of the profile-type tests (standard library only): one runtime
plugin alone (perf-less), a workload whose sleeper and burner functions are
known, the agent run once per --mode."""
import glob
import os
import subprocess
import time

import perfutil
import pputil as u

WORKLOADS = os.path.join(u.SRC, "tests", "workloads", "modes")


def start(cmd):
    """Starts the workload and waits for its "ready" line."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    if "ready" not in line:
        u.kill(p)
        raise RuntimeError("workload did not start: %r" % line)
    time.sleep(0.5)
    return p


def profile(plugin_so, mode, *extra, duration=4):
    """The .col of a run of the agent with only plugin_so, --mode mode:
    (returncode, stderr, header, stacks)."""
    plugins = u.plugin_dir_with(plugin_so)
    out = u.tempdir("ppmode-out-")
    r = u.run_agent(out, plugins, "--mode", mode, *extra, duration=duration, timeout=180)
    cols = sorted(glob.glob(os.path.join(out, "profile_*.col")))
    header, stacks = u.parse_col(cols[-1]) if cols else (None, [])
    return r.returncode, r.stderr, header, stacks


def weight(stacks, pid_marker, fn):
    """Samples of stacks holding a frame whose name starts with fn, in the
    process whose line holds pid_marker (its script path)."""
    return sum(c for f, c in stacks
               if any(pid_marker in x for x in f) and any(x.split(" ")[0] == fn or
                                                          x.startswith(fn + " ") for x in f[3:]))


def weight_in(stacks, comm, text):
    """Samples of the stacks of processes named comm holding a frame that
    contains text (runtimes whose frames carry a signature: "Cls.fn()V")."""
    return sum(c for f, c in stacks if f[2:3] == [comm] and any(text in x for x in f[3:]))


def check_wall_and_cpu(plugin_so, cmd, marker, sleeper, burner, *extra, comm=None, pids=False):
    """--mode wall: both functions; --mode cpu: the burner, the sleeper at
    most a sliver. comm: match frames containing sleeper/burner in the
    processes named comm (instead of marker and the function name);
    pids: profile the workload's pid only (--pids)."""
    def w(stacks, fn):
        return weight_in(stacks, comm, fn) if comm else weight(stacks, marker, fn)

    p = start(cmd)
    if pids:
        extra = extra + ("--pids", str(p.pid))
    try:
        rc, err, header, stacks = profile(plugin_so, "wall", *extra)
        print(err[-1500:])
        u.check(rc == 0 and header is not None, "wall: agent exits 0 with a profile")
        u.check(header and header.get("profile_type") == "wall", "wall: header says wall")
        ws, wb = w(stacks, sleeper), w(stacks, burner)
        print("wall: %s %d, %s %d" % (sleeper, ws, burner, wb))
        u.check(ws > 0 and wb > 0, "wall: sleeper (%d) and burner (%d) both" % (ws, wb))
        u.check(ws >= 0.3 * wb, "wall: the sleeper weighs like a thread that exists all along")
        rc, err, header, stacks = profile(plugin_so, "cpu", *extra)
        u.check(rc == 0 and header is not None, "cpu: agent exits 0 with a profile")
        cs, cb = w(stacks, sleeper), w(stacks, burner)
        print("cpu: %s %d, %s %d" % (sleeper, cs, burner, cb))
        u.check(cb > 0, "cpu: the burner (%d)" % cb)
        # a runtime's on-CPU test may catch the sleeper as it wakes every 50 ms
        u.check(cs <= 0.25 * max(cb, 1), "cpu: the sleeper far below the burner (%d)" % cs)
    finally:
        u.kill(p)


def check_offcpu_runtime(runtime_so, cmd, comm, sleeper, burner, mark, *extra):
    """--mode cpu,offcpu with perf and one runtime plugin on --pids of the
    workload: its off-CPU time is the runtime's stacks (no kernel frame, as
    perf's native ones have; some frame containing mark, "_[php]" or the
    script's name), the sleeper holds some of it, the burner little."""
    import perfutil  # noqa: E402 - only the off-CPU checks need perf
    perfutil.require_perf()
    p = start(cmd)
    try:
        plugins = u.plugin_dir_with(perfutil.PLUGIN, runtime_so)
        out = u.tempdir("ppmode-offrt-")
        r = u.run_agent(out, plugins, "--mode", "cpu,offcpu", "--pids", str(p.pid), *extra,
                        duration=4, timeout=180)
        col = os.path.join(out, "last_profile.offcpu.col")
        u.check(r.returncode == 0 and os.path.exists(col), "offcpu: agent exits 0 with a profile")
        if not os.path.exists(col):
            print(r.stderr[-2000:])
            return
        _, stacks = u.parse_col(col)
        mine = [(f, c) for f, c in stacks if f[2:3] == [comm]]
        total = sum(c for f, c in mine)
        rt = sum(c for f, c in mine if not any(x.endswith("_[k]") for x in f))
        marked = sum(c for f, c in mine
                     if any(mark in x and not x.startswith("appid:") for x in f[3:]))
        ws, wb = weight_in(mine, comm, sleeper), weight_in(mine, comm, burner)
        print("offcpu: %d us, %d without kernel frames, %d with %s frames; %s %d, %s %d" % (
            total, rt, marked, mark, sleeper, ws, burner, wb))
        u.check(total > 0 and rt == total and marked > 0,
                "offcpu: the runtime's stacks in place of perf's native ones")
        u.check(ws > 0 and wb <= 0.25 * ws, "offcpu: the sleeper, the burner far below it")
    finally:
        u.kill(p)


def check_offcpu_split(plugin_so, cmd, script, suffix, runtime):
    """--mode cpu,offcpu with perf and one runtime plugin on a workload
    (block_3to1.<ext>) whose thread blocks 3:1 in wait_long and wait_short:
    every off-CPU stack of the process carries the runtime's frames (the
    plugin's stacks of blocked threads replace perf's native ones), and
    wait_long holds 75 % (+-5 points) of the two functions' blocked time."""
    p = start(cmd)
    try:
        out = u.tempdir("ppmode-off-")
        r = u.run_agent(out, u.plugin_dir_with(perfutil.PLUGIN, plugin_so), "--mode", "cpu,offcpu",
                        "-f", "97", duration=6, timeout=180)
        print(r.stderr[-2000:])
        u.check(r.returncode == 0, "agent exits 0")
        col = os.path.join(out, "last_profile.offcpu.col")
        u.check(os.path.exists(col), "offcpu profile written")
        header, stacks = u.parse_col(col) if os.path.exists(col) else ({}, [])
        mine = [(f, c) for f, c in stacks if f[2:3] == ["block3to1"]]
        own = sum(c for f, c in mine if any(x.endswith(suffix) for x in f))
        total = sum(c for f, c in mine)
        print("block_3to1 off-CPU: %d us, %d us with %s frames" % (total, own, runtime))
        u.check(total > 0 and own == total,
                "every off-CPU stack of the process is %s's: perf's native ones replaced" % runtime)
        lng = weight(mine, script, "wait_long")
        sht = weight(mine, script, "wait_short")
        share = 100.0 * lng / max(lng + sht, 1)
        print("wait_long %d us, wait_short %d us: %.1f %%" % (lng, sht, share))
        u.check(lng + sht > 0 and abs(share - 75) <= 5, "wait_long's share 75 +-5 (%.1f)" % share)
        header, stacks = u.parse_col(os.path.join(out, "last_profile.col"))
        u.check(header["profile_type"] == "cpu", "the cpu profile is still written")
    finally:
        u.kill(p)
