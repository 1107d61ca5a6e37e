"""Fallbacks for stripped interpreters.

The pyenv builds keep .symtab; distributions strip it. A copy of libpython
stripped of every non-dynamic symbol (strip --strip-all) loses
`interp_head` (2.7, 3.6: found by decoding PyInterpreterState_Head()) and
Py_GetVersion's `version` buffer (the version is then found by scanning
.bss for "X.Y.Z ("). The process runs with the stripped copy through
LD_LIBRARY_PATH and must still be profiled with exact stacks and version.
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import pyutil as py  # noqa: E402

if not os.path.exists(py.PLUGIN):
    u.skip("python plugin not built: " + py.PLUGIN)
strip = shutil.which("strip")
if not strip:
    u.skip("strip (binutils) not installed")
cands = []
for label, exe, ver in py.interpreters():
    if ver[:2] not in [(2, 7), (3, 6), (3, 9)] or not label.startswith("pyenv"):
        continue
    libdir = os.path.join(os.path.dirname(os.path.dirname(exe)), "lib")
    libs = [f for f in os.listdir(libdir) if f.startswith("libpython") and f.endswith(".so.1.0")]
    if libs:
        cands.append((label, exe, ver, os.path.join(libdir, libs[0])))
if not cands:
    u.skip("no shared pyenv 2.7 / 3.6 / 3.9 build to strip")

L = {m: py.marker_line(m) for m in ["LINE_OUTER", "LINE_MIDDLE", "LINE_INNER", "LINE_SPIN_IDLE"]}
procs = []
try:
    runs = []
    for label, exe, ver, lib in cands:
        d = u.tempdir("ppstrip-")
        out = os.path.join(d, os.path.basename(lib))
        subprocess.run([strip, "--strip-all", "-o", out, lib], check=True)
        nm = subprocess.run(["nm", out], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        u.check("no symbols" in nm.stdout, "%s: stripped copy has no .symtab" % label)
        env = dict(os.environ, LD_LIBRARY_PATH=d)
        p = subprocess.Popen([exe, py.WORKLOAD, "nested", "120", "idle"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=env, text=True, cwd=d)
        procs.append(p)
        runs.append((label, ver, p, out))
    py.wait_ready(procs)
    for label, ver, p, out in runs:
        with open("/proc/%d/maps" % p.pid) as f:
            u.check(out in f.read(), "%s: runs on the stripped copy" % label)
    r, header, stacks, log = py.profile([p.pid for p in procs], "--python-mode", "wall", duration=3)
    for label, ver, p, out in runs:
        vs = "%d.%d.%d" % ver
        u.check("pid %d: Python %s" % (p.pid, vs) in log, "%s: version %s found" % (label, vs))
        good = 0
        for frames, count in stacks:
            fr = py.py_frames(frames)
            chain = [(n, line) for n, _, line in fr][-4:]
            if chain == [("outer_frame", L["LINE_OUTER"]), ("middle_frame", L["LINE_MIDDLE"]),
                         ("inner_leaf", L["LINE_INNER"]), ("spin", L["LINE_SPIN_IDLE"])]:
                # the processes share the script: the version metadata tells them apart
                idx = int(frames[0])
                meta = header["application_metadata"][idx] if header else None
                if meta and meta.get("python_version") == "Python " + vs:
                    good += count
        u.check(good >= 5, "%s: exact stacks from the stripped interpreter (%d)" % (label, good))
finally:
    for p in procs:
        u.kill(p)
u.finish()
