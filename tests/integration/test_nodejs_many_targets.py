"""nodejs plugin: several Node processes of one network namespace, attached
in turn, all survive and are all profiled, and none is left listening.

Every SIGUSR1 inspector opens on 127.0.0.1:9229, so processes of one
namespace can only be attached one after the other: each attach installs
the helper and closes the inspector again, which frees the port for the
next. Closing happens inside the target (inspector.close()); Node 20
crashes (SIGSEGV in WsHandler::OnCloseFrameWritten) when the client drops
its socket while Node is still writing the close frame of that session, so
the plugin reads until Node has closed it. Several rounds of fresh servers,
each attached, profiled and detached, must all survive and be profiled.
"""
import os
import sys
import time

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
work = u.tempdir("ppnode-many-")
script = os.path.join(work, "server.js")
with open(script, "w") as f:
    f.write(SERVER)
plugins = nt.plugin_dir()
dead, opened, profiled, left = [], 0, 0, []
for r in range(ROUNDS):
    procs = [nt.spawn_node([script]) for _ in range(PER_ROUND)]
    try:
        out = u.tempdir("ppnode-many-out-")
        pids = ",".join(str(p.pid) for p in procs)
        own = {}  # each server's own port, before the agent
        for p in procs:
            end = time.time() + 10
            while not nt.listening_ports(p.pid) and time.time() < end:
                time.sleep(0.1)
            own[p.pid] = nt.listening_ports(p.pid)
        res = u.run_agent(out, plugins, "--nodejs-mode", "inspector", "-f", "100", "--pids", pids, duration=4,
                          timeout=120)
        u.check(res.returncode == 0, "round %d: agent exits 0" % r)
        log = res.stderr
        opened += log.count("opened by us, closed again")
        header, stacks = u.parse_col(os.path.join(out, "last_profile.col"))
        profiled += any(any("fib" in x for x in f) for f, _ in stacks)
        for p in procs:
            if p.poll() is not None:
                dead.append((p.pid, p.returncode))
            else:
                extra = nt.listening_after(p.pid, timeout=3, keep=own[p.pid]) - own[p.pid]
                if extra:
                    left.append((p.pid, sorted(extra)))
    finally:
        for p in procs:
            u.kill(p)
u.check(not dead, "every target survived the attach and the detach: died %s" % dead)
u.check(opened >= ROUNDS * PER_ROUND, "every target's inspector was opened by us and closed "
        "again (%d)" % opened)
u.check(not left, "nothing listens after the agent stopped: %s" % left)
u.check(profiled >= ROUNDS, "fib profiled in every round (%d of %d)" % (profiled, ROUNDS))
u.finish()
