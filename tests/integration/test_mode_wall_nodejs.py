"""--mode wall for Node.js in inspector mode (mapped onto
nodejs.include_idle): the main thread burns 20 ms and waits 20 ms in the
event loop; the wall profile holds the burner and V8's (idle) samples, the
cpu profile the burner and no (idle). Sessions after the first (which
includes the attach) are judged."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workloads",
                                "nodejs"))
import nodetest as n  # noqa: E402
import pputil as u  # noqa: E402
from pputil import check  # noqa: E402

n.require_node()
script = os.path.join(u.SRC, "tests", "workloads", "modes", "sleep_burn.js")


def run(mode):
    # a network namespace of its own: port 9229 is its inspector's whatever
    # other Node processes on the host hold
    node = n.spawn_node_own_netns([script, "120"])
    try:
        out = u.tempdir("ppmode-node-")
        agent = n.Agent(out, n.plugin_dir(), "--nodejs-mode", "inspector", "--mode", mode,
                        "--pids", str(node.pid))
        agent.wait_sessions(4, 90)
        rc = agent.stop()
        check(rc == 0, "%s: agent exits 0 (rc %s)" % (mode, rc))
        header, stacks = n.stacks_of(agent.profiles()[1:])
        check(header is not None and header.get("profile_type") == mode,
              "%s: header type %s" % (mode, mode))
        mine = [(f, c) for f, c in stacks if len(f) > 2 and f[2] == "node"]
        # V8 may inline burner() into turn(): either one is the burning code
        burn = sum(c for f, c in mine if any(x.startswith(("burner (", "turn (")) for x in f))
        idle = sum(c for f, c in mine if any(x.startswith("(idle)") for x in f))
        print("%s: burner %d, (idle) %d" % (mode, burn, idle))
        if not burn or not mine:
            print(agent.stderr[-3000:])
            for f, c in sorted(stacks, key=lambda x: -x[1])[:8]:
                print(c, ";".join(f)[:300])
        return burn, idle
    finally:
        u.kill(node)


burn, idle = run("wall")
check(burn > 0 and idle > 0, "wall: the burner (%d) and the event-loop wait (%d)" % (burn, idle))
burn, idle = run("cpu")
check(burn > 0, "cpu: the burner (%d)" % burn)
check(idle == 0, "cpu: no (idle) samples (%d)" % idle)
u.finish()
