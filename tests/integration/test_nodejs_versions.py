"""nodejs plugin, inspector and attach-maps modes on every Node.js major CI
installs (/opt/polyprof-test/node-<major>/bin/node, scripts/install-deps.sh),
one short case each, on promise_loop.js: a CPU-bound main loop that awaits
resolved promises and so never returns to its event loop.

inspector: the helper's profiler is driven through V8 interrupts, so the
loop is profiled: promiseWork is in the profile, the process runs on and
nothing listens in it after the agent stopped.
attach-maps: the addon writes each map line at once (no timer), so the
perf plugin names the loop's JIT code; after the stop the map is removed.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "workloads", "nodejs"))
import nodetest as n  # noqa: E402
import pputil as u  # noqa: E402

n.require_node()
MAJORS = (18, 20, 22, 24)
script = os.path.join(n.WORKLOADS, "promise_loop.js")
missing = [m for m in MAJORS if not os.access(n.node_of(m), os.X_OK)]
if missing:
    u.skip("Node.js %s not installed under /opt/polyprof-test (scripts/install-deps.sh test)"
           % ", ".join(map(str, missing)))
perf_so = os.path.join(u.PLUGIN_DIR, "perf.so")
if not os.path.exists(perf_so):
    u.skip("perf plugin not built: " + perf_so)
inspector_plugins = n.plugin_dir()
maps_plugins = n.plugin_dir()
os.symlink(perf_so, os.path.join(maps_plugins, "perf.so"))


def run(major, mode):
    label = "node %d %s" % (major, mode)
    node = n.spawn_node([script], node=n.node_of(major))
    try:
        out = u.tempdir("ppout-")
        agent = n.Agent(out, inspector_plugins if mode == "inspector" else maps_plugins,
                        "--nodejs-mode", mode, "--pids", str(node.pid), duration=2)
        got = agent.wait_sessions(3, 60)
        rc = agent.stop()
        u.check(rc == 0 and got >= 3, "%s: 3 sessions, agent exits 0 (%d, rc %s)" % (label, got, rc))
        _, stacks = n.stacks_of(agent.profiles()[1:])
        # TurboFan inlines promiseWork into promiseLoop: perf then sees the
        # loop's code only (the cpuprofile still names both)
        want = "promiseWork" if mode == "inspector" else "promiseLoop"
        named = n.frames_with(stacks, want)
        u.check(named > 0, "%s: %s named in the profile (%d samples)" % (label, want, named))
        u.check("[Profiling error" not in "".join(x for f, _ in stacks for x in f),
                "%s: no error status" % label)
        u.check(node.poll() is None, "%s: the target runs on" % label)
        u.check(not n.inspector_left(node.pid, timeout=5),
                "%s: nothing listens in it afterwards" % label)
        if mode == "attach-maps":
            u.check(not os.path.exists("/tmp/perf-%d.map" % node.pid), "%s: map removed" % label)
    finally:
        u.kill(node)


for major in MAJORS:
    run(major, "inspector")
    run(major, "attach-maps")
u.finish()
