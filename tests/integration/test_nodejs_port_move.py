"""nodejs plugin: moving the inspector we opened off port 9229 never crashes
the target.

The move runs inspector.close() + open(0) inside the target. Node 20 crashes
(SIGSEGV in WsHandler::OnCloseFrameWritten) when the client drops its socket
while Node is still writing the close frame of that session; the plugin once
did exactly that right after asking for the move, and 2 of 15 targets died
in a first reproduction. The plugin now reads until Node has closed the
session. Several rounds of fresh servers, each attached (SIGUSR1, move,
profile, detach), must all survive and all be profiled.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "workloads", "nodejs"))
import pputil as u  # noqa: E402
import nodetest as nt  # noqa: E402

nt.require_node()
SERVER = """
const http = require('http');
function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
http.createServer((q, r) => { fib(20); r.end('ok'); }).listen(0, '127.0.0.1');
setInterval(() => fib(26), 10);
"""
ROUNDS, PER_ROUND = 6, 3
work = u.tempdir("ppnode-move-")
script = os.path.join(work, "server.js")
with open(script, "w") as f:
    f.write(SERVER)
plugins = nt.plugin_dir()
dead, moved, profiled = [], 0, 0
for r in range(ROUNDS):
    procs = [nt.spawn_node([script]) for _ in range(PER_ROUND)]
    try:
        out = u.tempdir("ppnode-move-out-")
        pids = ",".join(str(p.pid) for p in procs)
        res = u.run_agent(out, plugins, "--nodejs-mode", "inspector", "-f", "100", "--pids", pids, duration=4,
                          timeout=120)
        u.check(res.returncode == 0, "round %d: agent exits 0" % r)
        log = res.stderr
        moved += log.count("opened by us")
        header, stacks = u.parse_col(os.path.join(out, "last_profile.col"))
        profiled += any(any("fib" in x for x in f) for f, _ in stacks)
        for p in procs:
            if p.poll() is not None:
                dead.append((p.pid, p.returncode))
    finally:
        for p in procs:
            u.kill(p)
u.check(not dead, "every target survived the move and the detach: died %s" % dead)
u.check(moved >= ROUNDS * PER_ROUND, "every target's inspector was opened by us and moved (%d)"
        % moved)
u.check(profiled >= ROUNDS, "fib profiled in every round (%d of %d)" % (profiled, ROUNDS))
u.finish()
