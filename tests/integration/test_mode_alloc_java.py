#!/usr/bin/env python3
"""--mode cpu,alloc with a JVM: allocation sampling in our JVMTI agent
(SampledObjectAlloc), weighted by bytes, each stack ending with the
allocated class. AllocSplit allocates 3:1 bytes in allocBig and allocSmall:
the alloc profile holds that split within 5 points, its unit is bytes, and
the cpu profile is written under the plain names next to it."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "workloads", "java"))
import pputil  # noqa: E402
import javawork  # noqa: E402
from pputil import check  # noqa: E402

if os.geteuid() != 0:
    pputil.skip("needs root (attach as the JVM's user)")
if not javawork.find_jdk():
    pputil.skip("no JDK (java/javac) installed")

classes = javawork.compile_workloads()
work = pputil.tempdir("ppalloc-")
plugins = pputil.plugin_dir_with(os.path.join(pputil.PLUGIN_DIR, "java.so"))
proc = javawork.start(classes, "AllocSplit", 60)
try:
    out = os.path.join(work, "prof")
    # gProfiler's --alloc-interval (binary units) sets the java plugin's interval
    r = pputil.run_agent(out, plugins, "--mode", "cpu,alloc", "--alloc-interval", "64k", "--pids",
                         str(proc.pid), duration=8)
    print(r.stderr[-2500:])
    check(r.returncode == 0, "agent exits 0")
    alloc_col = os.path.join(out, "last_profile.alloc.col")
    check(os.path.exists(alloc_col), "last_profile.alloc.col written")
    check(os.path.exists(os.path.join(out, "last_profile.col")), "cpu keeps last_profile.col")
    header, stacks = pputil.parse_col(alloc_col)
    check(header["profile_type"] == "alloc" and header["profile_unit"] == "bytes",
          "header: alloc, bytes")
    check(header["profiling_mode"] == "allocation", "profiling_mode: gProfiler's 'allocation'")
    big = sum(c for f, c in stacks if any("AllocSplit.allocBig" in x for x in f))
    small = sum(c for f, c in stacks if any("AllocSplit.allocSmall" in x for x in f))
    share = big / float(big + small) if big + small else 0
    print("alloc: allocBig %d bytes, allocSmall %d bytes, share %.3f" % (big, small, share))
    check(big + small > 0, "allocation stacks of both methods")
    check(abs(share - 0.75) <= 0.05, "allocBig share %.3f within 5 points of 0.75" % share)
    mine = [f for f, c in stacks if any("AllocSplit.alloc" in x for x in f)]
    check(mine and all(f[-1] == "byte[]" for f in mine), "stacks end with the allocated class")
    counts = [c for f, c in stacks if any("AllocSplit.alloc" in x for x in f)]
    check(counts and all(c % 65536 == 0 for c in counts) and any(c % 524288 for c in counts),
          "--alloc-interval 64k: every stack counts whole 64 KiB samples")
    html = open(os.path.join(out, "last_flamegraph.alloc.html"), encoding="utf-8").read()
    check('"unit":"bytes"' in html, "HTML unit: bytes")
finally:
    pputil.kill(proc)
pputil.finish()
