"""perf plugin, real perf_event sampling: smart mode.

In one session, smart mode must keep DWARF stacks for the build without
frame pointers and FP stacks for the frame-pointer build. The FP build runs
through a 16 KiB frame, deeper than the 8 KiB DWARF stack copy, so only its
FP stacks reach main; only DWARF stacks of the no-FP build reach _start
(frame-pointer walks stop in libc, which has none).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perfutil  # noqa: E402
import pputil  # noqa: E402
from pputil import check  # noqa: E402

perfutil.require_perf()
tmp = pputil.tempdir("ppperf-smart-")
fp_bin, nofp_bin = perfutil.build_hot(tmp)
procs = [perfutil.spawn([fp_bin, "120", "bigframe"]), perfutil.spawn([nofp_bin, "120"])]
try:
    # smart's choice is per session: each profile_until round is a session
    prof = perfutil.profile_until({procs[0].pid, procs[1].pid}, 1000, 8, freq=100, mode="smart")
finally:
    perfutil.wait_all(procs)
fp_pid, nofp_pid = procs[0].pid, procs[1].pid
print("counters:", prof.counters)
print("FP build (bigframe):")
prof.dump(fp_pid, 3)
print("no-FP build:")
prof.dump(nofp_pid, 3)

share, resolved, total = perfutil.hot_ratio(prof, fp_pid)
check(total >= 300, "FP build sampled (%d)" % total)
check(resolved >= 0.9, "FP build: FP stacks kept (reach main through the 16 KiB frame: %.0f%%)" % (100 * resolved))
check(abs(share - 0.75) <= 0.05, "FP build: hot_a share %.1f%%" % (100 * share))

share, resolved, total = perfutil.hot_ratio(prof, nofp_pid, need="_start")
check(total >= 300, "no-FP build sampled (%d)" % total)
check(resolved >= 0.9, "no-FP build: DWARF stacks kept (reach _start: %.0f%%)" % (100 * resolved))
check(abs(share - 0.75) <= 0.05, "no-FP build: hot_a share %.1f%%" % (100 * share))
check(prof.counters.get("smart_pids_dwarf", 0) >= 1 and prof.counters.get("smart_pids_fp", 0) >= 1,
      "smart mode chose DWARF for some processes and FP for others")
pputil.finish()
