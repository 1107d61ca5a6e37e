"""A .NET process started with DOTNET_PerfMapEnabled=2 writes only a jitdump
(/tmp/jit-<pid>.dump; .NET 10 does not map it, unlike Node), no perf map;
the perf plugin names its managed frames from that file (no dotnet plugin
involved), with the workload's 3:1 split between SpinA and SpinB.

DOTNET_PerfMapStubGranularity=2 works around a runtime bug seen with .NET
10.0.12: the default logs a 64 KiB stub block whose code bytes are only half
readable, writev fails with EFAULT mid-record and the runtime writes nothing
more, leaving a dump that ends in a truncated record (which the reader
correctly waits on forever)."""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402

sys.path.insert(0, os.path.join(u.SRC, "tests", "workloads", "dotnet"))
import build_workload  # noqa: E402

if os.geteuid() != 0:
    u.skip("system-wide perf sampling of another process needs root")
perf_so = os.path.join(u.PLUGIN_DIR, "perf.so")
if not os.path.exists(perf_so):
    u.skip("perf plugin not built: " + perf_so)
try:
    out = build_workload.build(u.BUILD)
except FileNotFoundError as e:
    u.skip(str(e))

env = build_workload.dotnet_env()
env["DOTNET_PerfMapEnabled"] = "2"
env["DOTNET_PerfMapStubGranularity"] = "2"
env.pop("DOTNET_PerfMapJitDumpPath", None)
target = subprocess.Popen([os.path.join(out, "PolyprofWorkload"), "120", "split"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
dump = "/tmp/jit-%d.dump" % target.pid
perfmap = "/tmp/perf-%d.map" % target.pid
try:
    target.stdout.readline()
    time.sleep(1)  # let the split methods reach their final tier
    u.check(os.path.exists(dump), "runtime wrote %s" % dump)
    u.check(not os.path.exists(perfmap), "PerfMapEnabled=2: no perf map")
    outdir = u.tempdir("ppdotnet-jitdump-")
    plugins = u.plugin_dir_with(perf_so)
    p = u.run_agent(outdir, plugins, "-f", "200", "--pids", str(target.pid), duration=4,
                    timeout=120)
    if not u.check(p.returncode == 0, "agent exits 0 (rc %s)" % p.returncode):
        print(p.stderr[-3000:])
    _, stacks = u.parse_col(os.path.join(outdir, "last_profile.col"))
    total = sum(c for _, c in stacks)
    u.check(total >= 100, "%d samples of the process (>= 100)" % total)

    def with_frame(needle):
        return sum(c for f, c in stacks if any(needle in x for x in f))

    a, b = with_frame("SplitWorker::SpinA"), with_frame("SplitWorker::SpinB")
    u.check(a > 0 and b > 0, "managed frames SpinA (%d) and SpinB (%d) named from the jitdump"
            % (a, b))
    u.check(with_frame("SplitWorker::ThreeQuarters") > 0, "caller ThreeQuarters named too")
    share = 100.0 * a / max(a + b, 1)
    u.check(abs(share - 75) <= 7, "SpinA:SpinB split %.1f%% (75 +- 7; %d vs %d)" % (share, a, b))
    unnamed = with_frame("(/tmp/perf-")
    u.check(unnamed <= 0.1 * total, "%d of %d samples with unnamed JIT frames" % (unnamed, total))
    u.check(target.poll() is None, "target unaffected")
finally:
    u.kill(target)
    for path in (dump, perfmap):
        if os.path.exists(path):
            os.unlink(path)
u.finish()
