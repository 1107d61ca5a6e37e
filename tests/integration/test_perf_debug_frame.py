"""perf plugin, dwarf mode, real perf_event sampling: code described only by
.debug_frame.

hot.c built with -g -fno-asynchronous-unwind-tables -fno-unwind-tables and
without frame pointers has CFI for its own functions in .debug_frame only;
its .eh_frame covers just the C runtime's start files. libunwind's remote
lookup reads .eh_frame tables only, so without the plugin's conversion
(debug_frame.c) every stack stops at the leaf. With it: hot_a:hot_b within
5 points of 75 %, stacks through main and libc up to _start.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perfutil  # noqa: E402
import pputil  # noqa: E402
from pputil import check  # noqa: E402

perfutil.require_perf()
tmp = pputil.tempdir("ppperf-dbgframe-")
exe = perfutil.build_c("hot_df", tmp, "-O2", "-fomit-frame-pointer", "-fno-asynchronous-unwind-tables",
                       "-fno-unwind-tables", src=os.path.join(perfutil.WORKLOADS, "hot.c"))


def sections(path):
    out = subprocess.run(["readelf", "-W", "-S", path], stdout=subprocess.PIPE, text=True, check=True)
    return {l.split("]", 1)[1].split()[0] for l in out.stdout.splitlines() if "]" in l and "[" in l}


def fde_covers(path, section, symbol):
    """Does `section` (.eh_frame / .debug_frame) hold an FDE covering the
    start of `symbol`? From readelf's own decoding, independent of ours."""
    nm = subprocess.run(["nm", path], stdout=subprocess.PIPE, text=True, check=True).stdout
    addr = next(int(l.split()[0], 16) for l in nm.splitlines() if l.endswith(" " + symbol))
    dump = subprocess.run(["readelf", "-W", "--debug-dump=frames", path], stdout=subprocess.PIPE,
                          text=True).stdout
    part = dump.split("Contents of the %s section" % section)
    if len(part) < 2:
        return False
    body = part[1].split("Contents of the ")[0]
    for line in body.splitlines():
        if " FDE " in line and "pc=" in line:
            lo, hi = (int(x, 16) for x in line.split("pc=")[1].split(".."))
            if lo <= addr < hi:
                return True
    return False


secs = sections(exe)
check(".debug_frame" in secs, "the workload has a .debug_frame")
check(fde_covers(exe, ".debug_frame", "hot_a") and not fde_covers(exe, ".eh_frame", "hot_a"),
      "hot_a is described in .debug_frame only, not in .eh_frame")

procs = [perfutil.spawn([exe, "120"])]
try:
    prof = perfutil.profile_until({procs[0].pid}, 300, 6, freq=100, mode="dwarf")
finally:
    perfutil.wait_all(procs)
share, resolved, total = perfutil.hot_ratio(prof, procs[0].pid)
print("dwarf mode, .debug_frame-only build: hot_a share %.1f%%, resolved %.1f%% of %d samples (load %.1f)"
      % (100 * share, 100 * resolved, total, os.getloadavg()[0]))
prof.dump(procs[0].pid, 4)
check(total >= 300, "enough samples of the workload (%d)" % total)
check(resolved >= 0.9, "stacks reach main through .debug_frame CFI (%.1f%%)" % (100 * resolved))
check(abs(share - 0.75) <= 0.05, "hot_a share %.1f%% within 75±5" % (100 * share))
every = sum(c for _, c in prof.of(procs[0].pid))
full = sum(c for frames, c in prof.of(procs[0].pid)
           if frames[:1] == ["_start"] and "main" in frames and "level3" in frames)
check(full >= 0.9 * every, "root-first from _start through main and level3 (%d of %d)" % (full, every))
pputil.finish()
