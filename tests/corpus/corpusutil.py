"""The real-software corpus (tests/corpus/README.md): helpers to run one
program nobody here wrote under the whole agent, as shipped, and check what
a user would look for in its profile.

Each test starts the agent with config/polyprof.yaml and every runtime
plugin on, waits until perf samples, runs its program to completion,
stops the agent with SIGTERM (which writes the session it cut short) and
reads the .col. The program's CPU time (getrusage of the children) says how
many samples it should have: with every sample carrying its process name
(and appid), the samples found under that name are close to it.
"""
import os
import re
import resource
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import pputil as u  # noqa: E402,F401

# the plugins the shipped config leaves off, on as a user turns them on
# (Node.js is on by default, in v8 mode)
RUNTIME_MODES = ["--php-mode", "phpspy", "--dotnet-mode", "dotnet-trace"]
# one frame suffix (added by the .col writer) per runtime's own frames
SUFFIXES = {
    "python": ("_[p]",),
    "java": ("_[j]", "_[i]", "_[0]", "_[1]"),
    "nodejs": None,  # "fn (file.js:line)" and V8's tier: _[0] _[1] _[j] _[i] or none
    "dotnet": ("_[net]",),
    "ruby": ("_[rb]",),
    "php": ("_[php]",),
}
# frames that stand for runtime code nothing named
UNNAMED = re.compile(r"^\[jit: |^\(/tmp/perf-\d+\.map\)|^\[unknown\]|^\[unknown_Java\]|^\(unknown\)|^<unknown>")
PID_COMM = re.compile(r"^:\d+$")
# a runtime's own word that the sampled thread ran none of its code (V8's
# helper threads, a JVM's compiler and GC threads): named, not missing
NOT_RUNTIME = re.compile(r"^\((native thread|program|garbage collector|idle)\)$|^\[no_Java_frame\]$")
JS_FRAME = re.compile(r"\.[cm]?[jt]s(:\d+){0,2}\)(_\[[01ji]\])?$")
# Node's and V8's own C++ named in the v8 mode's stacks (the compiler, the
# GC, libuv): the runtime's code, named
NODE_NATIVE = re.compile(r"^(v8::|node::|uv_|Builtins_)")
# a process replacing its program (a fork of the runtime's process in
# execve(), the kernel still tearing down the old image under the old
# name): perf named all of it, and no runtime code ran in it
EXECVE = re.compile(r"^(__GI___execve|__execve|execve|__GI_execve)$")


def in_execve(ln):
    return bool(ln.frames) and EXECVE.match(ln.frames[0]) is not None


def need(path, what):
    if not os.path.exists(path):
        u.skip("%s not found at %s (scripts/install-deps.sh test installs it)" % (what, path))


def require_root():
    if os.geteuid() != 0:
        u.skip("the agent needs root for perf and reading other processes")
    for so in ("perf", "python", "java", "nodejs", "php", "ruby", "dotnet"):
        if not os.path.exists(os.path.join(u.PLUGIN_DIR, so + ".so")):
            u.skip("plugin %s.so not built in %s" % (so, u.PLUGIN_DIR))


class Line:
    """One .col line: comm, appid (or None), frames root first, count."""

    def __init__(self, frames, count):
        self.container = frames[1] if len(frames) > 1 else ""
        self.comm = frames[2] if len(frames) > 2 else ""
        rest = frames[3:]
        self.appid = None
        if rest and rest[0].startswith("appid: "):
            self.appid = rest[0][len("appid: "):]
            rest = rest[1:]
        self.frames = rest
        self.count = count

    def has(self, needle):
        return any(needle in f for f in self.frames)


class Run:
    """The agent around one program run."""

    def __init__(self, name):
        require_root()
        self.name = name
        self.tmp = u.tempdir("ppcorpus-%s-" % name)
        self.out = os.path.join(self.tmp, "out")
        self.log = os.path.join(self.tmp, "polyprof.log")
        self.agent = None
        self.cpu_s = 0.0
        self.wall_s = 0.0
        self.starts = []  # wall-clock time each program was started
        self.cpus = []  # CPU seconds of each program run
        self.pids = []  # pid of each program run

    def __enter__(self):
        cmd = [u.AGENT, "--config", os.path.join(u.SRC, "config", "polyprof.yaml"),
               "-d", "300", "-o", self.out, "--plugin-dir", u.PLUGIN_DIR,
               "--pid-file", os.path.join(self.tmp, "polyprof.pid"), "--log-file", self.log] + RUNTIME_MODES
        print("agent: " + " ".join(cmd))
        self.agent = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                      stderr=open(os.path.join(self.tmp, "stderr"), "w"))
        end = time.time() + 60
        while time.time() < end:
            if self.agent.poll() is not None:
                break
            if os.path.exists(self.log) and "polyprof.perf: sampling" in open(self.log, errors="replace").read():
                return self
            time.sleep(0.2)
        self.stop()
        u.check(False, "the agent started sampling (see %s)" % self.log)
        u.finish()

    def run(self, argv, cwd=None, env=None, timeout=180):
        """Runs one program to completion; adds its CPU time to cpu_s."""
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.time()
        self.starts.append(t0)
        full_env = dict(os.environ)
        full_env.update(env or {})
        p = subprocess.Popen(argv, cwd=cwd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.pids.append(p.pid)
        try:
            p.stdout_text, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.stdout_text, _ = p.communicate()
        self.wall_s += time.time() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        self.cpu_s += cpu
        self.cpus.append(cpu)
        print("ran %s: exit %d, %.1f s CPU, %.1f s" % (" ".join(argv)[:120], p.returncode, cpu, time.time() - t0))
        if p.returncode != 0:
            print(p.stdout_text.decode(errors="replace")[-2000:])
        return p.returncode

    def stop(self):
        if not self.agent:
            return
        if self.agent.poll() is None:
            self.agent.send_signal(signal.SIGTERM)
            try:
                self.agent.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.agent.kill()
                self.agent.wait()

    def __exit__(self, *exc):
        # late stacks (a runtime plugin hands over a process's last ones at
        # the next snapshot) are in the session SIGTERM ends
        if exc[0] is None:
            time.sleep(1.5)
        self.stop()
        return False

    def lines(self):
        col = os.path.join(self.out, "last_profile.col")
        if not u.check(os.path.exists(col), "a profile was written"):
            u.finish()
        header, stacks = u.parse_col(col)
        self.freq = float(header.get("sampling_frequency") or 11)
        return [Line(f, c) for f, c in stacks]


def log_times(path, needle):
    """Wall-clock times of the agent's log lines that contain needle."""
    import datetime
    out = []
    for line in open(path, errors="replace"):
        if needle in line and line.startswith("["):
            stamp = line[1:line.index("]")]
            t = datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f")
            out.append(t.timestamp())
    return out


def total(lines):
    return sum(ln.count for ln in lines)


def named_share(lines, runtime):
    """(share of samples whose stack has runtime frames, or the runtime's
    word that the thread ran none of its code, or is the process's execve,
    and no unnamed frame; share with either at all; share with an unnamed
    frame)."""
    suf = SUFFIXES[runtime]
    if suf:
        is_rt = lambda f: f.endswith(suf)  # noqa: E731
    else:
        is_rt = lambda f: JS_FRAME.search(f) is not None or NODE_NATIVE.match(f)  # noqa: E731
    n = total(lines)
    if n == 0:
        return 0.0, 0.0, 0.0
    with_rt = named = unnamed = 0
    for ln in lines:
        bad = any(UNNAMED.search(f) for f in ln.frames)
        unnamed += ln.count if bad else 0
        if not in_execve(ln) and not any(is_rt(f) or NOT_RUNTIME.search(f) for f in ln.frames):
            continue
        with_rt += ln.count
        if not bad:
            named += ln.count
    return named / n, with_rt / n, unnamed / n


def report(name, runtime, lines, floor):
    """Prints the figure of record and asserts the measured floor."""
    share, covered, unnamed = named_share(lines, runtime)
    execs = total([ln for ln in lines if in_execve(ln)]) / max(1, total(lines))
    print("FIGURE corpus.%s %s: %d samples, named %.1f %%, with %s frames %.1f %% (in execve %.1f %%), "
          "with an unnamed frame %.1f %% (floor %.0f %%)" % (name, runtime, total(lines), 100 * share, runtime,
                                                             100 * covered, 100 * execs, 100 * unnamed, 100 * floor))
    u.check(share >= floor, "%s: %.1f %% of the samples have all their %s frames named (floor %.0f %%, goal 95 %%)"
            % (name, 100 * share, runtime, 100 * floor))


def check_attribution(run, mine, what, min_ratio=0.5, cpu_s=None):
    """The program's samples are there under its name: at least min_ratio of
    what its CPU time at the session frequency gives."""
    cpu_s = run.cpu_s if cpu_s is None else cpu_s
    expect = cpu_s * run.freq
    got = total(mine)
    u.check(got >= min_ratio * expect,
            "%s: %d samples under its name, for %.1f s of CPU at %.0f Hz (%.0f expected, floor %.0f %%)"
            % (what, got, cpu_s, run.freq, expect, 100 * min_ratio))


def check_no_pid_comm(lines, marker, what):
    """No line that is the program's (by a frame of it) lost its name."""
    lost = [ln for ln in lines if PID_COMM.match(ln.comm) and any(marker(f) for f in ln.frames)]
    u.check(not lost, "%s: no sample of it under ':<pid>' (%d)" % (what, total(lost)))
    for ln in lost[:3]:
        print("   lost: %s;%s" % (ln.comm, ";".join(ln.frames[-6:])))


def check_marked(lines, marker, comm_ok, appid_ok, what):
    """Every line with a frame of the program names it: comm and appid."""
    marked = [ln for ln in lines if any(marker(f) for f in ln.frames)]
    bad = [ln for ln in marked if not comm_ok(ln.comm) or not appid_ok(ln.appid)]
    u.check(marked and not bad, "%s: all %d samples with its frames carry its name and appid (%d do not)"
            % (what, total(marked), total(bad)))
    for ln in bad[:3]:
        print("   unnamed: %s;%s;%s" % (ln.comm, ln.appid, ";".join(ln.frames[-6:])))


def dump_top(lines, n=5):
    for ln in sorted(lines, key=lambda x: -x.count)[:n]:
        print("   %4d %s;%s%s" % (ln.count, ln.comm, ("appid: %s;" % ln.appid) if ln.appid else "",
                                 ";".join(ln.frames[-8:])))
