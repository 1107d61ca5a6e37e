"""Python stacks of every CPython on the machine, end to end in the agent.

For each interpreter found (pyenv 2.7, 3.6-3.13 and Debian's python3), three
workloads run at once and one agent session profiles them all. The leaves
sleep (mode wall), so thirty interpreters do not load the machine:
  nested     <module>;main;outer_frame;middle_frame;inner_leaf;spin with the
             exact current line of every frame
  method     a class method: qualname Worker.run_method on 3.11+
  recursion  300 recursive calls, all present, none truncated
and each process carries its detected version in the application metadata.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import pyutil as py  # noqa: E402

if not os.path.exists(py.PLUGIN):
    u.skip("python plugin not built: " + py.PLUGIN)
found = py.interpreters()
if not found:
    u.skip("no CPython found (pyenv or /usr/bin/python3)")
missing = py.missing_versions(found)
print("interpreters: " + ", ".join("%s=%d.%d.%d" % ((l,) + v) for l, _, v in found))
if missing:
    print("note: expected pyenv versions missing on this machine: " + ", ".join(missing))

L = {m: py.marker_line(m) for m in ["LINE_SPIN", "LINE_INNER", "LINE_MIDDLE", "LINE_OUTER",
                                     "LINE_METHOD", "LINE_RECURSE", "LINE_RECURSE_LEAF",
                                     "LINE_SPIN_IDLE"]}
procs = []
try:
    runs = []
    for label, exe, ver in found:
        for case in ("nested", "method", "recursion"):
            p, script = py.start(exe, case, wait=False, idle=True)
            procs.append(p)
            runs.append((label, ver, case, p, script))
    py.wait_ready(procs)
    r, header, stacks, log = py.profile([p.pid for p in procs], "--python-mode", "wall",
                                       duration=6, freq=20)
    for line in log.splitlines():
        if "polyprof.python" in line or "session 1" in line:
            print("log: " + line)
    u.check(r.returncode == 0, "agent exits 0 (stderr: %s)" % r.stderr[-1500:])
    u.check(header is not None, "a profile was written")
    metas = header["application_metadata"] if header else []

    for label, ver, case, p, script in runs:
        vs = "%d.%d.%d" % ver
        mine = py.stacks_in(stacks, script)
        total = sum(c for _, c, _ in mine)
        u.check(total >= 5, "%s %s: %d samples (>= 5)" % (label, case, total))
        if not mine:
            continue
        raw = mine[0][2]
        u.check(all(f.endswith("_[p]") for f in raw[3:] if not f.startswith("appid:")),
                "%s %s: every frame is a python frame _[p]" % (label, case))
        idx = int(raw[0])
        meta = metas[idx] if idx < len(metas) else None
        u.check(isinstance(meta, dict) and meta.get("python_version") == "Python " + vs,
                "%s %s: python_version 'Python %s' in app metadata (%s)"
                % (label, case, vs, meta and meta.get("python_version")))
        u.check(any(f.startswith("appid: python: ") and script in f for f in raw),
                "%s %s: appid names the script" % (label, case))
        names = [[n for n, _, _ in fr] for fr, _, _ in mine]
        if case == "nested":
            want = [("outer_frame", L["LINE_OUTER"]), ("middle_frame", L["LINE_MIDDLE"]),
                    ("inner_leaf", L["LINE_INNER"])]
            good = 0
            for fr, c, _ in mine:
                chain = [(n, line) for n, f, line in fr]
                if chain[-4:-1] == want and chain[-1] == ("spin", L["LINE_SPIN_IDLE"]) and \
                        chain[0][0] == "<module>" and chain[1][0] == "main":
                    good += c
            u.check(good >= 0.9 * total,
                    "%s nested: <module>;main;outer_frame:%d;middle_frame:%d;inner_leaf:%d;spin:%d "
                    "in %d of %d samples" % (label, L["LINE_OUTER"], L["LINE_MIDDLE"],
                                             L["LINE_INNER"], L["LINE_SPIN_IDLE"], good, total))
        elif case == "method":
            want = "Worker.run_method" if ver >= (3, 11) else "run_method"
            good = sum(c for fr, c, _ in mine
                       if any(n == want and line == L["LINE_METHOD"] for n, _, line in fr))
            u.check(good >= 0.9 * total, "%s method: '%s (workload.py:%d)' in %d of %d samples"
                    % (label, want, L["LINE_METHOD"], good, total))
        elif case == "recursion":
            good = 0
            for fr, c, raw_frames in mine:
                rec = [x for x in fr if x[0] == "recurse"]
                if len(rec) == 301 and all(line == L["LINE_RECURSE"] for _, _, line in rec[:-1]) \
                        and rec[-1][2] == L["LINE_RECURSE_LEAF"] and \
                        not any("Truncated" in f for f in raw_frames):
                    good += c
            u.check(good >= 0.9 * total, "%s recursion: 301 recurse frames intact in %d of %d "
                    "samples" % (label, good, total))
    u.check("failed" not in log or " 0 failed" in log, "samples read without failures")
finally:
    for p in procs:
        u.kill(p)
u.finish()
