"""A Python process that exec()s another Python in the middle of a session.

Everything the plugin holds for a pid (anchors, offsets, cached code
objects) belongs to the image it located; after an exec it must drop all
of it and locate the new interpreter, with one log line, instead of failing
sample after sample (or reading the new image with the old addresses).

  other     pyenv 3.11 os.execv()s into pyenv 3.13 (another executable)
  same      pyenv 3.13 re-execs itself: same executable, same start time,
            only the memory layout tells the images apart

Each: the stacks after the exec are the new interpreter's functions from
the same script, the version metadata names the new interpreter, the
`failed_samples` counter stays small (no storm) and the exec is logged once.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import pyutil as py  # noqa: E402

if not os.path.exists(py.PLUGIN):
    u.skip("python plugin not built: " + py.PLUGIN)
found = {"%d.%d" % v[:2]: (exe, v) for label, exe, v in py.interpreters() if label.startswith("pyenv")}
if "3.13" not in found:
    u.skip("no pyenv CPython 3.13 to exec into (have: %s)" % ", ".join(sorted(found)))

FREQ = 100
cases = []
if "3.11" in found:
    cases.append(("other", found["3.11"], found["3.13"]))
else:
    print("SKIPPED part: other (no pyenv 3.11 to exec from)")
cases.append(("same", found["3.13"], found["3.13"]))

for name, (src_exe, src_v), (dst_exe, dst_v) in cases:
    # the workload spins in before_exec() for 2 s, then execs dst running
    # the same script's "nested" case
    p, script = py.start(src_exe, "exec", seconds=60, extra=[dst_exe])
    try:
        r, header, stacks, log = py.profile([p.pid], "--python-mode", "wall", duration=6,
                                            freq=FREQ)
        u.check(r.returncode == 0, "%s: agent exits 0" % name)
        vs_src, vs_dst = "%d.%d.%d" % src_v, "%d.%d.%d" % dst_v
        lines = [l for l in log.splitlines() if "pid %d:" % p.pid in l]
        found_src = [i for i, l in enumerate(lines) if "Python %s in" % vs_src in l]
        execs = [i for i, l in enumerate(lines) if "exec'd a new program image" in l]
        u.check(len(execs) == 1, "%s: the exec is logged once (%d lines)" % (name, len(execs)))
        if execs:
            print("   " + lines[execs[0]].strip())
            after = [l for l in lines[execs[0] + 1:] if "Python %s in" % vs_dst in l]
            u.check(found_src and found_src[0] < execs[0] and after,
                    "%s: found as Python %s, then again as Python %s after the exec"
                    % (name, vs_src, vs_dst))
        mine = py.stacks_in(stacks, script)
        before = sum(c for fr, c, _ in mine if any(n == "before_exec" for n, _, _ in fr))
        nested = sum(c for fr, c, _ in mine if any(n == "inner_leaf" for n, _, _ in fr))
        # 2 s before, ~3.5 s after at 100 Hz; a loaded machine loses some
        u.check(before >= 20, "%s: stacks of the old image before the exec (%d)" % (name, before))
        u.check(nested >= 60, "%s: the new interpreter's functions after the exec (%d)"
                % (name, nested))
        line_inner = py.marker_line("LINE_INNER")
        u.check(any(fr and ("inner_leaf", "workload.py", line_inner) in fr for fr, _, _ in mine),
                "%s: with their exact lines (inner_leaf at %d)" % (name, line_inner))
        counters = (header or {}).get("polyprof", {}).get("python", {}).get("counters", {})
        failed = counters.get("failed_samples")
        samples = counters.get("samples")
        u.check(failed is not None and failed <= 3,
                "%s: no failed-sample storm (%s failed of %s)" % (name, failed, samples))
        metas = header["application_metadata"] if header else []
        idx = {int(raw[0]) for _, _, raw in mine}
        versions = {metas[i].get("python_version") for i in idx if i < len(metas) and metas[i]}
        u.check("Python " + vs_dst in versions, "%s: metadata names the new version: %s"
                % (name, versions))
    finally:
        u.kill(p)

u.finish()
