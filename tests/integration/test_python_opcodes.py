"""--python-opcodes: the instruction the leaf frame executes as an
<op: NAME> leaf, on CPython 3.11-3.13 (pyenv and Debian's), all at once in
one session, with 3.10 alongside (no opcode reader: plain stacks).

Each NAME must be one of that interpreter's own opcode names (asked from
its dis module), sit right above the Python leaf frame (add_loop), most
samples of the loop must carry one, and the specialized integer add that
3.11+ turns `x + i * 3` into must be among them.
"""
import json
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
found = [f for f in py.interpreters() if (3, 10) <= f[2][:2] <= (3, 13)]
readable = [f for f in found if f[2][:2] >= (3, 11)]
u.check(len(readable) >= 4, "3.11, 3.12, 3.13 and Debian's 3.11 present (%s)"
        % ", ".join(l for l, _, _ in readable))

WORKLOAD = os.path.join(u.SRC, "tests", "workloads", "python", "opcode_loop.py")
procs = []
try:
    for label, exe, ver in found:
        d = u.tempdir("ppop-")
        script = os.path.join(d, "opcode_loop.py")
        shutil.copy(WORKLOAD, script)
        names = json.loads(subprocess.run([exe, "-c", "import dis, json; print(json.dumps("
                                           "getattr(dis, '_all_opname', dis.opname)[:256]))"],
                                          stdout=subprocess.PIPE, text=True).stdout)
        p = subprocess.Popen([exe, script, "60"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, cwd=d, text=True)
        procs.append((label, ver, p, script, set(names)))
    for _, _, p, _, _ in procs:
        p.stdout.readline()
    time.sleep(0.5)
    r, header, stacks, log = py.profile([p.pid for _, _, p, _, _ in procs], "--python-mode",
                                        "wall", "--python-opcodes", duration=3, freq=100)
    u.check(r.returncode == 0 and header is not None, "agent ran (rc %d)" % r.returncode)
    for label, ver, p, script, names in procs:
        mine = py.stacks_in(stacks, script)
        loop = [(raw, c) for fr, c, raw in mine if fr and fr[-1][0] == "add_loop"]
        total = sum(c for _, c in loop)
        ops = {}
        for raw, c in loop:
            if raw[-1].startswith("<op: "):
                ops[raw[-1][5:-1]] = ops.get(raw[-1][5:-1], 0) + c
        if ver[:2] == (3, 10):
            u.check(total > 0 and not ops, "%s: plain stacks (%d samples)" % (label, total))
            continue
        with_op = sum(ops.values())
        u.check(total >= 50 and with_op >= 0.9 * total,
                "%s: %d of %d samples in add_loop carry an <op: ...> leaf" % (label, with_op, total))
        u.check(set(ops) <= names, "%s: every name is one of the interpreter's opcodes (%s)"
                % (label, sorted(set(ops) - names)))
        u.check(any(o.startswith("BINARY_OP") for o in ops),
                "%s: the add and multiply seen (%s)" % (label, sorted(ops.items())))
        u.check(all(py.FRAME_RE.match(raw[-2]) for raw, _ in loop if raw[-1].startswith("<op: ")),
                "%s: <op: ...> right above the Python leaf frame" % label)
finally:
    for _, _, p, _, _ in procs:
        u.kill(p)
u.finish()
