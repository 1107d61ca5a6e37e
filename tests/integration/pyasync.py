"""Helpers for the python plugin's --python-async-aware tests: the task
part of a stack and the hot:warm split of tests/workloads/python/async_chain.py
(standard library only)."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import pyutil as py  # noqa: E402

CHAIN = py.workload("async_chain.py")
IDLE_AWAIT = py.marker_line("IDLE_AWAIT", CHAIN)
MAIN_AWAIT = py.marker_line("MAIN_AWAIT", CHAIN)


def task_part(raw):
    """The frames from the first <task: ...> on: task frames as they are,
    Python frames as name:line."""
    i = next((k for k, f in enumerate(raw) if f.startswith("<task: ")), None)
    if i is None:
        return None
    out = []
    for f in raw[i:]:
        m = py.FRAME_RE.match(f)
        out.append("%s:%s" % (m.group(1), m.group(3)) if m else f)
    return out


def start_chains(runs, prefix, procs):
    """Starts async_chain.py for 90 s for each (label, exe, extra args),
    appending (label, process, script) to procs as each starts (so the
    caller kills what started if a start fails), and waits until each runs."""
    for label, exe, extra in runs:
        # the status file is relative: the copy runs in its own directory
        p, script = py.start_copy(exe, CHAIN, ["90", "status"] + list(extra), prefix)
        procs.append((label, p, script))
    py.wait_ready([p for _, p, _ in procs], settle=0.5)


def spent(script):
    """The seconds the program measured itself inside hot's and warm's spin()."""
    with open(os.path.join(os.path.dirname(script), "status")) as f:
        return [float(x) for x in f.read().split()]


def check_hot_warm(procs, keys):
    """One cpu-mode async-aware session over procs [(label, process,
    script)], again for the ones not yet right (at most 3 sessions: a
    loaded host starves the targets). keys(label) gives the task part
    above hot's spin, the one above warm's, and idle's task frame. Checks,
    for each: every spin sample under its chain, hot:warm of the samples
    within 5 points of the split the program measured itself (nominally
    75 %), and idle never the running task."""
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
