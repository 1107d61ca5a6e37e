"""Fault: shells that exec into Python, Ruby and PHP in the middle of a run.

Three /bin/sh processes sleep, then exec an interpreter in the same pid
(same start time: only the executable changes). A continuous agent with the
python, ruby and php plugins, handed the three pids: the core re-announces
each exec'd process at a session boundary to the plugin its new image
matches, and the kit's target table makes that plugin look at it again. A
later session must hold each runtime's own frames for its pid, under the
interpreter's comm, and no stack may keep the shell's name after the exec.

A fourth process is Python first (the python plugin's target) and execs
Ruby: the python plugin must let it go and the ruby plugin take it, so a
later session has its Ruby frames and none of its Python ones.
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import faultutil as fu  # noqa: E402
import pputil as u  # noqa: E402

so = [os.path.join(u.PLUGIN_DIR, n + ".so") for n in ("python", "ruby", "php")]
for p in so:
    if not os.path.exists(p):
        u.skip("plugin not built: " + p)
runtimes = {"python": "/usr/bin/python3", "ruby": shutil.which("ruby"),
            "php": shutil.which("php") or shutil.which("php8.2")}
for name, exe in runtimes.items():
    if not exe:
        u.skip("%s not installed" % name)

d = u.tempdir("ppexecrt-")
scripts = {
    "python": ("def pp_exec_py():\n    x = 0\n    while True:\n        x += 1\n\npp_exec_py()\n", "_[p]"),
    "ruby": ("def pp_exec_rb\n  x = 0\n  loop { x += 1 }\nend\npp_exec_rb\n", "_[rb]"),
    "php": ("<?php\nfunction pp_exec_php() {\n  $x = 0;\n  while (true) { $x = $x + 1; }\n}\n"
            "pp_exec_php();\n", "_[php]"),
}
shells = {}
try:
    for name, (text, _) in scripts.items():
        path = os.path.join(d, "exec_" + name + {"python": ".py", "ruby": ".rb", "php": ".php"}[name])
        with open(path, "w") as f:
            f.write(text)
        exe = os.path.realpath(runtimes[name])
        shells[name] = (subprocess.Popen(["/bin/sh", "-c", 'sleep 4; exec "$0" "$1"', exe, path],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
                        os.path.basename(exe)[:15])
    rb_path = os.path.join(d, "exec_ruby.rb")
    py_src = ("import os, time\nt = time.time()\ndef pp_before_exec():\n"
              "    while time.time() - t < 4:\n        pass\npp_before_exec()\n"
              "os.execv(%r, [%r, %r])\n" % (os.path.realpath(runtimes["ruby"]), "ruby", rb_path))
    shells["py2rb"] = (subprocess.Popen([os.path.realpath(runtimes["python"]), "-c", py_src],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
                       os.path.basename(os.path.realpath(runtimes["ruby"]))[:15])
    pids = ",".join(str(p.pid) for p, _ in shells.values())
    out = u.tempdir("ppout-")
    agent = fu.Agent(out, u.plugin_dir_with(*so), "", "--pids", pids, "--php-mode", "phpspy",
                     "-f", "49", duration=3)
    try:
        u.check(agent.wait_sessions(5, timeout=150), "five sessions ran")
        rc = agent.stop()
    finally:
        agent.kill()
    u.check(rc == 0, "agent exits 0 (got %s)" % rc)
    sessions = [u.parse_col(p)[1] for p in fu.cols(out)]
    u.check(len(sessions) >= 4, "at least four profiles (%d)" % len(sessions))
    first = sessions[0]
    for name, (text, suffix) in scripts.items():
        proc, comm = shells[name]
        u.check(proc.poll() is None, "%s: the exec'd process still runs" % name)
        now = open("/proc/%d/comm" % proc.pid).read().strip()
        u.check(now == comm, "%s: the shell became %s (%s)" % (name, comm, now))
        fn = "pp_exec_" + {"python": "py", "ruby": "rb", "php": "php"}[name]
        u.check(not any(fn in x for f, _ in first for x in f), "%s: session 1 (the shell) has none of it" % name)
        # the last complete session (the final one is cut short by SIGTERM)
        last = sessions[-2]
        mine = [(f, c) for f, c in last if any(fn in x and x.endswith(suffix) for x in f)]
        total = sum(c for _, c in mine)
        u.check(total >= 10, "%s: a later session has %s frames of %s for the pid (%d samples)"
                % (name, suffix, fn, total))
        u.check(mine and all(f[2] == comm for f, _ in mine),
                "%s: under the interpreter's comm %s: %s" % (name, comm, sorted({f[2] for f, _ in mine})))
    u.check(not any(f[2] == "sh" for f, _ in sessions[-2]), "no stack keeps the shell's name after the exec")
    proc, comm = shells["py2rb"]
    was = [(f, c) for f, c in first if any("pp_before_exec" in x and x.endswith("_[p]") for x in f)]
    u.check(sum(c for _, c in was) >= 5, "py2rb: session 1 has its Python frames (%d)" % sum(c for _, c in was))
    last = sessions[-2]
    rb = sum(c for f, c in last if any("pp_exec_rb" in x and x.endswith("_[rb]") for x in f) and f[2] == comm)
    u.check(rb >= 10, "py2rb: a later session has its Ruby frames under %s (%d)" % (comm, rb))
    u.check(not any("pp_before_exec" in x for f, _ in last for x in f),
            "py2rb: and none of its old Python frames")
finally:
    for p, _ in shells.values():
        u.kill(p)
u.finish()
