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
import sys

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import pyasync as pa  # noqa: E402
import pyutil as py  # noqa: E402

if not os.path.exists(py.PLUGIN):
    u.skip("python plugin not built: " + py.PLUGIN)
pyenv = {f[2][:2]: f for f in py.interpreters() if f[0].startswith("pyenv ")}
want = [(3, 6), (3, 7), (3, 8), (3, 9), (3, 10), (3, 12)]
u.check(all(v in pyenv for v in want), "pyenv 3.6 to 3.10 and 3.12 present (%s)"
        % ", ".join(l for l, _, _ in pyenv.values()))
RUNS = [(pyenv[v][0], pyenv[v][1], []) for v in [(3, 6), (3, 7), (3, 8), (3, 9), (3, 10)]]
RUNS += [(pyenv[v][0] + " subclass", pyenv[v][1], ["subclass"]) for v in [(3, 10), (3, 12)]]

NAMES = {"idle": "idle", "hot": "hot", "main": "main", "warm": "warm"}
NAMES_37 = {"idle": "idle_wait", "hot": "hot_loop", "main": "main", "warm": "warm_loop"}


def keys(label):
    n = NAMES_37 if label in (pyenv[(3, 6)][0], pyenv[(3, 7)][0]) else NAMES
    return (("<task: %s>" % n["idle"], "idle_wait:%d" % pa.IDLE_AWAIT, "<task: %s>" % n["hot"]),
            ("<task: %s>" % n["main"], "main:%d" % pa.MAIN_AWAIT, "<task: %s>" % n["warm"]),
            "<task: %s>" % n["idle"])


procs = []
try:
    pa.start_chains(RUNS, "ppasyncold-", procs)
    pa.check_hot_warm(procs, keys)
finally:
    for _, p, _ in procs:
        u.kill(p)
u.finish()
