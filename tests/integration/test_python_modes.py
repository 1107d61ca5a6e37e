"""python.mode against real processes: cpu, wall and gil, as in CPython's
profiling.sampling, plus 'disabled'.

For every interpreter found (pyenv 2.7, 3.6-3.13, Debian's static
python3) three busy workloads run together:
  split    three_parts and one_part do 3:1 of the same work: 75% +- 5 points
  threads  a busy thread and a sleeping one: the sleeper is in wall, not cpu
  gil      a busy thread holding the GIL and one reading /dev/zero in C
           without it: gil mode shows (almost) only the first, cpu both

cpu mode samples the threads that are in state R (running or runnable).
The thread in C is in R only while its read() runs: afterwards it sleeps
until the busy thread drops the GIL (sys.getswitchinterval(), 5 ms), so its
share of the cpu-mode samples is read time / (read time + GIL wait) against
the busy thread's ~100 %, which depends on the machine: ~17 % on the quiet
2-core CI host (16 MiB of /dev/zero take ~1.5 ms there), over 40 % when a
loaded host keeps both runnable. A fixed floor (it was 20 %) measured the
host, not the plugin. The expected share is measured instead, from the
threads' own scheduler accounting (/proc/PID/task/TID/schedstat: time on a
CPU + time waiting for one = time in R) over the profile, and the sampled
share must match it.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import pyutil as py  # noqa: E402

if not os.path.exists(py.PLUGIN):
    u.skip("python plugin not built: " + py.PLUGIN)
found = py.interpreters()
if not found:
    u.skip("no CPython found")
# every interpreter found: the modes read different structures per version
# (GIL state, tid lookup, frame chains), so a spread of them is not enough
chosen = found
print("interpreters: " + ", ".join(l for l, _, _ in chosen))


def r_time_ns(pid):
    """{tid: ns spent in state R (on a CPU or runnable)} of pid's threads."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                run, wait = f.read().split()[:2]
            out[int(tid)] = int(run) + int(wait)
        except (OSError, ValueError):
            pass
    return out


def count(stacks, script, fn):
    return sum(c for fr, c, _ in py.stacks_in(stacks, script) if any(n.endswith(fn) for n, _, _ in fr))


# Session lengths: 4 s at 200 Hz give the split ~800 samples (the binomial
# spread of a 75 % share is then ~1.5 points against the +-5 allowed) and
# 3 s at 100 Hz give the busy threads ~300 each; every second here is paid
# once per interpreter (ten in CI), so they are no longer than that.
for label, exe, ver in chosen:
    procs = []
    try:
        # the split runs alone: with other busy targets on a small loaded
        # machine, many samples see the same descheduled state and the
        # estimate gets noisy
        p, split_script = py.start(exe, "split")
        procs.append(p)
        # Up to three sessions: on an oversubscribed machine (load in the
        # hundreds was seen on the 2-CPU dev VM) a session can see only a
        # few scheduler slices of the target, whatever the sample count.
        for attempt in range(3):
            r, header, cpu_split, log = py.profile([p.pid], "--python-mode", "cpu", duration=4,
                                                   freq=200)
            three = count(cpu_split, split_script, "three_parts")
            one = count(cpu_split, split_script, "one_part")
            share = 100.0 * three / max(three + one, 1)
            if three + one >= 100 and 70 <= share <= 80:
                break
            print("note: attempt %d: %.1f%% of %d samples (load %.0f)"
                  % (attempt + 1, share, three + one, os.getloadavg()[0]))
        u.kill(p)
        u.check(three + one >= 100 and 70 <= share <= 80,
                "%s cpu: three_parts:one_part = %.1f%% (75 +- 5; %d samples)" % (label, share, three + one))

        scripts = {}
        for case in ("threads", "gil"):
            p, script = py.start(exe, case, wait=False)
            procs.append(p)
            scripts[case] = script
        py.wait_ready(procs[1:])
        pids = [p.pid for p in procs[1:]]
        res = {}
        gil_pid = procs[2].pid
        for mode in ("cpu", "wall", "gil"):
            before = r_time_ns(gil_pid)
            r, header, stacks, log = py.profile(pids, "--python-mode", mode, duration=3, freq=100)
            if mode == "cpu":
                after = r_time_ns(gil_pid)
                delta = {t: after[t] - before.get(t, 0) for t in after}
                # the main thread runs busy_thread, the other one the C call
                r_main = delta.get(gil_pid, 0)
                r_c = sum(v for t, v in delta.items() if t != gil_pid)
                expect_c = 100.0 * r_c / max(r_main + r_c, 1)
            u.check(r.returncode == 0 and header is not None, "%s %s: agent ran (rc %d)"
                    % (label, mode, r.returncode))
            res[mode] = stacks
        cpu, wall, gil = res["cpu"], res["wall"], res["gil"]

        busy_c = count(cpu, scripts["threads"], "busy_thread")
        sleep_c = count(cpu, scripts["threads"], "sleeper_thread")
        busy_w = count(wall, scripts["threads"], "busy_thread")
        sleep_w = count(wall, scripts["threads"], "sleeper_thread")
        # a woken thread that waits for a CPU is runnable (R) too: on a loaded
        # machine the sleeper shows up a little in cpu mode, never as in wall
        u.check(busy_c >= 40 and sleep_c <= 0.25 * busy_c,
                "%s cpu: sleeping thread absent (%d sleeper vs %d busy)" % (label, sleep_c, busy_c))
        u.check(busy_w >= 40 and sleep_w >= 0.6 * busy_w,
                "%s wall: sleeping thread present (%d sleeper vs %d busy)" % (label, sleep_w, busy_w))

        py_g = count(gil, scripts["gil"], "busy_thread")
        c_g = count(gil, scripts["gil"], "c_call_thread")
        py_c = count(cpu, scripts["gil"], "busy_thread")
        c_c = count(cpu, scripts["gil"], "c_call_thread")
        u.check(py_g >= 10 and c_g <= 0.15 * (py_g + c_g),
                "%s gil: only the GIL holder (%d busy vs %d in C)" % (label, py_g, c_g))
        share_c = 100.0 * c_c / max(py_c + c_c, 1)
        print("%s cpu: thread in C %.1f%% of samples, %.1f%% of the time in R by schedstat "
              "(load %.1f)" % (label, share_c, expect_c, os.getloadavg()[0]))
        u.check(c_c > 0 and py_c > 0 and abs(share_c - expect_c) <= 10,
                "%s cpu: the thread in C is sampled as much as it is in R: %.1f%% of %d samples "
                "vs %.1f%% by schedstat (+-10)" % (label, share_c, py_c + c_c, expect_c))
    finally:
        for p in procs:
            u.kill(p)

# disabled: the plugin is not started, no python stacks (with no other
# plugin enabled the agent then refuses to run, which is fine here)
label, exe, ver = chosen[-1]
p, script = py.start(exe, "split")
try:
    for flags in (["--python-mode", "disabled"], ["--no-python"]):
        r, header, stacks, log = py.profile([p.pid], *flags, duration=2)
        u.check("python: disabled" in log + r.stderr, "%s: python reported disabled" % " ".join(flags))
        u.check(not py.stacks_in(stacks, script), "%s: no python stacks" % " ".join(flags))
        u.check("sampling Python processes" not in log, "%s: sampler not started" % " ".join(flags))
finally:
    u.kill(p)
u.finish()
