"""--mode cpu,offcpu through the real agent, with a known answer.

tests/workloads/perf/blocker.c blocks 3:1 in wait_long and wait_short
(nanosleep 30 ms / 10 ms) on one thread and burns CPU on another:
- both profiles are written, under the per-type names (cpu keeps the plain
  ones), each with its type and unit in the .col header, the HTML and pprof;
- off-CPU: wait_long holds 75 % (+-5 points) of the two functions' blocked
  time, the kernel wait path (schedule, do_nanosleep) is in the stacks, the
  blocked time adds up to about the session, and the burner (preempted,
  never blocked) is not there;
- cpu: the burner is there;
- a type nothing here can give (alloc without java) is one clear line and
  the other types go on.
"""
import glob
import gzip
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perfutil  # noqa: E402
import pputil  # noqa: E402
from pputil import check  # noqa: E402

perfutil.require_perf()
if not os.path.exists(pputil.AGENT):
    pputil.skip("agent not built: " + pputil.AGENT)
plugins = pputil.plugin_dir_with(perfutil.PLUGIN)
tmp = pputil.tempdir("ppmode-offcpu-")
blocker = perfutil.build_c("blocker", tmp, "-O1", "-fno-omit-frame-pointer")

DURATION = 6
proc = pputil.spawn([blocker, "60"])
try:
    out = pputil.tempdir("ppmode-offcpu-out-")
    r = pputil.run_agent(out, plugins, "--mode", "cpu,offcpu,alloc", "--output-format",
                         "col,html,pprof", duration=DURATION, timeout=180)
    print(r.stderr[-3000:])
    check(r.returncode == 0, "agent exits 0")
    names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(out, "*")))
    print(names)
    for link in ("last_profile.col", "last_flamegraph.html", "last_profile.pb.gz",
                 "last_profile.offcpu.col", "last_flamegraph.offcpu.html",
                 "last_profile.offcpu.pb.gz"):
        check(os.path.islink(os.path.join(out, link)), "link " + link)
    check(any(n.endswith(".offcpu.col") and n.startswith("profile_") for n in names),
          "profile_<ts>.offcpu.col written")
    check(not any(".cpu." in n for n in names), "cpu keeps the plain names")
    check(not any(".alloc." in n for n in names), "no alloc files: nothing here gives alloc")
    check("--mode alloc" in r.stderr and "java" in r.stderr,
          "alloc without a plugin that gives it: one line naming the type and java")

    h_cpu, cpu = pputil.parse_col(os.path.join(out, "last_profile.col"))
    h_off, off = pputil.parse_col(os.path.join(out, "last_profile.offcpu.col"))
    check(h_cpu["profile_type"] == "cpu" and h_cpu["profile_unit"] == "samples",
          "cpu header: type and unit")
    check(h_off["profile_type"] == "offcpu" and h_off["profile_unit"] == "microseconds",
          "offcpu header: type and unit")

    mine = [(f[3:], c) for f, c in off if len(f) > 3 and f[2] == "blocker"]
    long_us = sum(c for f, c in mine if "wait_long" in f)
    short_us = sum(c for f, c in mine if "wait_short" in f)
    total = sum(c for _, c in mine)
    share = long_us / float(long_us + short_us) if long_us + short_us else 0
    print("blocker off-CPU: %d us (wait_long %d, wait_short %d, share %.3f)"
          % (total, long_us, short_us, share))
    check(abs(share - 0.75) <= 0.05, "wait_long share %.3f within 5 points of 0.75" % share)
    check(0.5 * DURATION * 1e6 <= total <= 1.3 * DURATION * 1e6,
          "blocked time %.2f s about the session (%d s)" % (total / 1e6, DURATION))
    kern = [f for f, c in mine if "wait_long" in f]
    check(any("schedule_[k]" in f for f in kern) and
          any(x.startswith("do_nanosleep") or x.startswith("hrtimer_nanosleep") for f in kern for x in f),
          "kernel wait path (do_nanosleep ... schedule) in the off-CPU stacks")
    burn_off = sum(c for f, c in mine if "burn" in f)
    check(burn_off <= 0.02 * total, "the burner is not off-CPU (%d us)" % burn_off)
    burn_cpu = sum(c for f, c in cpu if len(f) > 3 and f[2] == "blocker" and "burn" in f)
    check(burn_cpu > 0, "the burner is in the cpu profile (%d samples)" % burn_cpu)

    html = open(os.path.join(out, "last_flamegraph.offcpu.html"), encoding="utf-8").read()
    check('"unit":"microseconds"' in html, "HTML carries the unit")
    pb = gzip.open(os.path.join(out, "last_profile.offcpu.pb.gz")).read()
    check(b"off_cpu" in pb and b"microseconds" in pb, "pprof sample type off_cpu/microseconds")
    pbc = gzip.open(os.path.join(out, "last_profile.pb.gz")).read()
    check(b"off_cpu" not in pbc, "cpu pprof stays cpu")
    conv = os.path.join(out, "converted.pb.gz")
    rc = subprocess.run([pputil.AGENT, "convert", os.path.join(out, "last_profile.offcpu.col"),
                         "--to", "pprof", "-o", conv], stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE).returncode
    check(rc == 0 and b"off_cpu" in gzip.open(conv).read(),
          "polyprof convert keeps the type the .col header records")
finally:
    pputil.kill(proc)
pputil.finish()
