"""ReadyToRun (precompiled) code named in dotnet-trace mode.

Most of the framework, MSBuild and Roslyn run precompiled (ReadyToRun)
code, which has no method-load event: code already bound when the agent
attaches is named by the attach rundown, code bound later by the runtime's
R2RGetEntryPoint events (docs/dotnet.md).

1. Two programs spending most of their time in framework code
   (System.Text.Json, LINQ, Regex), whose framework methods are all first
   bound after the agent attached (they wait on stdin until the attach
   rundown is over): the workload published self-contained for .NET 8,
   9 and 10 (tiered compilation off, so the precompiled code is never
   replaced), and the same program framework-dependent (`dotnet app.dll`,
   default tiering). Each: >= 95 % of its .NET frames named, known framework
   methods among them, and R2R entry points counted.
2. `dotnet build` of a small project under the agent (system-wide, no
   pids given): the share of the build processes' .NET frames that are
   named is printed and must reach the floor measured (docs/performance.md).
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil  # noqa: E402
from pputil import check, finish, skip  # noqa: E402

sys.path.insert(0, os.path.join(pputil.SRC, "tests", "workloads", "dotnet"))
import build_workload  # noqa: E402

ROOT = "/opt/polyprof-test"
MAJORS = ["8", "9", "10"]
BUILD_FLOOR = 0.95  # named share of `dotnet build` frames; measured 99.6-99.9 %
RUNTIME_ONLY = ["--no-perf", "--no-python", "--no-ruby", "--no-java"]


def named_share(stacks_by_col, want):
    """(named frames, all .NET frames, names with counts) of the stacks
    for which want(frames) is true."""
    named = total = 0
    names = {}
    for stacks in stacks_by_col:
        for frames, count in stacks:
            if not want(frames):
                continue
            net = [f for f in frames if f.endswith("_[net]")]
            total += len(net) * count
            named += sum(1 for f in net if f != "[unknown]_[net]") * count
            for f in set(net):
                names[f] = names.get(f, 0) + count
    return named, total, names


def read_profiles(outdir):
    cols = sorted(f for f in os.listdir(outdir) if f.startswith("profile_") and f.endswith(".col"))
    return [pputil.parse_col(os.path.join(outdir, c)) for c in cols]


def counter(profiles, name):
    return sum(h.get("polyprof", {}).get("dotnet", {}).get("counters", {}).get(name, 0)
               for h, _ in profiles)


def wait_for(path, pattern, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with open(path) as f:
                if re.search(pattern, f.read()):
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def framework_programs():
    exes = {m: build_workload.published(ROOT, m) for m in MAJORS}
    missing = [m for m, e in exes.items() if not e]
    if missing:
        skip("no up-to-date self-contained workload for .NET %s under %s "
             "(run scripts/install-deps.sh test)" % (", ".join(missing), ROOT))
    fd_dir = build_workload.build(pputil.BUILD)
    env = build_workload.dotnet_env()
    sc_env = dict(env, DOTNET_TieredCompilation="0")

    def spawn(cmd, e):
        return subprocess.Popen(cmd, env=e, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)

    targets = {"self-contained .NET %s" % m: spawn([exes[m], "60", "wait,framework"], sc_env)
               for m in MAJORS}
    targets["framework-dependent"] = spawn(
        ["dotnet", os.path.join(fd_dir, "PolyprofWorkload.dll"), "60", "wait,framework"], env)
    markers = {"self-contained .NET %s" % m: "/dotnet-%s/PolyprofWorkload)" % m for m in MAJORS}
    markers["framework-dependent"] = "PolyprofWorkload.dll ("
    agent = None
    try:
        for p in targets.values():
            line = p.stdout.readline()
            if not line.startswith("waiting"):
                raise RuntimeError("workload did not start: %r" % line)
        outdir = pputil.tempdir("ppdotnet-r2r-")
        cmd = pputil.agent_cmd(outdir, pputil.PLUGIN_DIR, "--dotnet-mode", "dotnet-trace", "-c",
                               "-f", "100", *RUNTIME_ONLY, "--pids",
                               ",".join(str(p.pid) for p in targets.values()), duration=4)
        log_path = os.path.join(os.path.dirname(cmd[cmd.index("--log-file") + 1]), "polyprof.log")
        agent = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for kind, p in targets.items():
            check(wait_for(log_path, r"pid %d: rundown done" % p.pid, 30),
                  "%s: attached, rundown over before the framework code runs" % kind)
        for p in targets.values():  # now bind and run the framework code
            p.stdin.write("go\n")
            p.stdin.flush()
        deadline = time.time() + 40
        while time.time() < deadline and agent.poll() is None:
            if len(read_profiles(outdir)) >= 3:
                break
            time.sleep(0.5)
        agent.send_signal(signal.SIGINT)
        agent.wait(timeout=60)
    finally:
        if agent:
            pputil.kill(agent)
        for p in targets.values():
            pputil.kill(p)
    check(agent.returncode == 0, "agent exits 0 (rc=%s)" % agent.returncode)
    profiles = read_profiles(outdir)
    stacks = [s for _, s in profiles]
    # the first profile ends while the framework code is being bound
    for kind, marker in markers.items():
        named, total, names = named_share(
            stacks, lambda fr, m=marker: any(f.startswith("appid: ") and m in f for f in fr[3:4]))
        share = named / total if total else 0
        print("%s: %d of %d .NET frames named (%.2f %%)" % (kind, named, total, 100 * share))
        check(total >= 300 and share >= 0.95,
              "%s: >= 95 %% of .NET frames named (%.2f %% of %d)" % (kind, 100 * share, total))
        for ns in ("System.Text.Json.", "System.Text.RegularExpressions.", "System.Linq."):
            check(any(f.startswith(ns) for f in names),
                  "%s: framework methods named (%s...)" % (kind, ns))
        check("System.Text.Json.JsonSerializer.Serialize_[net]" in names or
              any(f.startswith("System.Text.Json.Serialization.") for f in names),
              "%s: the serializer's own frames named" % kind)
    check(counter(profiles, "r2r_entry_points") > 100,
          "R2R entry points received (%d)" % counter(profiles, "r2r_entry_points"))


def dotnet_build():
    env = build_workload.dotnet_env()
    proj = pputil.tempdir("ppdotnet-proj-")
    p = subprocess.run(["dotnet", "new", "console", "-o", proj, "--no-restore"], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError("dotnet new failed:\n" + p.stdout[-2000:])
    shutil.copy(os.path.join(build_workload.HERE, "nuget.config"), proj)  # no package source
    outdir = pputil.tempdir("ppdotnet-build-")
    cmd = pputil.agent_cmd(outdir, pputil.PLUGIN_DIR, "--dotnet-mode", "dotnet-trace", "-c",
                           "-f", "100", "--proc-scan-interval-ms", "100", *RUNTIME_ONLY,
                           duration=4)
    agent = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(2)
        # no build server and no compiler server: nothing outlives the build
        b = subprocess.run(["dotnet", "build", proj, "-nodeReuse:false",
                            "-p:UseSharedCompilation=false", "-o", os.path.join(proj, "out")],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=300)
        check(b.returncode == 0, "dotnet build succeeded" +
              ("" if b.returncode == 0 else ":\n" + b.stdout[-2000:]))
        time.sleep(5)  # the last session ends and the stopped streams drain
        agent.send_signal(signal.SIGINT)
        agent.wait(timeout=60)
    finally:
        pputil.kill(agent)
    profiles = read_profiles(outdir)

    def build_process(frames):  # the build's processes, not other .NET programs
        return (frames[2] in ("dotnet", "csc", "MSBuild", "VBCSCompiler") and
                not any("PolyprofWorkload" in f for f in frames[3:4]))

    named, total, names = named_share([s for _, s in profiles], build_process)
    share = named / total if total else 0
    print("dotnet build: %d of %d .NET frames named (%.2f %%)" % (named, total, 100 * share))
    check(total >= 1000, "dotnet build sampled (%d .NET frames)" % total)
    check(share >= BUILD_FLOOR, "dotnet build: %.2f %% of .NET frames named (floor %.0f %%)" %
          (100 * share, 100 * BUILD_FLOOR))
    check(any(f.startswith("Microsoft.Build.") for f in names), "MSBuild's own methods named")
    check(any(f.startswith("Microsoft.CodeAnalysis.") for f in names),
          "the compiler's (Roslyn) methods named")


def main():
    if not shutil.which("dotnet"):
        skip("dotnet SDK not on PATH")
    framework_programs()
    dotnet_build()
    finish()


if __name__ == "__main__":
    main()
