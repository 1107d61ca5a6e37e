"""nodejs plugin, attach-maps mode: running Node processes (a CommonJS and an
ES-module one, in the same network namespace) are made to write
/tmp/perf-<pid>.map with named JS functions while the agent runs; their
inspectors are closed again right away; at exit the writer is stopped, the
map removed, and the processes run on.

The agent's own perf plugin must name the targets' JS frames through the
maps: attach-maps exists so that the perf plugin's output has named JS
frames.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "workloads", "nodejs"))
import nodetest as n  # noqa: E402
import pputil as u  # noqa: E402

n.require_node()
plugins = n.plugin_dir()
if not os.path.exists(os.path.join(plugins, "nodejs-perfmap.node")):
    u.skip("nodejs-perfmap.node not built")
perf_so = os.path.join(u.PLUGIN_DIR, "perf.so")
if not os.path.exists(perf_so):
    u.skip("perf plugin not built: " + perf_so)
os.symlink(perf_so, os.path.join(plugins, "perf.so"))

cjs = n.spawn_node([os.path.join(n.WORKLOADS, "split.js")])
esm = n.spawn_node([os.path.join(n.WORKLOADS, "split.mjs")])
line_re = re.compile(r"^[0-9a-f]+ [0-9a-f]+ \S.*$")
try:
    out = u.tempdir("ppout-")
    agent = n.Agent(out, plugins, "--nodejs-mode", "attach-maps", "--pids",
                    "%d,%d" % (cjs.pid, esm.pid), duration=2)
    got = agent.wait_sessions(3, 90)
    u.check(got >= 3, "3 sessions written (%d)" % got)
    for label, p in (("cjs", cjs), ("esm", esm)):
        path = "/tmp/perf-%d.map" % p.pid
        text = open(path).read() if os.path.exists(path) else ""
        lines = text.splitlines()
        u.check(len(lines) > 100, "%s: %s written while the agent runs (%d lines)"
                % (label, path, len(lines)))
        u.check(all(line_re.match(ln) for ln in lines), "%s: every line is '<addr> <size> <name>'" % label)
        for fn in ("heavyPath", "crunch", "spin"):
            u.check(any(("JS:" in ln and fn + " " in ln) for ln in lines),
                    "%s: map names JS function %s" % (label, fn))
        u.check(not n.inspector_left(p.pid), "%s: inspector closed while the map is written" % label)
    # the first session includes the attach and the map's first lines:
    # judge the later ones
    _, stacks = n.stacks_of(agent.profiles()[1:])
    for fn in ("heavyPath", "lightPath", "spin"):
        named = n.frames_with([(f, c) for f, c in stacks if any(x.startswith("JS:") for x in f)],
                              fn + " ")
        u.check(named > 0, "the perf plugin names JS frames of %s from the maps (%d samples)"
                % (fn, named))
    rc = agent.stop()
    u.check(rc == 0, "agent exits 0 (rc %s)" % rc)
    for label, p in (("cjs", cjs), ("esm", esm)):
        u.check(p.poll() is None, "%s: target still running" % label)
        u.check(not os.path.exists("/tmp/perf-%d.map" % p.pid), "%s: map removed at exit" % label)
        u.check(not n.inspector_left(p.pid), "%s: inspector closed after exit" % label)
    log = agent.log_text()
    u.check(log.count("perf map enabled") >= 2, "log shows both perf maps enabled")
    u.check("WARNING: polyprof.nodejs" not in log, "no plugin warnings")
finally:
    u.kill(cjs)
    u.kill(esm)
u.finish()
