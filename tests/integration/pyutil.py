"""Helpers for the python plugin's integration tests (standard library only)."""
import glob
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402

WORKLOAD = os.path.join(u.SRC, "tests", "workloads", "python", "workload.py")
PLUGIN = os.path.join(u.PLUGIN_DIR, "python.so")
PYENV_EXPECTED = ["2.7", "3.6", "3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13"]


def interpreters():
    """[(label, path, (major, minor, micro))] of every CPython found: pyenv's
    builds and the distribution's python3."""
    found = []
    for exe in sorted(glob.glob("/root/.pyenv/versions/*/bin/python")):
        found.append(("pyenv " + exe.split("/")[-3], exe))
    for exe in ["/usr/bin/python3"]:
        if os.path.exists(exe):
            found.append(("debian " + os.path.basename(os.path.realpath(exe)), os.path.realpath(exe)))
    out = []
    for label, exe in found:
        try:
            v = subprocess.run([exe, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               timeout=20).stdout.strip()
            out.append((label, exe, tuple(int(x) for x in v.split("."))))
        except Exception as e:  # a broken interpreter is reported, not fatal
            print("note: %s (%s) unusable: %s" % (label, exe, e))
    return out


def missing_versions(found):
    have = {"%d.%d" % v[:2] for _, _, v in found}
    return [v for v in PYENV_EXPECTED if v not in have]


def every_interpreter():
    """interpreters(), after the checks every multi-version test makes: the
    plugin is built (else SKIPPED), a CPython exists (else SKIPPED), and
    every pyenv version is there (else a failed check)."""
    if not os.path.exists(PLUGIN):
        u.skip("python plugin not built: " + PLUGIN)
    found = interpreters()
    if not found:
        u.skip("no CPython found")
    missing = missing_versions(found)
    u.check(not missing, "every pyenv CPython present (missing: %s)" % ", ".join(missing))
    return found


def workload(name):
    """The path of tests/workloads/python/<name>."""
    return os.path.join(u.SRC, "tests", "workloads", "python", name)


def marker_line(marker, path=WORKLOAD):
    """The number of the line of path that ends in `# marker`."""
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if line.rstrip().endswith("# " + marker):
                return i
    raise KeyError(marker)


def line_with(text, path):
    """The number of the first line of path that contains text."""
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if text in line:
                return i
    raise KeyError(text)


def start_copy(exe, path, args, prefix, env=None):
    """Starts exe on a private copy of the workload at path (so its frames'
    file names say which process they came from), without waiting for it.
    Returns (process, path of the copy)."""
    d = u.tempdir(prefix)
    script = os.path.join(d, os.path.basename(path))
    shutil.copy(path, script)
    p = subprocess.Popen([exe, script] + list(args), stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, cwd=d, text=True, env=env)
    return p, script


def start(exe, case, seconds=120, prefix=(), script_dir=None, wait=True, idle=False,
          extra=()):
    """Starts the workload from a private copy (so its frames' file names
    say which process they came from) and waits until it runs its case.
    Returns (process, path of the script)."""
    d = script_dir or u.tempdir("ppwl-")
    script = os.path.join(d, "workload.py")
    shutil.copy(WORKLOAD, script)
    p = subprocess.Popen(list(prefix) + [exe, script, case, str(seconds)] + (["idle"] if idle else []) + list(extra), stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, cwd=d, text=True)
    if wait:
        wait_ready([p])
    return p, script


def wait_ready(procs, settle=0.3):
    for p in procs:
        p.stdout.readline()  # "ready"
    time.sleep(settle)


FRAME_RE = re.compile(r"^(.*) \((.*):(\d+)\)_\[p\]$")


def py_frames(frames):
    """Python frames of a .col stack as (name, file basename, line), root first."""
    out = []
    for f in frames:
        m = FRAME_RE.match(f)
        if m:
            out.append((m.group(1), os.path.basename(m.group(2)), int(m.group(3))))
    return out


def profile(pids, *extra, duration=4, freq=20):
    out = u.tempdir("ppout-")
    plugins = u.plugin_dir_with(PLUGIN)
    r = u.run_agent(out, plugins, "--pids", ",".join(str(p) for p in pids), "-f", str(freq),
                    *extra, duration=duration, timeout=180)
    col = os.path.join(out, "last_profile.col")
    log = ""
    logf = None
    cmd = r.args
    if "--log-file" in cmd:
        logf = cmd[cmd.index("--log-file") + 1]
        if os.path.exists(logf):
            with open(logf, errors="replace") as f:
                log = f.read()
    header, stacks = u.parse_col(col) if os.path.exists(col) else (None, [])
    return r, header, stacks, log


def stacks_in(stacks, script):
    """(python frames root first, count, raw frames) of the stacks whose
    frames come from this script copy."""
    out = []
    for frames, count in stacks:
        if any("(" + script + ":" in f for f in frames):
            out.append((py_frames(frames), count, frames))
    return out
