"""What the plugin reports about the processes it samples, besides stacks.

  skipped     an interpreter whose version the plugin cannot read gets one
              clear log line and a `[Profiling skipped: ...]` stack for its
              pid, and the session goes on with the other targets. The
              unreadable version is made from pyenv 3.13: a copy of its
              libpython whose _Py_DebugOffsets version word says 3.15 (the
              interpreter itself never reads that word; only out-of-process
              readers do), so the process runs normally and the plugin sees
              a version it has no layout for.
  efficiency  every sampled process gets a line with its samples, failed
              and missed samples and its sampling efficiency, as CPython's
              profiling.sampling reports them; the numbers add up and agree
              with the stacks emitted.
"""
import os
import re
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import pyutil as py  # noqa: E402

if not os.path.exists(py.PLUGIN):
    u.skip("python plugin not built: " + py.PLUGIN)
found = {"%d.%d" % v[:2]: (exe, v) for label, exe, v in py.interpreters() if label.startswith("pyenv")}
if "3.13" not in found:
    u.skip("no pyenv CPython 3.13 to derive an unreadable version from (have: %s)"
           % ", ".join(sorted(found)))
exe313, ver313 = found["3.13"]
libdir = os.path.join(os.path.dirname(os.path.dirname(exe313)), "lib")
libs = [f for f in os.listdir(libdir) if f.startswith("libpython3.13") and f.endswith(".so.1.0")]
if not libs:
    u.skip("pyenv 3.13 is a static build: no libpython to patch a copy of")


def section_offset(path, name):
    """File offset of ELF64 section `name` (None if absent)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:5] != b"\x7fELF\x02":
        return None
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    str_off, = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 0x18)
    for i in range(shnum):
        sh = shoff + i * shentsize
        name_at, = struct.unpack_from("<I", data, sh)
        end = data.index(b"\0", str_off + name_at)
        if data[str_off + name_at:end].decode() == name:
            return struct.unpack_from("<Q", data, sh + 0x18)[0]
    return None


d = u.tempdir("ppskip-")
lib = os.path.join(d, libs[0])
with open(os.path.join(libdir, libs[0]), "rb") as f:
    image = bytearray(f.read())
off = section_offset(os.path.join(libdir, libs[0]), ".PyRuntime")
u.check(off is not None, "pyenv 3.13 libpython has a .PyRuntime section")
if off is None:
    u.finish()
u.check(image[off:off + 8] == b"xdebugpy", "_Py_DebugOffsets at the start of .PyRuntime")
hexver, = struct.unpack_from("<Q", image, off + 8)
u.check(hexver >> 16 == 0x030D, "its version word is 3.13 (0x%x)" % hexver)
struct.pack_into("<Q", image, off + 8, (hexver & ~0xFF0000) | (15 << 16))
with open(lib, "wb") as f:
    f.write(image)

procs = []
try:
    env = dict(os.environ, LD_LIBRARY_PATH=d)
    bad = subprocess.Popen([exe313, py.WORKLOAD, "nested", "120", "idle"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, env=env, text=True, cwd=d)
    procs.append(bad)
    good, good_script = py.start(exe313, "split")
    procs.append(good)
    py.wait_ready([bad])
    with open("/proc/%d/maps" % bad.pid) as f:
        u.check(lib in f.read(), "the 3.15-labelled process runs on the patched copy")

    r, header, stacks, log = py.profile([bad.pid, good.pid], "-v", "--python-mode", "wall",
                                        duration=4, freq=50)
    text = log + (r.stderr or "")
    u.check(r.returncode == 0, "agent ran (rc %d)" % r.returncode)

    # --- skipped ---
    skip_lines = [l for l in text.splitlines()
                  if "pid %d:" % bad.pid in l and "unsupported Python 3.15" in l]
    u.check(len(skip_lines) >= 1, "skipped: one log line names the unreadable version (%s)"
            % (skip_lines[:1] or "none"))
    marker = [(fr, c) for fr, c in stacks if any(f.startswith("[Profiling skipped: ") and
                                                  "unsupported Python 3.15" in f for f in fr)]
    u.check(len(marker) >= 1, "skipped: a [Profiling skipped: unsupported Python 3.15 ...] stack")
    if marker:
        print("skipped stack: %s" % ";".join(marker[0][0]))
    u.check(not any("(%s:" % good_script in f for fr, c in marker for f in fr),
            "skipped: the marker is not on the readable target's stacks")
    sampled = sum(c for fr, c, _ in py.stacks_in(stacks, good_script))
    u.check(sampled >= 50, "skipped: the readable target goes on being sampled (%d)" % sampled)

    # --- efficiency, per process ---
    eff_re = re.compile(r"pid %d: (\d+) samples, (\d+) failed, (\d+) missed \(efficiency "
                        r"([\d.]+)%%\), (\d+) stacks" % good.pid)
    m = [eff_re.search(l) for l in text.splitlines()]
    m = [x for x in m if x]
    u.check(len(m) >= 1, "efficiency: a per-process line for pid %d" % good.pid)
    if m:
        n, failed, missed, eff, nstacks = (int(m[-1].group(1)), int(m[-1].group(2)),
                                           int(m[-1].group(3)), float(m[-1].group(4)),
                                           int(m[-1].group(5)))
        print("efficiency line: %s" % m[-1].group(0))
        expect = 100.0 * (n - failed) / (n + missed) if n + missed else 0
        u.check(abs(eff - expect) < 0.11, "efficiency: %.1f%% = (samples - failed) / (samples + "
                "missed) = %.1f%%" % (eff, expect))
        u.check(n >= 100 and failed <= n, "efficiency: sane counts (%d samples, %d failed)"
                % (n, failed))
        u.check(eff > 50, "efficiency: a busy, readable target is mostly sampled (%.1f%%)" % eff)
        # wall mode, one thread: every good sample is one stack
        u.check(abs(nstacks - (n - failed)) <= 1, "efficiency: %d stacks for %d good samples"
                % (nstacks, n - failed))
    u.check(not any("pid %d: " % bad.pid in l and " samples, " in l for l in text.splitlines()),
            "efficiency: no sampling line for the skipped process (it was never sampled)")
finally:
    for p in procs:
        u.kill(p)
u.finish()
