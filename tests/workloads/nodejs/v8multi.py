"""One agent in the nodejs plugin's v8 mode profiling the same script under
Node 18, 20, 22 and 24 at once (each process with its own copy, so its
appid names it): the cases that judge a whole profile's shape on every
version in one short run."""
import subprocess
import time

import nodetest as n  # noqa: E402
import pputil as u  # noqa: E402
import v8cases  # noqa: E402

MAJORS = (18, 20, 22, 24)


def profile_targets(workload, targets, enough, label="", seconds=60, freq=100):
    """Runs workload once per target {key: (major, node flags)} under one
    agent; returns {key: (script, stacks)} of the sessions after the first,
    once enough(result) holds (or seconds ran out). label prefixes the
    checks' names."""
    v8cases.require_plugin()
    prefix = label + ": " if label else ""
    nodes = {m: v8cases.node_binary(m) for m, _ in targets.values()}
    scripts = {k: v8cases.copy_workload(workload) for k in targets}
    out = u.tempdir("ppout-")
    agent = n.Agent(out, n.plugin_dir(), "--nodejs-mode", "v8", duration=2, freq=freq)
    procs = []
    result = {}
    try:
        for k, (m, flags) in sorted(targets.items()):
            procs.append(subprocess.Popen([nodes[m]] + list(flags) + [scripts[k]],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        u.check(agent.wait_sessions(1, 60) >= 1, prefix + "agent wrote its first session")
        end = time.time() + seconds
        while time.time() < end and agent.p.poll() is None:
            time.sleep(0.5)
            if len(agent.profiles()) < 3:
                continue
            try:
                _, stacks = n.stacks_of(agent.profiles()[1:])
            except (OSError, ValueError):
                continue
            result = {k: (s, v8cases.of_script(stacks, s)) for k, s in scripts.items()}
            if enough(result):
                break
        for p in procs:
            u.check(p.poll() is None, "%starget %d still running" % (prefix, p.pid))
        rc = agent.stop()
        if not u.check(rc == 0, "%sagent exits 0 (rc %s)" % (prefix, rc)):
            print(agent.stderr[-3000:])
        header, _ = n.stacks_of(agent.profiles()[-1:])
        print("%scounters of the last session: %s"
              % (prefix, (header or {}).get("polyprof", {}).get("nodejs", {}).get("counters", {})))
        return result
    finally:
        for p in procs:
            u.kill(p)
        if agent.p.poll() is None:
            agent.stop()


def profile_all(workload, enough, seconds=60, freq=100):
    """Runs workload on every Node major; returns {major: (script, stacks)}
    of the sessions after the first, once enough(stacks) holds for all."""
    return profile_targets(workload, {m: (m, ()) for m in MAJORS},
                           lambda result: all(enough(s) for _, s in result.values()),
                           seconds=seconds, freq=freq)
