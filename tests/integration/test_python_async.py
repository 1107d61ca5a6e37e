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
import sys

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import pyasync as pa  # noqa: E402
import pyutil as py  # noqa: E402

if not os.path.exists(py.PLUGIN):
    u.skip("python plugin not built: " + py.PLUGIN)
found = [f for f in py.interpreters() if (3, 11) <= f[2][:2] <= (3, 13)]
u.check(len(found) >= 4, "3.11, 3.12, 3.13 and Debian's 3.11 present (%s)"
        % ", ".join(l for l, _, _ in found))

KEYS = (("<task: idle>", "idle_wait:%d" % pa.IDLE_AWAIT, "<task: hot>"),
        ("<task: main>", "main:%d" % pa.MAIN_AWAIT, "<task: warm>"),
        "<task: idle>")

procs = []
try:
    pa.start_chains([(label, exe, []) for label, exe, _ in found], "ppasync-", procs)
    pa.check_hot_warm(procs, lambda label: KEYS)
finally:
    for _, p, _ in procs:
        u.kill(p)
u.finish()
