"""threading.Thread names as <thread: NAME> root frames, on every CPython
found at once (pyenv 2.7, 3.6-3.13, Debian's python3).

The program names its threads with threading.Thread(name=...)
("db-writer", "http-worker"; the main thread is "MainThread"), not
natively, so the kernel calls them by the process's name on <= 3.13: the
names can only come from threading's own objects. A third thread
("py-named") also names itself with prctl: the name given to threading
still wins (the kernel's wins only over a made-up Thread-N, as
test_python_threads.py checks).

  --python-mode wall --python-thread-names
      each worker's function sits under its own name, the main thread's
      under <thread: MainThread>, and no stack of one thread carries
      another's name
  --python-mode wall --python-thread-names --python-main-thread-only
      only main_work, under <thread: MainThread>
  --python-native --python-thread-names (cpu mode), on a <= 3.10 and a
  3.11+ interpreter
      the same names on the mixed native and Python stacks, the name
      right above the outermost native frame (the process's startup)
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import pyutil as py  # noqa: E402

PROGRAM = r'''
import ctypes, sys, threading, time
end = time.time() + float(sys.argv[1])


def db_writer_work():
    x = 0
    while time.time() < end:
        x += 1


def http_worker_work():
    x = 0
    while time.time() < end:
        x += 1


def renamed_work():
    # named natively too: the name given to threading.Thread still wins
    ctypes.CDLL(None).prctl(15, ctypes.c_char_p(b"native-name"), 0, 0, 0)  # PR_SET_NAME
    x = 0
    while time.time() < end:
        x += 1


def main_work():
    x = 0
    while time.time() < end:
        x += 1


for fn, name in ((db_writer_work, "db-writer"), (http_worker_work, "http-worker"),
                 (renamed_work, "py-named")):
    t = threading.Thread(target=fn, name=name)
    t.daemon = True
    t.start()
print("ready")
sys.stdout.flush()
main_work()
'''

# each thread's function and the name it must be under
EXPECTED = {"db_writer_work": "<thread: db-writer>",
            "http_worker_work": "<thread: http-worker>",
            "renamed_work": "<thread: py-named>",
            "main_work": "<thread: MainThread>"}

found = [f for f in py.every_interpreter() if f[2][:2] <= (3, 13)]  # 3.14+: the kernel's names (docs/python.md)


def names_by_function(mine):
    """{function: {thread frames of the stacks it is in}}"""
    out = {}
    for fr, _, raw in mine:
        threads = frozenset(f for f in raw if f.startswith("<thread: "))
        for name, _, _ in fr:
            if name.rsplit(".", 1)[-1] in EXPECTED:
                out.setdefault(name.rsplit(".", 1)[-1], set()).add(threads)
    return out


procs = []
try:
    for label, exe, ver in found:
        d = u.tempdir("pptn-")
        script = os.path.join(d, "named_threads.py")
        with open(script, "w") as f:
            f.write(PROGRAM)
        p = subprocess.Popen([exe, script, "60"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, cwd=d, text=True)
        procs.append((label, p, script))
    py.wait_ready([p for _, p, _ in procs])
    pids = [p.pid for _, p, _ in procs]

    r, header, stacks, log = py.profile(pids, "--python-mode", "wall", "--python-thread-names",
                                        duration=3, freq=50)
    u.check(r.returncode == 0 and header is not None, "names: agent ran (rc %d)" % r.returncode)
    for label, p, script in procs:
        mine = py.stacks_in(stacks, script)
        seen = names_by_function(mine)
        for fn, want in sorted(EXPECTED.items()):
            u.check(seen.get(fn) == {frozenset([want])},
                    "%s: %s only under %s (%s)" % (label, fn, want, seen.get(fn)))
        u.check(all(raw.index(t) == min(i for i, f in enumerate(raw) if f.endswith("_[p]")) - 1
                    for _, _, raw in mine for t in raw if t.startswith("<thread: ")),
                "%s: <thread: ...> right above the Python root frame" % label)

    r, header, stacks, log = py.profile(pids, "--python-mode", "wall", "--python-thread-names",
                                        "--python-main-thread-only", duration=2, freq=50)
    u.check(r.returncode == 0 and header is not None, "main only: agent ran (rc %d)" % r.returncode)
    for label, p, script in procs:
        seen = names_by_function(py.stacks_in(stacks, script))
        u.check(seen == {"main_work": {frozenset(["<thread: MainThread>"])}},
                "%s main thread only: main_work under <thread: MainThread> alone (%s)"
                % (label, seen))

    # mixed native and Python stacks: one interpreter of each frame layout
    pick = {}
    for label, p, script in procs:
        ver = next(v for lb, _, v in found if lb == label)
        pick.setdefault(ver[:2] >= (3, 11), (label, p, script))
    r, header, stacks, log = py.profile([p.pid for _, p, _ in pick.values()], "--python-native",
                                        "--python-thread-names", duration=3, freq=99)
    u.check(r.returncode == 0 and header is not None, "native: agent ran (rc %d)" % r.returncode)
    for label, p, script in pick.values():
        mine = py.stacks_in(stacks, script)
        seen = names_by_function(mine)
        for fn, want in sorted(EXPECTED.items()):
            u.check(seen.get(fn) == {frozenset([want])},
                    "%s native: %s only under %s (%s)" % (label, fn, want, seen.get(fn)))
        u.check(any(f.endswith("_[pn]") for _, _, raw in mine for f in raw),
                "%s native: native frames in the stacks" % label)
        u.check(all(raw.index(t) == min(i for i, f in enumerate(raw)
                                        if f.endswith("_[p]") or f.endswith("_[pn]")) - 1
                    for _, _, raw in mine for t in raw if t.startswith("<thread: ")),
                "%s native: <thread: ...> right above the outermost native frame" % label)
finally:
    for _, p, _ in procs:
        u.kill(p)
u.finish()
