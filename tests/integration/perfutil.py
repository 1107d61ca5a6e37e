"""Helpers for the perf plugin's integration tests (standard library only).

The tests sample the real machine with perf_event_open through
pp_perf_harness (tests/tools), which loads build/plugins/perf.so the way the
agent does and writes the emitted stacks as collapsed lines:
    <pid>;<comm>;<root>;...;<leaf> <count>
plus a "# {json}" line with counters and application metadata.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pputil  # noqa: E402

SRC = pputil.SRC
BUILD = pputil.BUILD
TOOLS = os.environ.get("PP_TEST_TOOLS_DIR", os.path.join(BUILD, "tests", "tools"))
HARNESS = os.path.join(TOOLS, "pp_perf_harness")
PLUGIN = os.path.join(pputil.PLUGIN_DIR, "perf.so")
WORKLOADS = os.path.join(SRC, "tests", "workloads", "perf")


def require_perf():
    """Skips (exit 77) unless the harness, the plugin and perf events work.

    Raises the test's own priority: on a shared machine the session's cgroup
    may get a small CPU share, and every child (compilers, workloads, the
    forked Python before it execs) must not starve behind the workloads."""
    _boost(-19)()
    for p in (HARNESS, PLUGIN):
        if not os.path.exists(p):
            pputil.skip("not built: " + p)
    if os.geteuid() != 0:
        pputil.skip("system-wide perf sampling needs root (or CAP_PERFMON)")
    if not shutil.which("cc"):
        pputil.skip("no C compiler to build the workloads")
    r = subprocess.run([HARNESS, PLUGIN, "-d", "0.2", "-F", "11", "-o", os.devnull],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    if r.returncode == 4:
        pputil.skip("perf events unavailable here: " + r.stderr.strip().splitlines()[-1])


def build_c(name, out_dir, *flags, src=None):
    out = os.path.join(out_dir, name)
    src = src or os.path.join(WORKLOADS, name.split("_")[0] + ".c")
    subprocess.run(["cc", "-g", "-o", out, src] + list(flags), check=True)
    return out


def build_hot(out_dir):
    """hot.c with frame pointers (also in leaves, as distributions build)
    and without."""
    fp = build_c("hot_fp", out_dir, "-O1", "-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer",
                 src=os.path.join(WORKLOADS, "hot.c"))
    nofp = build_c("hot_nofp", out_dir, "-O2", "-fomit-frame-pointer",
                   src=os.path.join(WORKLOADS, "hot.c"))
    return fp, nofp


def _per_session(text):
    """The header's counters as one dict per session, in order. The harness
    writes each key once per session into one JSON object, so the object
    holding "samples" is read as pairs and split where a key repeats."""
    runs = []

    def hook(items):
        keys = [k for k, _ in items]
        if "samples" in keys and all(isinstance(v, int) for _, v in items):
            for k, v in items:
                if not runs or k in runs[-1]:
                    runs.append({})
                runs[-1][k] = v
        return dict(items)

    json.loads(text, object_pairs_hook=hook)
    return runs


class Profile:
    def __init__(self, path, stderr=""):
        self.stacks = []  # (pid, comm, frames root-first, count)
        self.header = {}
        self.session_counters = []  # one dict of counters per session
        self.stderr = stderr
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.rstrip("\n")
                if line.startswith("# "):
                    self.header = json.loads(line[2:])
                    # the harness repeats the counters once per session
                    self.session_counters = _per_session(line[2:])
                    continue
                if not line:
                    continue
                stack, _, count = line.rpartition(" ")
                parts = stack.split(";")
                self.stacks.append((int(parts[0]), parts[1], parts[2:], int(count)))

    def of(self, pid):
        return [(frames, c) for p, _, frames, c in self.stacks if p == pid]

    def comms(self, pid):
        return {comm for p, comm, _, _ in self.stacks if p == pid}

    @property
    def counters(self):
        return self.header.get("counters", {})

    def dump(self, pid, limit=8):
        rows = sorted(self.of(pid), key=lambda x: -x[1])[:limit]
        for frames, c in rows:
            print("   %5d %s" % (c, ";".join(frames)[-220:]))


def profile(seconds, freq=99, mode="fp", opts=(), lists=(), sessions=1, timeout=300, on_start=None,
            verbose=False):
    """Runs the harness; on_start() is called (in a thread) once the plugin
    has started sampling, which can take seconds on a busy machine. verbose:
    the plugin's debug lines are in the profile's stderr."""
    fd, out = tempfile.mkstemp(prefix="ppperf-", suffix=".col")
    os.close(fd)
    cmd = [HARNESS, PLUGIN, "-d", str(seconds), "-F", str(freq), "-m", mode, "-o", out,
           "-s", str(sessions)]
    if verbose:
        cmd.append("-v")
    for o in opts:
        cmd += ["--opt", o]
    for l in lists:
        cmd += ["--list", l]
    # the sampler above the workloads, so it drains its rings in time
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         preexec_fn=_boost(-20))
    err = []
    threads = []

    def reader():
        for line in p.stderr:
            err.append(line)
            if on_start and "sampling" in line and line.startswith("[info]"):
                t = threading.Thread(target=on_start)
                t.start()
                threads.append(t)

    rt = threading.Thread(target=reader)
    rt.start()
    try:
        rc = p.wait(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
        rt.join()
        for t in threads:
            t.join()
    stderr = "".join(err)
    if rc != 0:
        print(stderr)
        raise RuntimeError("harness failed with %d" % rc)
    prof = Profile(out, stderr)
    os.unlink(out)
    return prof


def profile_until(pids, need_samples, seconds, attempts=6, need_each=0, **kw):
    """Profiles sessions of `seconds` until the pids have need_samples
    between them, and each at least need_each (the machine may be shared:
    a session's cgroup can get a small share of the CPUs), merging the
    profiles."""
    merged = None
    for _ in range(attempts):
        p = profile(seconds, **kw)
        kw.pop("on_start", None)
        if merged is None:
            merged = p
        else:
            merged.stacks += p.stacks
            for k, v in p.counters.items():
                if isinstance(v, int):
                    merged.header.setdefault("counters", {})
                    merged.header["counters"][k] = merged.header["counters"].get(k, 0) + v
        per = {pid: 0 for pid in pids}
        for pid, _, _, c in merged.stacks:
            if pid in per:
                per[pid] += c
        got = sum(per.values())
        if got >= need_samples and min(per.values()) >= need_each:
            break
        print("only %d samples of the workload so far (busy machine?): sampling again" % got)
    return merged


def hot_ratio(prof, pid, need="main"):
    """(share of hot_a among resolved hot samples, resolved share, total hot samples).
    A hot sample is one whose leaf user frame is hot_a/hot_b; it is resolved
    if its stack reaches `need`."""
    a = b = total = 0
    for frames, c in prof.of(pid):
        user = [f for f in frames if not f.endswith("_[k]")]
        if not user or user[-1] not in ("hot_a", "hot_b"):
            continue
        total += c
        if need in user:
            if user[-1] == "hot_a":
                a += c
            else:
                b += c
    if a + b == 0:
        return 0.0, 0.0, total
    return a / (a + b), (a + b) / total, total


def _boost(n):
    def f():
        try:
            os.setpriority(os.PRIO_PROCESS, 0, n)
        except OSError:
            pass
    return f


def spawn(cmd):
    """A workload at raised priority (root): the shared CI machine may be
    saturated by other tests, and the checks need the workload to run."""
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=_boost(-19))


def wait_all(procs):
    for p in procs:
        pputil.kill(p)
