"""perf plugin, real perf_event sampling: the 3:1 workload.

fp mode resolves the frame-pointer build, dwarf mode the build without frame
pointers; each finds hot_a:hot_b within 5 points of 75 %, with stacks that
reach main.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perfutil  # noqa: E402
import pputil  # noqa: E402
from pputil import check  # noqa: E402

perfutil.require_perf()
tmp = pputil.tempdir("ppperf-unwind-")
fp_bin, nofp_bin = perfutil.build_hot(tmp)

# fp mode, FP build (and the no-FP build alongside, which FP cannot unwind)
procs = [perfutil.spawn([fp_bin, "120"]), perfutil.spawn([nofp_bin, "120"])]
try:
    prof = perfutil.profile_until({procs[0].pid}, 600, 5, freq=199, mode="fp")
finally:
    perfutil.wait_all(procs)
share, resolved, total = perfutil.hot_ratio(prof, procs[0].pid)
print("fp mode, FP build: hot_a share %.1f%%, resolved %.1f%% of %d samples" % (100 * share, 100 * resolved, total))
prof.dump(procs[0].pid, 4)
check(total >= 300, "fp: enough samples of the FP build (%d)" % total)
check(resolved >= 0.9, "fp: FP build stacks reach main (%.1f%%)" % (100 * resolved))
check(abs(share - 0.75) <= 0.05, "fp: hot_a share %.1f%% within 75±5" % (100 * share))
check("hot_fp" in prof.comms(procs[0].pid), "fp: comm frame is the thread name")
_, resolved_nofp, _ = perfutil.hot_ratio(prof, procs[1].pid)
print("fp mode, no-FP build: resolved %.1f%% (frame pointers missing: expected low)" % (100 * resolved_nofp))

# dwarf mode, no-FP build
procs = [perfutil.spawn([nofp_bin, "120"])]
try:
    prof = perfutil.profile_until({procs[0].pid}, 600, 6, freq=100, mode="dwarf")
finally:
    perfutil.wait_all(procs)
share, resolved, total = perfutil.hot_ratio(prof, procs[0].pid)
print("dwarf mode, no-FP build: hot_a share %.1f%%, resolved %.1f%% of %d samples" % (100 * share, 100 * resolved, total))
prof.dump(procs[0].pid, 4)
c = prof.counters
if c.get("samples"):
    print("dwarf: %.1f us unwinding per sample" % (c.get("unwind_ns", 0) / 1000.0 / c["samples"]))
check(total >= 300, "dwarf: enough samples of the no-FP build (%d)" % total)
check(resolved >= 0.9, "dwarf: no-FP build stacks reach main (%.1f%%)" % (100 * resolved))
check(abs(share - 0.75) <= 0.05, "dwarf: hot_a share %.1f%% within 75±5" % (100 * share))
dwarf_start = sum(cnt for frames, cnt in prof.of(procs[0].pid) if "_start" in frames)
check(dwarf_start > 0, "dwarf: unwinds through libc up to _start")
pputil.finish()
