"""perf names precompiled (ReadyToRun) .NET code from the image files.

The .NET runtime's perf map lists only the code its JIT compiled; most of
the framework is precompiled, so without help its frames read as the
assembly's path, "(.../System.Private.CoreLib.dll)". The perf plugin reads
the image's ReadyToRun tables and metadata instead (docs/perf.md), nothing
asked of the target.

Targets: the test workload's framework-heavy behaviour (JSON, LINQ, Regex
and sorting in framework code) framework-dependent on the installed
runtime, and self-contained on .NET 8, 9 and 10 (scripts/install-deps.sh
test), with tiered compilation off so that the framework's precompiled
code is what runs (tiering would soon replace the hottest of it with JIT
code, which the perf map names). A first session with perf alone (the
dotnet plugin off): the framework's methods named, no perf map written.
Then one session in perfmap mode: perf samples, the runtime writes its
perf map for the workload's own (JIT) methods. Per target: framework methods named under the workload's
JIT-named frames, with the .NET suffix; almost no frame left as a .dll
path; perf's counters say so.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import pputil  # noqa: E402
from pputil import check, finish, skip  # noqa: E402

sys.path.insert(0, os.path.join(pputil.SRC, "tests", "workloads", "dotnet"))
import build_workload  # noqa: E402

ROOT = "/opt/polyprof-test"
MAJORS = ["8", "9", "10"]
# the workload's own frames: its perf map line ("... FrameworkWorker::Run(...)") or,
# self-contained (where it is precompiled too), its ReadyToRun name
WORKER = "Polyprof.Workload.FrameworkWorker"
SPACES = ("System.Text.Json.", "System.Linq.", "System.Text.RegularExpressions.")


def main():
    try:
        fd_dir = build_workload.build(pputil.BUILD)
    except FileNotFoundError as e:
        skip(str(e))
    exes = {m: build_workload.published(ROOT, m) for m in MAJORS}
    missing = [m for m, e in exes.items() if not e]
    if missing:
        skip("no up-to-date self-contained workload for .NET %s under %s "
             "(run scripts/install-deps.sh test)" % (", ".join(missing), ROOT))
    env = dict(build_workload.dotnet_env(), DOTNET_TieredCompilation="0")
    env.pop("DOTNET_PerfMapEnabled", None)

    def spawn(cmd):
        return subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)

    targets = {"framework-dependent": spawn(
        ["dotnet", os.path.join(fd_dir, "PolyprofWorkload.dll"), "40", "framework"])}
    for m in MAJORS:
        targets[".NET %s" % m] = spawn([exes[m], "40", "framework"])
    try:
        for p in targets.values():
            p.stdout.readline()
        # perf alone first (the dotnet plugin off): the framework is named
        # from the files, the targets asked nothing (no perf map appears)
        alone = pputil.tempdir("ppperf-r2r-alone-")
        p = pputil.run_agent(alone, pputil.PLUGIN_DIR, "--no-dotnet", "-f", "99", "--no-python",
                             "--no-ruby", "--no-java", "--pids",
                             ",".join(str(t.pid) for t in targets.values()), duration=3,
                             timeout=120)
        check(p.returncode == 0, "perf alone: agent exits 0 (rc=%s)" % p.returncode)
        maps = [t.pid for t in targets.values() if os.path.exists("/tmp/perf-%d.map" % t.pid)]
        check(not maps, "perf alone: no target wrote a perf map (%s)" % maps)
        alone_names = set()
        for c in os.listdir(alone):
            if c.startswith("profile_") and c.endswith(".col"):
                for frames, _ in pputil.parse_col(os.path.join(alone, c))[1]:
                    alone_names.update(f for f in frames if f.endswith("_[net]"))
        for ns in SPACES:
            check(any(f.startswith(ns) for f in alone_names),
                  "perf alone: %s* methods named from the images" % ns)
        outdir = pputil.tempdir("ppperf-r2r-")
        p = pputil.run_agent(outdir, pputil.PLUGIN_DIR, "--dotnet-mode", "perfmap", "-f", "99",
                             "--no-python", "--no-ruby", "--no-java", "--pids",
                             ",".join(str(t.pid) for t in targets.values()), duration=5,
                             timeout=120)
        check(p.returncode == 0, "agent exits 0 (rc=%s)" % p.returncode)
    finally:
        for t in targets.values():
            pputil.kill(t)
            if os.path.exists("/tmp/perf-%d.map" % t.pid):
                os.unlink("/tmp/perf-%d.map" % t.pid)
    cols = sorted(f for f in os.listdir(outdir) if f.startswith("profile_") and f.endswith(".col"))
    check(len(cols) >= 1, "a profile written")
    if not cols:
        finish()
    header, stacks = pputil.parse_col(os.path.join(outdir, cols[0]))
    counters = (header or {}).get("polyprof", {}).get("perf", {}).get("counters", {})
    markers = {".NET %s" % m: "/dotnet-%s/PolyprofWorkload)" % m for m in MAJORS}
    markers["framework-dependent"] = "PolyprofWorkload.dll ("
    for kind, marker in markers.items():
        under = {}
        paths = named = 0
        for frames, count in stacks:
            if not any(f.startswith("appid: ") and marker in f for f in frames[:5]):
                continue
            for i, f in enumerate(frames):
                if f.endswith(".dll)") and not f.startswith("appid: "):
                    paths += count
                elif f.startswith("System.") and f.endswith("_[net]"):
                    named += count
                    if any(WORKER in g for g in frames[:i]):
                        under[f] = under.get(f, 0) + count
        top = sorted(under.items(), key=lambda x: -x[1])[:5]
        print("%s: %d framework frames named, %d left as a .dll path; under the workload: %s"
              % (kind, named, paths, top))
        spaces = [ns for ns in SPACES if any(f.startswith(ns) for f in under)]
        check(len(spaces) >= 2,
              "%s: framework methods named under the workload's frames (%s)"
              % (kind, ", ".join(spaces)))
        check(named >= 20 and paths * 20 <= named + paths,
              "%s: <= 5 %% of the framework frames left as a .dll path (%d of %d)"
              % (kind, paths, named + paths))
    check(counters.get("r2r_frames", 0) > 0,
          "perf counted frames named from ReadyToRun tables (%s)" % counters.get("r2r_frames"))
    if pputil.failures:
        print(header)
        print("\n".join(";".join(fr) for fr, _ in stacks[:10]))
    finish()


if __name__ == "__main__":
    main()
