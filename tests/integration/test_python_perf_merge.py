"""Python stacks merged with perf's, end to end.

perf samples every process natively; for the Python pids the python
plugin's stacks replace perf's native ones, scaled to perf's sample count
(docs/plugin-sdk.md, the merge rule). A busy Python process of every
interpreter found must therefore show Python frames only, with about perf's
count (frequency x the CPU it got), while a non-Python busy process keeps
its native perf stacks.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import pyutil as py  # noqa: E402

perf = os.path.join(u.PLUGIN_DIR, "perf.so")
if not os.path.exists(py.PLUGIN):
    u.skip("python plugin not built: " + py.PLUGIN)
if not os.path.exists(perf):
    u.skip("perf plugin not in this tree yet (%s): the merge cannot be tested" % perf)
found = py.interpreters()
if not found:
    u.skip("no CPython found")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# one busy target per interpreter found: each reads its own structures
targets = []
other = None
try:
    for label, exe, ver in found:
        p, script = py.start(exe, "nested", wait=False)
        targets.append((label, exe, p, script))
    py.wait_ready([t[2] for t in targets])
    other = u.spawn(["sh", "-c", "while :; do :; done"])
    out = u.tempdir("ppout-")
    plugins = u.plugin_dir_with(py.PLUGIN, perf)
    # perf counts CPU time, so the expected count follows the CPU each target
    # really got during the run (a loaded CI host gives it far less than the
    # session's length, and a dozen busy targets share two CPUs).
    pids = [t[2].pid for t in targets]
    cpu_before = {pid: cpu_seconds(pid) for pid in pids}
    r = u.run_agent(out, plugins, "--pids", ",".join(str(x) for x in pids + [other.pid]), "-f",
                    "100", duration=5, timeout=180)
    cpu_run = {pid: cpu_seconds(pid) - cpu_before[pid] for pid in pids}
    u.check(r.returncode == 0, "agent with perf and python exits 0 (%s)" % r.stderr[-800:])
    header, stacks = u.parse_col(os.path.join(out, "last_profile.col"))
    for label, exe, p, script in targets:
        mine = py.stacks_in(stacks, script)
        total = sum(c for _, c, _ in mine)
        # The CPU window includes the agent's start-up and shutdown, when
        # perf is not sampling yet, hence the loose lower bound. The upper
        # bound rules out python's own sample count leaking through: cpu
        # mode also counts runnable-but-waiting time, which perf never sees.
        expect = cpu_run[p.pid] * 100
        u.check(5 <= total and 0.3 * expect <= total <= 1.2 * expect + 5,
                "%s: python stacks carry perf's counts (%d samples for %.2f s of CPU at 100 Hz)"
                % (label, total, cpu_run[p.pid]))
    comms = {os.path.basename(exe)[:15] for _, exe, _, _ in targets}
    native_left = [f for f, c in stacks if f[2] in comms and not any(x.endswith("_[p]") for x in f)]
    u.check(not native_left, "no native-only perf stack left for the python pids: %s"
            % native_left[:2])
    u.check(any(f[2] == "sh" for f, _ in stacks), "the shell loop keeps perf's native stacks")
finally:
    for t in targets:
        u.kill(t[2])
    if other:
        u.kill(other)
u.finish()
