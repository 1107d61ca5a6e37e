"""--python-async-aware: awaits through gather(), TaskGroup and nested
coroutines, and (wall mode) the tasks no thread runs.

tests/workloads/python/async_tree.py on pyenv 3.6 to 3.13 and Debian's
3.11, all at once (3.6 and 3.7 name a task by its coroutine: <task: main>,
<task: gather_parent>, <task: wait_a>, ...):

1. `run`, cpu mode: three computing tasks, each awaited differently; every
   sample in spin() must be under one of, root first,
     <task: main>;main:RUN_AWAIT;<task: gparent>;gather_parent:GATHER_AWAIT;<task: g1>;gather_child
     <task: main>;main:RUN_AWAIT;<task: tparent>;group_parent:GROUP_AWAIT;TaskGroup.__aexit__...;<task: t1>;group_child
     <task: main>;main:RUN_AWAIT;<task: nparent>;nested_parent:NESTED_AWAIT;nested_helper:HELPER_AWAIT;<task: n1>;nested_child
   and each chain must be seen (no TaskGroup before 3.11).
2. `wait`, wall mode: "a1".."a3" sleep in wait_a, "b1" in wait_b, "main"
   awaits gather() of them; no thread runs any of them. Each must show as
     ...;BaseEventLoop._run_once;<task: main>;main:MAIN_AWAIT;<task: aN>;wait_a:WAIT_A;sleep
   (3.6-3.10: `_run_once`, no qualified names) and wait_a:wait_b must be
   3:1 (75 % within 5 points). Debian's 3.11
   ships a stripped _asyncio (no all_tasks symbol): its registry is found
   from the main task's weak references instead, as it is for a pyenv 3.9
   given a stripped copy of its _asyncio (PYTHONPATH).
3. `polyprof attach PID` (one program) turns async-aware stacks on by
   itself: the same waiting tasks show without --python-async-aware.
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import cmdutil  # noqa: E402
import pputil as u  # noqa: E402
import pyasync as pa  # noqa: E402
import pyutil as py  # noqa: E402

if not os.path.exists(py.PLUGIN):
    u.skip("python plugin not built: " + py.PLUGIN)
found = [f for f in py.interpreters() if (3, 6) <= f[2][:2] <= (3, 13)]
pyenv = [f for f in found if f[0].startswith("pyenv ")]
u.check(len(pyenv) >= 8, "pyenv 3.6 to 3.13 present (%s)" % ", ".join(l for l, _, _ in found))
RUN_ONCE = ("BaseEventLoop._run_once", "_run_once")  # 3.6-3.10: no qualified names

WORKLOAD = py.workload("async_tree.py")


def line_of(marker):
    return py.marker_line(marker, WORKLOAD)


def start(exe, mode, seconds, env=None):
    return py.start_copy(exe, WORKLOAD, [mode, str(seconds)], "ppatree-", env=env)


def stripped_asyncio(exe):
    """A directory holding a copy of exe's _asyncio stripped of its symbols
    (no all_tasks): on PYTHONPATH it is imported instead of lib-dynload's."""
    r = subprocess.run([exe, "-c", "import _asyncio; print(_asyncio.__file__)"],
                       stdout=subprocess.PIPE, text=True, check=True)
    so = r.stdout.strip()
    d = u.tempdir("ppstrip-")
    subprocess.run(["strip", "--strip-all", "-o", os.path.join(d, os.path.basename(so)), so],
                   check=True)
    return d


# 3.6 and 3.7 have no task names: a task is shown by its coroutine
CORO_OF = {"main": "main", "gparent": "gather_parent", "g1": "gather_child",
           "nparent": "nested_parent", "n1": "nested_child", "a1": "wait_a", "a2": "wait_a",
           "a3": "wait_a", "b1": "wait_b"}


def tname(ver, name):
    return "<task: %s>" % (CORO_OF[name] if ver < (3, 8) else name)


def chains(ver):
    main_run = [tname(ver, "main"), "main:%d" % line_of("RUN_AWAIT")]
    out = {
        "gather": main_run + [tname(ver, "gparent"), "gather_parent:%d" % line_of("GATHER_AWAIT"),
                              tname(ver, "g1"), "gather_child:"],
        "nested": main_run + [tname(ver, "nparent"), "nested_parent:%d" % line_of("NESTED_AWAIT"),
                              "nested_helper:%d" % line_of("HELPER_AWAIT"), tname(ver, "n1"),
                              "nested_child:"],
    }
    if ver >= (3, 11):
        out["group"] = main_run + ["<task: tparent>", "group_parent:%d" % line_of("GROUP_AWAIT"),
                                   "TaskGroup.__aexit__:", "<task: t1>", "group_child:"]
    return out


def chain_of(part, ver):
    """Which expected chain the task frames follow (prefixes match; the
    group's TaskGroup frames may be one or two)."""
    for name, want in chains(ver).items():
        got = [f for f in part if not (name == "group" and f.startswith("TaskGroup._aexit:"))]
        if len(got) >= len(want) and all(g == w or (w.endswith(":") and g.startswith(w))
                                         for g, w in zip(got, want)):
            return name
    return None


procs = []
try:
    # 1. running tasks awaited through gather(), a TaskGroup, a helper
    for label, exe, ver in found:
        p, script = start(exe, "run", 60)
        procs.append((label, p, script))
    for _, p, _ in procs:
        p.stdout.readline()
    time.sleep(0.3)
    pending = {label for label, _, _ in procs}
    vers = {label: ver for label, _, ver in found}
    expected = {label: list(chains(ver)) for label, _, ver in found}
    results = {}
    for attempt in range(2):
        live = [(label, p, script) for label, p, script in procs if label in pending]
        r, header, stacks, log = py.profile([p.pid for _, p, _ in live], "--python-mode", "cpu",
                                            "--python-async-aware", duration=4, freq=100)
        u.check(r.returncode == 0 and header is not None, "agent ran (rc %d)" % r.returncode)
        for label, p, script in live:
            seen = {"gather": 0, "group": 0, "nested": 0, None: 0}
            odd = []
            for fr, c, raw in py.stacks_in(stacks, script):
                part = pa.task_part(raw)
                if not (part and part[-1].startswith("spin:")):
                    continue
                k = chain_of(part, vers[label])
                seen[k] += c
                if k is None and len(odd) < 3:
                    odd.append(part)
            results[label] = (seen, odd)
            if all(seen[k] >= 10 for k in expected[label]) and seen[None] == 0:
                pending.discard(label)
        if not pending:
            break
        print("note: attempt %d: not yet: %s (load %.0f)"
              % (attempt + 1, ", ".join(sorted(pending)), os.getloadavg()[0]))
    for label, _, _ in procs:
        seen, odd = results[label]
        u.check(all(seen[k] >= 10 for k in expected[label]),
                "%s: each chain seen: gather %d, TaskGroup %d, nested coroutine %d (%s)"
                % (label, seen["gather"], seen["group"], seen["nested"],
                   ", ".join(expected[label])))
        u.check(seen[None] == 0, "%s: every spin under its chain (%d other: %s)"
                % (label, seen[None], odd))
    for _, p, _ in procs:
        u.kill(p)
    procs = []

    # 2. wall mode: tasks that no thread runs, 3 in wait_a, 1 in wait_b;
    # and pyenv 3.9 with a stripped _asyncio: the registry from a task
    for label, exe, ver in found:
        p, script = start(exe, "wait", 60)
        procs.append((label, p, script))
    exe39 = next(exe for label, exe, ver in pyenv if ver[:2] == (3, 9))
    strip_dir = stripped_asyncio(exe39)
    p, script = start(exe39, "wait", 60, env=dict(os.environ, PYTHONPATH=strip_dir))
    procs.append(("pyenv 3.9 stripped _asyncio", p, script))
    vers["pyenv 3.9 stripped _asyncio"] = (3, 9)
    for _, p, _ in procs:
        p.stdout.readline()
    time.sleep(0.3)
    with open("/proc/%d/maps" % p.pid) as f:
        u.check(strip_dir in f.read(), "pyenv 3.9 runs the stripped _asyncio copy")
    r, header, stacks, log = py.profile([p.pid for _, p, _ in procs], "--python-mode", "wall",
                                        "--python-async-aware", duration=3, freq=50)
    u.check(r.returncode == 0 and header is not None, "agent ran (rc %d)" % r.returncode)
    wait_a, wait_b, main_await = line_of("WAIT_A"), line_of("WAIT_B"), line_of("MAIN_AWAIT")
    for label, p, script in procs:
        a = b = bad = 0
        names = set()
        ver = vers[label]
        a_names = {tname(ver, n) for n in ("a1", "a2", "a3")}
        for fr, c, raw in py.stacks_in(stacks, script):
            part = pa.task_part(raw)
            if not part:
                continue
            i = raw.index(part[0]) if part[0] in raw else 0
            below = py.FRAME_RE.match(raw[i - 1]) if i > 0 else None
            ok = (below is not None and below.group(1) in RUN_ONCE
                  and part[:2] == [tname(ver, "main"), "main:%d" % main_await] and len(part) >= 5
                  and part[4].startswith("sleep:"))
            if ok and part[3] == "wait_a:%d" % wait_a and part[2] in a_names:
                a += c
            elif ok and part[3] == "wait_b:%d" % wait_b and part[2] == tname(ver, "b1"):
                b += c
            else:
                bad += c
            names.add(part[2])
        share = 100.0 * a / max(a + b, 1)
        u.check(a + b >= 60 and abs(share - 75) <= 5,
                "%s: waiting tasks in wall mode, wait_a:wait_b = %.1f%% of %d (75 +-5)"
                % (label, share, a + b))
        u.check(bad == 0 and names == a_names | {tname(ver, "b1")},
                "%s: every waiting task on its loop's thread under main's gather (%d other; "
                "tasks %s)" % (label, bad, sorted(names)))

    # 3. one program: attach turns async-aware stacks on by itself
    label, p, script = procs[-1]
    out = u.tempdir("ppattach-")
    r = cmdutil.polyprof("attach", str(p.pid), "-d", "2", "-o", out)
    col = os.path.join(out, "last_profile.col")
    header, stacks = u.parse_col(col) if os.path.exists(col) else (None, [])
    tasks = sum(c for fr, c, raw in py.stacks_in(stacks, script)
                if "<task: b1>" in raw and any(f.startswith("wait_b ") for f in raw))
    u.check(r.returncode == 0 and tasks > 0,
            "%s: polyprof attach shows the waiting tasks without --python-async-aware "
            "(rc %d, %d samples of b1 in wait_b)" % (label, r.returncode, tasks))
finally:
    for _, p, _ in procs:
        u.kill(p)
u.finish()
