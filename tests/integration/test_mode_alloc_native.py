#!/usr/bin/env python3
"""--mode cpu,alloc for a native program (perf's uprobes on its allocator),
with a known answer.

tests/workloads/perf/allocator.c asks for 3:1 bytes in alloc_big (malloc)
and alloc_small (calloc), one call each in turn, from a thread it starts
after the agent is placing its probes:
- with --pids: the alloc profile (bytes) holds alloc_big at 75 % (+-5
  points) of the two functions' bytes, both function names are there (the
  caller of the allocator, which the frame-pointer walk alone would skip),
  the allocator function is the leaf, the totals are plausible, the cpu
  profile keeps the plain names, pprof says alloc_space/bytes;
- `polyprof run --mode alloc` finds the allocator of a program that has
  only just started (its libraries are mapped after the exec), also as
  the grandchild `timeout` starts, and its table and closing line count
  bytes, not samples;
- without --pids: one line says native allocations need --pids, and no
  alloc file is written;
- jemalloc preloaded: its own malloc is probed, same split;
- a statically linked program: one line says it maps no allocator library.
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
if not os.path.exists("/sys/bus/event_source/devices/uprobe/type"):
    pputil.skip("this kernel has no uprobe PMU (CONFIG_UPROBE_EVENTS)")
plugins = pputil.plugin_dir_with(perfutil.PLUGIN)
tmp = pputil.tempdir("ppmode-alloc-")
allocator = perfutil.build_c("allocator", tmp, "-O1", "-fno-omit-frame-pointer", "-pthread")


def split(stacks, comm="allocator"):
    mine = [(f, c) for f, c in stacks if len(f) > 3 and f[2] == comm]
    big = sum(c for f, c in mine if "alloc_big" in f)
    small = sum(c for f, c in mine if "alloc_small" in f)
    return mine, big, small


DURATION = 5
proc = pputil.spawn([allocator, "60"])
try:
    out = pputil.tempdir("ppmode-alloc-out-")
    # a sample every ~500 calls, probes in place half of every second: enough
    # samples (~10^3) that a share is within a point or two on a loaded host
    r = pputil.run_agent(out, plugins, "--mode", "cpu,alloc", "--pids", str(proc.pid),
                         "--perf-alloc-period", "500", "--perf-alloc-duty", "50",
                         "--output-format", "col,html,pprof", duration=DURATION, timeout=180)
    print(r.stderr[-2500:])
    check(r.returncode == 0, "agent exits 0")
    names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(out, "*")))
    print(names)
    for link in ("last_profile.col", "last_profile.alloc.col", "last_flamegraph.alloc.html",
                 "last_profile.alloc.pb.gz"):
        check(os.path.islink(os.path.join(out, link)), "link " + link)
    header, stacks = pputil.parse_col(os.path.join(out, "last_profile.alloc.col"))
    check(header["profile_type"] == "alloc" and header["profile_unit"] == "bytes",
          "header: alloc, bytes")
    counters = header.get("polyprof", {}).get("perf", {}).get("counters", {})
    print({k: v for k, v in counters.items() if k.startswith("alloc_")})
    mine, big, small = split(stacks)
    share = big / float(big + small) if big + small else 0
    print("alloc: alloc_big %d bytes, alloc_small %d bytes, share %.3f" % (big, small, share))
    check(big > 0 and small > 0, "allocation stacks of both functions")
    check(abs(share - 0.75) <= 0.05, "alloc_big share %.3f within 5 points of 0.75" % share)
    leaves = {f[-1].split(" ")[0] for f, c in mine if "alloc_big" in f or "alloc_small" in f}
    print("leaves:", leaves)
    check(any("malloc" in x for x in leaves) and any("calloc" in x for x in leaves),
          "the allocator functions are the leaves (%s)" % sorted(leaves))
    check(all(f[f.index(x) - 1] == "run" for f, c in mine for x in f if x.startswith("alloc_")),
          "each allocating function sits right under its caller (run)")
    # at most a few million calls a second under the probes, 2000 bytes each on average
    check(1e6 <= big + small <= 1e11, "bytes allocated plausible (%.3g)" % (big + small))
    pb = gzip.open(os.path.join(out, "last_profile.alloc.pb.gz")).read()
    check(b"alloc_space" in pb and b"bytes" in pb, "pprof sample type alloc_space/bytes")
    html = open(os.path.join(out, "last_flamegraph.alloc.html"), encoding="utf-8").read()
    check('"unit":"bytes"' in html, "HTML unit: bytes")
    _, cpu = pputil.parse_col(os.path.join(out, "last_profile.col"))
    check(any(len(f) > 2 and f[2] == "allocator" for f, c in cpu), "cpu profile of the program")

    # without --pids: refused with one line, no alloc file
    out2 = pputil.tempdir("ppmode-alloc-host-")
    r = pputil.run_agent(out2, plugins, "--mode", "alloc", duration=1, timeout=120)
    print(r.stderr[-1500:])
    check("--mode alloc: perf gives native allocations for --pids" in r.stderr,
          "host-wide native alloc refused with one line naming --pids")
    check(not glob.glob(os.path.join(out2, "*.col")), "no alloc file without --pids")
finally:
    pputil.kill(proc)

# jemalloc preloaded: its malloc is the one called, and probed
JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
if not os.path.exists(JEMALLOC):
    pputil.skip("libjemalloc2 not installed (scripts/install-deps.sh test)")
env = dict(os.environ, LD_PRELOAD=JEMALLOC)
proc = pputil.spawn([allocator, "60"], env=env)
try:
    out4 = pputil.tempdir("ppmode-alloc-jemalloc-")
    r = pputil.run_agent(out4, plugins, "--mode", "alloc", "--pids", str(proc.pid),
                         "--perf-alloc-duty", "100", duration=3, timeout=120)
    print(r.stderr[-1000:])
    check("allocation functions of %s probed" % JEMALLOC in r.stderr, "jemalloc's functions probed")
    _, stacks = pputil.parse_col(os.path.join(out4, "last_profile.col"))
    mine, big, small = split(stacks)
    share = big / float(big + small) if big + small else 0
    print("jemalloc: alloc_big %d, alloc_small %d, share %.3f" % (big, small, share))
    check(abs(share - 0.75) <= 0.05, "jemalloc: alloc_big share %.3f within 5 points" % share)
finally:
    pputil.kill(proc)

# a statically linked program has no allocator library to probe: said at once
static = perfutil.build_c("allocator_static", tmp, "-O1", "-static", "-pthread")
proc = pputil.spawn([static, "60"])
try:
    out3 = pputil.tempdir("ppmode-alloc-static-")
    r = pputil.run_agent(out3, plugins, "--mode", "alloc", "--pids", str(proc.pid), duration=1,
                         timeout=120)
    print(r.stderr[-1000:])
    check("native alloc: pid %d (allocator_stati) not profiled: it maps no allocator library"
          % proc.pid in r.stderr, "a static program: one line saying why it is not profiled")
finally:
    pputil.kill(proc)



def run_collapsed(*program):
    """`polyprof run --mode alloc --format collapsed -- program`: the result,
    alloc_big's and alloc_small's bytes and alloc_big's share."""
    r = subprocess.run([pputil.AGENT, "run", "--plugin-dir", plugins, "--mode", "alloc",
                        "--perf-alloc-duty", "100", "--format", "collapsed", "--"] + list(program),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    print(r.stderr[-1500:])
    lines = [ln.rpartition(" ") for ln in r.stdout.splitlines() if ln.strip()]
    big = sum(int(c) for s, _, c in lines if "alloc_big" in s)
    small = sum(int(c) for s, _, c in lines if "alloc_small" in s)
    share = big / float(big + small) if big + small else 0
    print("run %s: alloc_big %d, alloc_small %d, share %.3f" % (program[0], big, small, share))
    return r, big, small, share


# run: the program's allocator is found once its libraries are mapped
r, big, small, share = run_collapsed(allocator, "3")
check(r.returncode == 0, "run exits with the program's status 0")
check(big > 0 and small > 0 and abs(share - 0.75) <= 0.05,
      "run --mode alloc: alloc_big share %.3f within 5 points" % share)
check(" bytes (alloc);" in r.stderr and "perf %d samples" % (big + small) not in r.stderr,
      "run --mode alloc: the closing line counts perf's bytes as bytes, with no rate")

# through `timeout` the program is a grandchild: followed, probed all the same
r, big, small, share = run_collapsed("timeout", "30", allocator, "2")
check(r.returncode == 0 and big > 0 and small > 0 and abs(share - 0.75) <= 0.05,
      "run --mode alloc -- timeout: the grandchild's alloc_big share %.3f within 5 points" % share)

# run's table names the unit of the profile type: bytes, and no times
r = subprocess.run([pputil.AGENT, "run", "--plugin-dir", plugins, "--mode", "alloc",
                    "--perf-alloc-duty", "100", "--", allocator, "2"],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
print(r.stdout[:600])
first = r.stdout.splitlines()[0] if r.stdout else ""
check(r.returncode == 0 and first.split()[1:2] == ["bytes"] and "samples" not in first,
      "run --mode alloc: the table counts bytes (%r)" % first)
rows = [ln.split() for ln in r.stdout.splitlines()[2:] if "alloc_big" in ln]
check(rows and rows[0][4] == "-", "run --mode alloc: no self-s times for bytes (%s)" % rows[:1])
pputil.finish()
