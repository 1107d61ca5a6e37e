"""nodejs plugin, inspector mode, end to end with real node processes.

1. A CommonJS workload (named function, class method, async function)
   burning CPU 3:1 between two paths: the merged profile carries the JS
   frames as `name (url:line)`, the 3:1 split within 5 points, the Node
   version in the app metadata and the appid; the process survives and its
   inspector is closed again after the agent stops.
2. The same workload as an ES module (.mjs).
3. A process started with --inspect and a user's debugger session open on
   it: profiled through a second session, the user's session keeps working
   and the inspector stays open after the agent exits.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "workloads", "nodejs"))
import nodetest as n  # noqa: E402
import pputil as u  # noqa: E402

n.require_node()
plugins = n.plugin_dir()
split_js = os.path.join(n.WORKLOADS, "split.js")
split_mjs = os.path.join(n.WORKLOADS, "split.mjs")


def js_samples(profiles):
    _, stacks = n.stacks_of(profiles)
    return sum(c for f, c in stacks
               if len(f) > 2 and f[2] == "node" and any("Path (" in x for x in f))


def heavy_tail(frames):
    """Function names after heavyPath, leaf last (None without heavyPath)."""
    names = [x.split(" (")[0] for x in frames]
    return tuple(names[names.index("heavyPath") + 1:]) if "heavyPath" in names else None


def run_split(script, label):
    out = u.tempdir("ppout-")
    err_path = os.path.join(u.tempdir("ppnode-"), "stderr")
    node = n.spawn_node([script], stderr_path=err_path)
    try:
        agent = n.Agent(out, plugins, "--nodejs-mode", "inspector", "--pids", str(node.pid))
        got = agent.wait_sessions(7, 120)
        # the first session includes the attach; judge the later ones, at
        # least 800 samples of them (a loaded host gives fewer per session):
        # the split's binomial spread is then 1.5 points, a third of the margin
        while got < 16 and js_samples(agent.profiles()[1:]) < 800:
            got = agent.wait_sessions(got + 1, 30)
        rc = agent.stop()
        if not u.check(rc == 0, "%s: agent exits 0 (rc %s)" % (label, rc)):
            print(agent.stderr[-3000:])
        u.check(got >= 7, "%s: 7 sessions written (%d)" % (label, got))
        header, stacks = n.stacks_of(agent.profiles()[1:])
        mine = [(f, c) for f, c in stacks if len(f) > 2 and f[2] == "node"]
        total = sum(c for _, c in mine)
        # V8's profiler does not always give functions inlined into optimized
        # code frames of their own: heavyPath (with crunch and spin) inlined
        # into round shows as round. round's only synchronous call is
        # heavyPath (lightPath resumes from a microtask, under no caller), so
        # a sample whose JS leaf is round (or main) is a heavy one
        inlined = sum(c for f, c in mine
                      if f[-1].startswith("round (") or f[-1].startswith("main ("))
        heavy = n.frames_with(mine, "heavyPath (") + inlined
        light = n.frames_with(mine, "lightPath (")
        print("%s: %d samples with heavyPath inlined into its caller" % (label, inlined))
        u.check(total >= 100, "%s: %d JS samples (>= 100)" % (label, total))
        share = 100.0 * heavy / max(heavy + light, 1)
        u.check(abs(share - 75) <= 5, "%s: heavy:light split %.1f%% (75 +- 5; %d vs %d)"
                % (label, share, heavy, light))
        url = "file://" + script
        want = ["heavyPath (%s:" % url, "lightPath (%s:" % url]
        allframes = {x for f, _ in mine for x in f}
        for w in want:
            u.check(any(x.startswith(w) for x in allframes), "%s: frame %s...)" % (label, w))
        # heavy path shape: main -> heavyPath -> crunch -> spin, leaf last.
        # An optimizing compiler may inline spin into crunch (or crunch into
        # heavyPath): the inlined callee then has no frame of its own, which
        # is what V8's profiler reports and not an error of ours.
        u.check(any(x.startswith(w % url) for x in allframes for w in ("crunch (%s:", "spin (%s:")),
                "%s: frame crunch or spin" % label)
        shapes = {("crunch", "spin"), ("crunch",), ("spin",)}
        u.check(any(heavy_tail(f) in shapes for f, _ in mine),
                "%s: heavyPath;crunch;spin stack (leaf last; crunch or spin alone when inlined)"
                % label)
        # line numbers are 1-based: `function heavyPath` is on this line
        with open(script) as f:
            line = 1 + next(i for i, t in enumerate(f) if t.startswith("function heavyPath"))
        u.check(any(x == "heavyPath (%s:%d)" % (url, line) for x in allframes),
                "%s: heavyPath is on line %d" % (label, line))
        # V8's sampling profiler does not say the tier: no suffix (the v8 mode's _[0] _[1] _[j] _[i])
        tiered = [x for x in allframes if x.endswith(("_[0]", "_[1]", "_[j]", "_[i]"))]
        u.check(not tiered, "%s: JS frames carry no tier suffix (%s)" % (label, tiered[:3]))
        appids = {x for f, _ in mine for x in f if x.startswith("appid: ")}
        u.check(any(("nodejs: %s" % script) in a or ("(%s)" % script) in a for a in appids),
                "%s: appid names the script: %s" % (label, appids))
        idx = {int(f[0]) for f, _ in mine}
        metas = [header["application_metadata"][i] for i in idx if i]
        u.check(any(m and m.get("node_version", "").startswith("v") for m in metas),
                "%s: app metadata has node_version: %s" % (label, metas))
        u.check(node.poll() is None, "%s: target still running" % label)
        left = n.inspector_left(node.pid)
        u.check(not left, "%s: inspector closed again after the agent stopped (listening: %s)"
                % (label, left))
        with open(err_path) as f:
            err = f.read()
        u.check("Debugger listening" in err, "%s: the target opened its inspector" % label)
    finally:
        u.kill(node)


run_split(split_js, "cjs")
run_split(split_mjs, "esm")

# --- 3. inspector already open, with a user's session attached
out = u.tempdir("ppout-")
node = n.spawn_node(["--inspect=127.0.0.1:0", split_js])
try:
    end = time.time() + 15  # a loaded host can take a while to start node
    while time.time() < end and not n.listening_ports(node.pid):
        time.sleep(0.2)
    ports = n.listening_ports(node.pid)
    path, port = None, None
    for p in ports:
        path = n.inspector_target(p)
        if path:
            port = p
            break
    if not u.check(path is not None, "user inspector found on %s" % ports):
        u.finish()
    user = n.WsClient(port, path)
    r = user.call("Runtime.evaluate", {"expression": "6*7", "returnByValue": True})
    u.check(r.get("result", {}).get("result", {}).get("value") == 42, "user session works before")
    agent = n.Agent(out, plugins, "--nodejs-mode", "inspector", "--pids", str(node.pid))
    got = agent.wait_sessions(2, 60)
    rc = agent.stop()
    u.check(rc == 0 and got >= 2, "agent ran 2 sessions against an open inspector (rc %s, %d)"
            % (rc, got))
    _, stacks = n.stacks_of(agent.profiles())
    u.check(n.frames_with(stacks, "heavyPath (") > 0, "profiled through a second session")
    u.check("already open" in agent.log_text(), "log says the inspector was already open")
    r = user.call("Runtime.evaluate", {"expression": "6*7", "returnByValue": True})
    u.check(r.get("result", {}).get("result", {}).get("value") == 42,
            "user session still works after the agent stopped: %s" % r)
    user.close()
    u.check(port in n.listening_ports(node.pid), "the user's inspector is still listening")
    u.check(node.poll() is None, "target still running")
finally:
    u.kill(node)
u.finish()
