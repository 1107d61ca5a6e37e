"""Corpus: CPython's own compileall (Debian's python3) byte-compiles part of
the standard library three times over (-o 0 -o 1 -o 2), into a private
pycache prefix, under the agent as shipped.

A user looks for: every sample under `python3` with the appid gProfiler
gives `python -m compileall`; compileall's compile_dir and compile_file
frames; the share of samples whose Python frames are all named.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import corpusutil as cu  # noqa: E402
from corpusutil import u  # noqa: E402

PY = "/usr/bin/python3"
LIB = "/usr/lib/python3.11"
# measured on the 2-core machine (docs/fidelity.md): 100 % in three runs;
# a process the plugin attaches late has perf stacks only until then
FLOOR = 0.80

cu.need(PY, "Debian's python3")
cu.need(os.path.join(LIB, "compileall.py"), "the Python 3.11 standard library")

with cu.Run("python") as run:
    prefix = os.path.join(run.tmp, "pycache")
    rc = run.run([PY, "-X", "pycache_prefix=" + prefix, "-m", "compileall", "-f", "-q",
                  "-o", "0", "-o", "1", "-o", "2", "-x", "/(test|idlelib|tkinter|lib2to3)/", LIB])
    u.check(rc == 0, "compileall ran (exit %d)" % rc)
lines = run.lines()
mine = [ln for ln in lines if ln.appid and "compileall" in ln.appid]
print("appids: %s" % sorted({ln.appid for ln in mine}))
cu.dump_top(mine)
cu.check_attribution(run, mine, "compileall")
u.check(all(ln.comm.startswith("python3") for ln in mine), "compileall: every sample under comm python3*")
u.check(any(ln.has("compile_dir (") for ln in mine), "compileall: compile_dir frames present")
u.check(any(ln.has("compile_file (") for ln in mine), "compileall: compile_file frames present")
cu.check_marked(lines, lambda f: "compileall.py" in f, lambda c: c.startswith("python3"),
                lambda a: a == "python: -m compileall", "compileall")
cu.check_no_pid_comm(lines, lambda f: "compileall.py" in f or "libpython3" in f, "compileall")
cu.report("python", "python", mine, FLOOR)
u.finish()
