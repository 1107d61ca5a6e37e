"""Python processes that come and go, change, or hide their files.

  exit      a target of every interpreter found exits in the middle of a
            session: one log line each, their samples until then are kept,
            the target that stays goes on
  exec      a target that execs another interpreter (pyenv -> Debian's
            static python3): found again, stacks and version of the new one
  mount ns  a target of every interpreter whose executable, libpython and
            script exist only in its private mount namespace (a tmpfs
            mounted after unshare -m): read through /proc/PID/root, frames
            carry the paths as the target sees them
  blocking  python.blocking holds the threads (ptrace) per sample, a
            target of every interpreter: exact
            stacks, cpu mode still tells the sleeper from the busy thread,
            and the target is released (not traced) and alive afterwards
"""
import glob
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import pyutil as py  # noqa: E402

if not os.path.exists(py.PLUGIN):
    u.skip("python plugin not built: " + py.PLUGIN)
found = py.interpreters()
if not found:
    u.skip("no CPython found")
pyenv = [f for f in found if f[0].startswith("pyenv") and f[2] >= (3, 0)]
debian = [f for f in found if f[0].startswith("debian")]
first = (pyenv or found)[-1]

# --- exit in the middle of a session: one leaving target per interpreter ---
procs = []
try:
    stay, stay_script = py.start(first[1], "nested", idle=True)
    procs.append(stay)
    leaving = []
    for label, exe, ver in found:
        leave, leave_script = py.start(exe, "nested", seconds=2.5, idle=True, wait=False)
        procs.append(leave)
        leaving.append((label, leave, leave_script))
    py.wait_ready([p for _, p, _ in leaving])
    r, header, stacks, log = py.profile([p.pid for p in procs], "--python-mode", "wall",
                                        duration=5)
    u.check(r.returncode == 0, "exit: agent exits 0" + ("" if r.returncode == 0 else " (%s)" % r.stderr[-500:]))
    kept = sum(c for _, c, _ in py.stacks_in(stacks, stay_script))
    for label, leave, leave_script in leaving:
        if log.count("pid %d: exited" % leave.pid) != 1:
            print("\n".join(l for l in log.splitlines() if "pid %d:" % leave.pid in l))
        u.check(log.count("pid %d: exited" % leave.pid) == 1,
                "exit %s: one log line says pid %d exited" % (label, leave.pid))
        gone = sum(c for _, c, _ in py.stacks_in(stacks, leave_script))
        u.check(gone >= 5, "exit %s: samples from before the exit are kept (%d)" % (label, gone))
        u.check(kept >= 2 * gone, "exit %s: the other target is sampled all along (%d vs %d)"
                % (label, kept, gone))
finally:
    for p in procs:
        u.kill(p)

# --- exec another interpreter ---
if not (pyenv and debian):
    print("SKIPPED part: exec needs a pyenv python and /usr/bin/python3")
else:
    src, dst = pyenv[-1], debian[0]
    # the workload execs the interpreter given as its 4th argument
    p, script = py.start(src[1], "exec", seconds=60, extra=[dst[1]])
    try:
        r, header, stacks, log = py.profile([p.pid], "--python-mode", "wall", duration=6)
        vs_src, vs_dst = "%d.%d.%d" % src[2], "%d.%d.%d" % dst[2]
        u.check("pid %d: Python %s" % (p.pid, vs_src) in log, "exec: first found as Python " + vs_src)
        u.check("pid %d: exec'd a new program image" % p.pid in log, "exec: the exec is noticed and logged")
        u.check("pid %d: Python %s" % (p.pid, vs_dst) in log, "exec: found again as Python " + vs_dst)
        mine = py.stacks_in(stacks, script)
        before = sum(c for fr, c, _ in mine if any(n == "before_exec" for n, _, _ in fr))
        after = sum(c for fr, c, _ in mine if any(n == "outer_frame" for n, _, _ in fr))
        u.check(before >= 5 and after >= 5, "exec: stacks before (%d) and after (%d) the exec"
                % (before, after))
        metas = header["application_metadata"] if header else []
        idx = {int(raw[0]) for _, _, raw in mine}
        versions = {metas[i].get("python_version") for i in idx if i < len(metas) and metas[i]}
        u.check("Python " + vs_dst in versions, "exec: metadata names the new version: %s" % versions)
    finally:
        u.kill(p)

# --- a private mount namespace, every interpreter ---
# Each target runs from a tmpfs mounted after unshare -m: its executable,
# its libpython (found there through LD_LIBRARY_PATH, which wins over the
# pyenv RUNPATH) and the script exist only inside its namespace, so the
# plugin must read them through /proc/PID/root. The standard library stays
# where PYTHONHOME says (host paths are visible inside too).
unshare = shutil.which("unshare")
if not unshare:
    print("SKIPPED part: mount namespace needs unshare (util-linux)")
else:
    ns = []
    try:
        for label, exe, ver in found:
            d = u.tempdir("ppns-")
            real = os.path.realpath(exe)
            prefix = os.path.dirname(os.path.dirname(real))
            libs = glob.glob(os.path.join(prefix, "lib", "libpython*.so.1.0"))
            inner = os.path.join(d, os.path.basename(real))
            home = "PYTHONHOME=%s " % prefix if label.startswith("pyenv") else ""
            sh = ("mount -t tmpfs tmpfs {d} && cp {exe} {libs} {d}/ && cp {wl} {d}/workload.py && "
                  "exec env LD_LIBRARY_PATH={d} {home}{inner} {d}/workload.py nested 60 idle"
                  ).format(d=d, exe=real, libs=" ".join(libs), inner=inner, wl=py.WORKLOAD,
                           home=home)
            p = subprocess.Popen([unshare, "-m", "--propagation", "private", "sh", "-c", sh],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            ns.append((label, ver, p, d, inner, libs))
        py.wait_ready([x[2] for x in ns])
        r, header, stacks, log = py.profile([x[2].pid for x in ns], "--python-mode", "wall",
                                            duration=3)
        for label, ver, p, d, inner, libs in ns:
            u.check(not os.path.exists(inner),
                    "mount ns %s: the interpreter is invisible from the host" % label)
            with open("/proc/%d/maps" % p.pid) as f:
                maps = f.read()
            u.check(inner in maps and all(os.path.join(d, os.path.basename(x)) in maps
                                          for x in libs),
                    "mount ns %s: runs the copies inside the namespace" % label)
            mine = py.stacks_in(stacks, os.path.join(d, "workload.py"))
            good = sum(c for fr, c, _ in mine if [n for n, _, _ in fr][-4:-1] ==
                       ["outer_frame", "middle_frame", "inner_leaf"])
            u.check(good >= 5, "mount ns %s: python stacks with the paths the target sees (%d)"
                    % (label, good))
            u.check("pid %d: Python %d.%d.%d" % ((p.pid,) + ver) in log,
                    "mount ns %s: version read through /proc/PID/root" % label)
    finally:
        for x in ns:
            u.kill(x[2])
# --- blocking mode, every interpreter (threads are held per sample) ---
held = []
try:
    for label, exe, ver in found:
        p, script = py.start(exe, "threads", wait=False)
        held.append((label, p, script))
    py.wait_ready([x[1] for x in held])
    r, header, stacks, log = py.profile([x[1].pid for x in held], "--python-mode", "cpu",
                                        "--python-blocking", duration=4, freq=50)
    u.check(r.returncode == 0, "blocking: agent ran (rc %d)" % r.returncode)
    for label, p, script in held:
        mine = py.stacks_in(stacks, script)
        busy = sum(c for fr, c, _ in mine if any(n.endswith("busy_thread") for n, _, _ in fr))
        sleeper = sum(c for fr, c, _ in mine if any(n.endswith("sleeper_thread") for n, _, _ in fr))
        # a dozen busy targets share two CPUs: each runs a fraction of the time
        u.check(busy >= 10, "blocking %s: busy thread sampled (%d)" % (label, busy))
        u.check(sleeper <= 0.25 * busy,
                "blocking %s: cpu mode still drops the sleeper (%d)" % (label, sleeper))
        with open("/proc/%d/status" % p.pid) as f:
            status = f.read()
        u.check("TracerPid:\t0" in status, "blocking %s: target released (TracerPid 0)" % label)
        u.check(p.poll() is None, "blocking %s: target alive" % label)
finally:
    for x in held:
        u.kill(x[1])
u.finish()
