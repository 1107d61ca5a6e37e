"""--python-async-aware: asyncio task chains in the stacks.

tests/workloads/python/async_chain.py runs three tasks in a 3:1:0 CPU
split: "hot" (3 units a turn), "warm" (1 unit), "idle" (awaits hot), and
the main task "main" awaits warm. On every CPython with the C Task the
plugin reads (3.11-3.13: pyenv and Debian's), all at once, one cpu-mode
session: each running task's stack shows, root first, the loop's
Handle._run, the awaiting task with its coroutine frame at the line of
its await, then the running task and its frames:
  ...;Handle._run;<task: idle>;idle_wait (:IDLE_AWAIT);<task: hot>;hot_loop;spin
  ...;Handle._run;<task: main>;main (:MAIN_AWAIT);<task: warm>;warm_loop;spin
The hot:warm split of the samples (nominally 75 %) must be within 5
points of the split the program measures itself (time inside each task's
spin(), which on a loaded host includes time preempted there, as cpu
mode's runnable threads do), and idle is never the running task. 3.8-3.10
(frames outside the coroutine) and Task subclasses: test_python_async_old.py.
"""
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import pyutil as py  # noqa: E402

if not os.path.exists(py.PLUGIN):
    u.skip("python plugin not built: " + py.PLUGIN)
found = [f for f in py.interpreters() if (3, 11) <= f[2][:2] <= (3, 13)]
u.check(len(found) >= 4, "3.11, 3.12, 3.13 and Debian's 3.11 present (%s)"
        % ", ".join(l for l, _, _ in found))

WORKLOAD = os.path.join(u.SRC, "tests", "workloads", "python", "async_chain.py")


def line_of(marker):
    with open(WORKLOAD) as f:
        for i, line in enumerate(f, 1):
            if line.rstrip().endswith("# " + marker):
                return i
    raise KeyError(marker)


IDLE_AWAIT, MAIN_AWAIT = line_of("IDLE_AWAIT"), line_of("MAIN_AWAIT")


def task_part(raw):
    """The frames from the first <task: ...> on, names only, and lines."""
    i = next((k for k, f in enumerate(raw) if f.startswith("<task: ")), None)
    if i is None:
        return None
    out = []
    for f in raw[i:]:
        if f.startswith("<task: "):
            out.append(f)
        else:
            m = py.FRAME_RE.match(f)
            out.append("%s:%s" % (m.group(1), m.group(3)) if m else f)
    return out


procs = []
try:
    for label, exe, ver in found:
        d = u.tempdir("ppasync-")
        script = os.path.join(d, "async_chain.py")
        shutil.copy(WORKLOAD, script)
        p = subprocess.Popen([exe, script, "90", os.path.join(d, "status")],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=d, text=True)
        procs.append((label, ver, p, script))
    for _, _, p, _ in procs:
        p.stdout.readline()
    time.sleep(0.5)
    pending = {label for label, _, _, _ in procs}
    results = {}

    def spent(script):
        with open(os.path.join(os.path.dirname(script), "status")) as f:
            return [float(x) for x in f.read().split()]

    for attempt in range(3):
        live = [(label, ver, p, script) for label, ver, p, script in procs if label in pending]
        before = {label: spent(script) for label, _, _, script in live}
        r, header, stacks, log = py.profile([p.pid for _, _, p, _ in live], "--python-mode",
                                            "cpu", "--python-async-aware", duration=4, freq=200)
        after = {label: spent(script) for label, _, _, script in live}
        u.check(r.returncode == 0 and header is not None, "agent ran (rc %d)" % r.returncode)
        for label, ver, p, script in live:
            mine = py.stacks_in(stacks, script)
            dh = after[label][0] - before[label][0]
            dw = after[label][1] - before[label][1]
            measured = 100.0 * dh / max(dh + dw, 1e-9)
            chains = {}
            for fr, c, raw in mine:
                part = task_part(raw)
                if part and part[-1].startswith("spin:"):
                    key = tuple(part[:-1])
                    chains[key] = chains.get(key, 0) + c
            hot_key = ("<task: idle>", "idle_wait:%d" % IDLE_AWAIT, "<task: hot>")
            warm_key = ("<task: main>", "main:%d" % MAIN_AWAIT, "<task: warm>")
            hot = sum(c for k, c in chains.items() if k[:3] == hot_key and k[3].startswith("hot_loop:"))
            warm = sum(c for k, c in chains.items() if k[:3] == warm_key and k[3].startswith("warm_loop:"))
            other = sum(chains.values()) - hot - warm
            idle_running = sum(c for fr, c, raw in mine
                               if [f for f in raw if f.startswith("<task: ")][-1:] == ["<task: idle>"])
            share = 100.0 * hot / max(hot + warm, 1)
            results[label] = (hot, warm, other, idle_running, share, measured,
                              sorted(chains.items())[:4])
            if (hot + warm >= 100 and abs(share - measured) <= 5 and other == 0
                    and idle_running == 0):
                pending.discard(label)
        if not pending:
            break
        print("note: attempt %d: not yet: %s (load %.0f)"
              % (attempt + 1, ", ".join(sorted(pending)), os.getloadavg()[0]))
    for label, ver, p, script in procs:
        hot, warm, other, idle_running, share, measured, sample = results[label]
        u.check(hot > 0 and warm > 0 and other == 0,
                "%s: every spin under its chain: idle>hot %d, main>warm %d, other %d (%s)"
                % (label, hot, warm, other, sample))
        u.check(hot + warm >= 100 and abs(share - measured) <= 5 and 60 <= measured <= 90,
                "%s: hot:warm = %.1f%% of %d samples, the program measured %.1f%% (+-5; "
                "nominal 75)" % (label, share, hot + warm, measured))
        u.check(idle_running == 0, "%s: idle never the running task (%d)" % (label, idle_running))
finally:
    for _, _, p, _ in procs:
        u.kill(p)
u.finish()
