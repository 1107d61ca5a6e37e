"""Thread filters and thread names, on every CPython found at once
(pyenv 2.7, 3.6-3.13, Debian's python3), one session per option set:

  --python-mode exception --python-thread-names
      only threads raising or handling an exception: in_handler (running,
      inside an except block) and sleep_in_handler (asleep inside one);
      never plain_work or outside_handler; each stack has the kernel's
      thread name as its root frame: <thread: exc-worker>/<thread: exc-sleeper>
  --python-mode wall --python-main-thread-only
      only the main thread: plain_work, none of the workers' functions
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import pyutil as py  # noqa: E402

found = py.every_interpreter()

WORKLOAD = py.workload("threads_exc.py")
WORKER_FNS = {"in_handler", "outside_handler", "sleep_in_handler", "handle_once"}

procs = []
try:
    for label, exe, ver in found:
        p, script = py.start_copy(exe, WORKLOAD, ["60"], "ppthr-")
        procs.append((label, p, script))
    py.wait_ready([p for _, p, _ in procs], settle=0.5)
    pids = [p.pid for _, p, _ in procs]

    r, header, stacks, log = py.profile(pids, "--python-mode", "exception",
                                        "--python-thread-names", duration=3, freq=50)
    u.check(r.returncode == 0 and header is not None, "exception: agent ran (rc %d)" % r.returncode)
    for label, p, script in procs:
        mine = py.stacks_in(stacks, script)
        fns = {}
        for fr, c, raw in mine:
            leaf = fr[-1][0] if fr else ""
            thread = [f for f in raw if f.startswith("<thread: ")]
            key = (leaf, thread[0] if thread else None)
            fns[key] = fns.get(key, 0) + c
        leaves = {k[0] for k in fns}
        u.check({"in_handler", "sleep_in_handler"} <= {k[0].rsplit(".", 1)[-1] for k in fns}
                or {"spin", "sleep_in_handler"} <= leaves,
                "%s exception: the running and the sleeping handler sampled (%s)"
                % (label, sorted(fns.items())))
        bad = [fr for fr, _, _ in mine if any(n in ("plain_work", "outside_handler")
                                              for n, _, _ in fr)]
        u.check(not bad, "%s exception: no stack outside an except block (%d)" % (label, len(bad)))
        names = {}
        for fr, c, raw in mine:
            fn_names = {n for n, _, _ in fr}
            t = [f for f in raw if f.startswith("<thread: ")]
            who = "sleeper" if "sleep_in_handler" in fn_names else "worker"
            names.setdefault(who, set()).update(t)
        u.check(names.get("worker") == {"<thread: exc-worker>"}
                and names.get("sleeper") == {"<thread: exc-sleeper>"},
                "%s: thread names as the root frame (%s)" % (label, names))
        u.check(all(raw.index(t) == min(i for i, f in enumerate(raw) if f.endswith("_[p]")) - 1
                    for _, _, raw in mine for t in raw if t.startswith("<thread: ")),
                "%s: <thread: ...> right above the Python root frame" % label)

    r, header, stacks, log = py.profile(pids, "--python-mode", "wall",
                                        "--python-main-thread-only", duration=2, freq=50)
    u.check(r.returncode == 0 and header is not None, "main only: agent ran (rc %d)" % r.returncode)
    for label, p, script in procs:
        mine = py.stacks_in(stacks, script)
        fn_names = {n for fr, _, _ in mine for n, _, _ in fr}
        u.check("plain_work" in fn_names and not (fn_names & WORKER_FNS),
                "%s main thread only: plain_work, no worker (%s)" % (label, sorted(fn_names)))
finally:
    for _, p, _ in procs:
        u.kill(p)
u.finish()
