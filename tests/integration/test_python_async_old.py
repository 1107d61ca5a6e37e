"""--python-async-aware on 3.6-3.10 (a coroutine's frame is a PyFrameObject
of its own) and for Task subclasses written in Python.

tests/workloads/python/async_chain.py (tasks "hot", "warm", "idle" in a
3:1:0 CPU split; idle awaits hot, the main task awaits warm) on pyenv 3.6,
3.7, 3.8, 3.9 and 3.10, plus the same program with hot, warm and idle made by the
loop's task factory as instances of a class derived from asyncio.Task, on
pyenv 3.10 and 3.12; all at once, one cpu-mode session. Each running
task's stack shows, root first, the awaiting task at the line of its
await, then the running task:
  ...;_run;<task: idle>;idle_wait (:IDLE_AWAIT);<task: hot>;hot_loop;spin
  ...;_run;<task: main>;main (:MAIN_AWAIT);<task: warm>;warm_loop;spin
(3.6-3.10 name Handle._run `_run`: no qualified names; 3.6's and 3.7's
tasks have no names and are shown by their coroutines': <task: idle_wait>,
<task: hot_loop>, <task: main>, <task: warm_loop>). Every spin sample is
under one of those, idle is never the running task, and the hot:warm
split of the samples is within 5 points of the split the program measures
itself (as in test_python_async.py).
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
pyenv = {f[2][:2]: f for f in py.interpreters() if f[0].startswith("pyenv ")}
want = [(3, 6), (3, 7), (3, 8), (3, 9), (3, 10), (3, 12)]
u.check(all(v in pyenv for v in want), "pyenv 3.6 to 3.10 and 3.12 present (%s)"
        % ", ".join(l for l, _, _ in pyenv.values()))
RUNS = [(pyenv[v][0], pyenv[v][1], []) for v in [(3, 6), (3, 7), (3, 8), (3, 9), (3, 10)]]
RUNS += [(pyenv[v][0] + " subclass", pyenv[v][1], ["subclass"]) for v in [(3, 10), (3, 12)]]

WORKLOAD = os.path.join(u.SRC, "tests", "workloads", "python", "async_chain.py")


def line_of(marker):
    with open(WORKLOAD) as f:
        for i, line in enumerate(f, 1):
            if line.rstrip().endswith("# " + marker):
                return i
    raise KeyError(marker)


IDLE_AWAIT, MAIN_AWAIT = line_of("IDLE_AWAIT"), line_of("MAIN_AWAIT")
NAMES = {"idle": "idle", "hot": "hot", "main": "main", "warm": "warm"}
NAMES_37 = {"idle": "idle_wait", "hot": "hot_loop", "main": "main", "warm": "warm_loop"}


def keys(label):
    n = NAMES_37 if label in (pyenv[(3, 6)][0], pyenv[(3, 7)][0]) else NAMES
    return (("<task: %s>" % n["idle"], "idle_wait:%d" % IDLE_AWAIT, "<task: %s>" % n["hot"]),
            ("<task: %s>" % n["main"], "main:%d" % MAIN_AWAIT, "<task: %s>" % n["warm"]),
            "<task: %s>" % n["idle"])


def task_part(raw):
    """The frames from the first <task: ...> on, as name:line."""
    i = next((k for k, f in enumerate(raw) if f.startswith("<task: ")), None)
    if i is None:
        return None
    out = []
    for f in raw[i:]:
        m = py.FRAME_RE.match(f)
        out.append("%s:%s" % (m.group(1), m.group(3)) if m else f)
    return out


def spent(script):
    with open(os.path.join(os.path.dirname(script), "status")) as f:
        return [float(x) for x in f.read().split()]


procs = []
try:
    for label, exe, extra in RUNS:
        d = u.tempdir("ppasyncold-")
        script = os.path.join(d, "async_chain.py")
        shutil.copy(WORKLOAD, script)
        p = subprocess.Popen([exe, script, "90", os.path.join(d, "status")] + extra,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=d, text=True)
        procs.append((label, p, script))
    for _, p, _ in procs:
        p.stdout.readline()
    time.sleep(0.5)

    pending = {label for label, _, _ in procs}
    results = {}
    for attempt in range(3):
        live = [(label, p, script) for label, p, script in procs if label in pending]
        before = {label: spent(script) for label, _, script in live}
        r, header, stacks, log = py.profile([p.pid for _, p, _ in live], "--python-mode", "cpu",
                                            "--python-async-aware", duration=4, freq=200)
        after = {label: spent(script) for label, _, script in live}
        u.check(r.returncode == 0 and header is not None, "agent ran (rc %d)" % r.returncode)
        for label, p, script in live:
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
            hot_key, warm_key, idle_task = keys(label)
            hot = sum(c for k, c in chains.items()
                      if k[:3] == hot_key and k[3].startswith("hot_loop:"))
            warm = sum(c for k, c in chains.items()
                       if k[:3] == warm_key and k[3].startswith("warm_loop:"))
            other = sum(chains.values()) - hot - warm
            idle_running = sum(c for fr, c, raw in mine
                               if [f for f in raw if f.startswith("<task: ")][-1:]
                               == [idle_task])
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
    for label, p, script in procs:
        hot, warm, other, idle_running, share, measured, sample = results[label]
        u.check(hot > 0 and warm > 0 and other == 0,
                "%s: every spin under its chain: idle>hot %d, main>warm %d, other %d (%s)"
                % (label, hot, warm, other, sample))
        u.check(hot + warm >= 100 and abs(share - measured) <= 5 and 60 <= measured <= 90,
                "%s: hot:warm = %.1f%% of %d samples, the program measured %.1f%% (+-5; "
                "nominal 75)" % (label, share, hot + warm, measured))
        u.check(idle_running == 0, "%s: idle never the running task (%d)" % (label, idle_running))
finally:
    for _, p, _ in procs:
        u.kill(p)
u.finish()
