"""One agent in the nodejs plugin's v8 mode profiling the same script under
Node 18, 20, 22 and 24 at once (each process with its own copy, so its
appid names it): the cases that judge a whole profile's shape on every
version in one short run."""
import os
import subprocess
import time

import nodetest as n  # noqa: E402
import pputil as u  # noqa: E402
import v8cases  # noqa: E402

MAJORS = (18, 20, 22, 24)


def profile_all(workload, enough, seconds=60, freq=100):
    """Runs workload on every Node major; returns {major: (script, stacks)}
    of the sessions after the first, once enough(stacks) holds for all."""
    v8cases.require_plugin()
    nodes = {m: v8cases.node_binary(m) for m in MAJORS}
    scripts = {m: v8cases.copy_workload(workload) for m in MAJORS}
    out = u.tempdir("ppout-")
    agent = n.Agent(out, n.plugin_dir(), "--nodejs-mode", "v8", duration=2, freq=freq)
    procs = []
    try:
        for m in MAJORS:
            procs.append(subprocess.Popen([nodes[m], scripts[m]], stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
        u.check(agent.wait_sessions(1, 60) >= 1, "agent wrote its first session")
        end = time.time() + seconds
        result = {}
        while time.time() < end and agent.p.poll() is None:
            time.sleep(0.5)
            if len(agent.profiles()) < 3:
                continue
            try:
                _, stacks = n.stacks_of(agent.profiles()[1:])
            except (OSError, ValueError):
                continue
            result = {m: (scripts[m], v8cases.of_script(stacks, scripts[m])) for m in MAJORS}
            if all(enough(s) for _, s in result.values()):
                break
        for p in procs:
            u.check(p.poll() is None, "target %d still running" % p.pid)
        rc = agent.stop()
        if not u.check(rc == 0, "agent exits 0 (rc %s)" % rc):
            print(agent.stderr[-3000:])
        return result
    finally:
        for p in procs:
            u.kill(p)
        if agent.p.poll() is None:
            agent.stop()
