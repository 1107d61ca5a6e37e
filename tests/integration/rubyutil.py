"""Helpers of the ruby plugin's integration tests (standard library only)."""
import glob
import os
import re
import shutil
import subprocess

import pputil as u

WORKLOADS = os.path.join(u.SRC, "tests", "workloads", "ruby")
RUBY = shutil.which("ruby")
FRAME_RE = re.compile(r"^(?P<label>.+) - (?P<path>.+):(?P<line>\d+)_\[rb\]$")
CFUNC_RE = re.compile(r"^(?P<name>.+) \[c function\] - \(unknown\):0$")


def require_ruby_plugin():
    plugin = os.path.join(u.PLUGIN_DIR, "ruby.so")
    if not os.path.exists(plugin):
        u.skip("ruby plugin not built: " + plugin)
    if not RUBY:
        u.skip("no ruby interpreter (Debian: apt-get install ruby)")
    if os.geteuid() != 0:
        u.skip("reading another process's memory needs root (CAP_SYS_PTRACE)")
    return plugin


def ruby_version():
    return subprocess.run([RUBY, "-e", "print RUBY_VERSION"], stdout=subprocess.PIPE, text=True,
                          check=True).stdout.strip()


def workload(name, *args):
    """Starts tests/workloads/ruby/<name> with an absolute path (so frames
    carry it) and returns the Popen."""
    return u.spawn([RUBY, os.path.join(WORKLOADS, name)] + [str(a) for a in args])


def cpu_seconds(pid):
    """CPU time so far of every thread of a process (schedstat, ns exact)."""
    total = 0
    for stat in glob.glob("/proc/%d/task/*/schedstat" % pid):
        try:
            with open(stat) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended between the listing and the read
    return total / 1e9


def check_cpu_weight(name, samples, cpu_s, hz):
    """The plugin samples a thread per 1/hz of its CPU time, as stackprof's
    cpu mode and perf do: the sample count is the CPU the target used times
    hz. cpu_s is measured around the whole agent run (attach and exit
    included), so the count may fall short of it, never exceed it much."""
    expected = cpu_s * hz
    u.check(0.6 * expected - 3 <= samples <= 1.1 * expected + 5,
            "%s: %d samples for %.2f s of its CPU at %d Hz (expected ~%d: one per %d ms of CPU)"
            % (name, samples, cpu_s, hz, expected, 1000 // hz))


def stacks_of(stacks, comm_pid_index, pid_comm):
    return [(f, c) for f, c in stacks if len(f) > 2 and f[2] == pid_comm]


def ruby_frames(frames):
    """The frames after comm and the optional appid frame."""
    out = []
    for fr in frames[3:]:
        if fr.startswith("appid: "):
            continue
        out.append(fr)
    return out


def frame(fr):
    """(label, path, line) of a Ruby frame text, or None."""
    m = FRAME_RE.match(fr)
    return (m.group("label"), m.group("path"), int(m.group("line"))) if m else None


def stacks_by_appmeta(header, stacks, key, value):
    """Stacks whose application metadata has key == value."""
    meta = header["application_metadata"]
    out = []
    for f, c in stacks:
        i = int(f[0])
        if 0 < i < len(meta) and isinstance(meta[i], dict) and meta[i].get(key) == value:
            out.append((f, c))
    return out


def stacks_with(stacks, path):
    """Stacks containing a Ruby frame of this source file."""
    out = []
    for f, c in stacks:
        if any((frame(x) or ("", "", 0))[1] == path for x in f):
            out.append((f, c))
    return out
