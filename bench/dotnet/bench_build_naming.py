"""How much of `dotnet build` the dotnet-trace mode names, and what naming
costs: a fresh console project is built (no build or compiler server) under
the agent, system-wide at 100 Hz with only the dotnet plugin, in
interleaved rounds for each build tree given (the tree under test first;
--compare TREE adds another, e.g. one built from an earlier revision).

Per tree it prints: the build processes' .NET samples, those with an
[unknown] frame and those whose leaf is [unknown], the share of .NET frames
named, the agent's CPU seconds (core + workers, from its session lines),
and the plugin's counters (method events, R2R entry points, stream bytes).

  python3 bench/dotnet/bench_build_naming.py [--rounds N] [--compare BUILD_DIR]
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "workloads", "dotnet"))
import build_workload  # noqa: E402

BUILD_COMMS = ("dotnet", "csc", "MSBuild", "VBCSCompiler")


def one_round(build_dir, proj_template, env):
    work = tempfile.mkdtemp(prefix="ppbench-build-")
    try:
        proj = os.path.join(work, "app")
        shutil.copytree(proj_template, proj)
        out = os.path.join(work, "out")
        os.mkdir(out)
        log = os.path.join(work, "polyprof.log")
        cmd = [os.path.join(build_dir, "polyprof"), "-o", out, "-d", "4", "-c", "-f", "100",
               "--plugin-dir", os.path.join(build_dir, "plugins"),
               "--pid-file", os.path.join(work, "pid"), "--log-file", log,
               "--config", os.path.join(SRC, "tests", "integration", "empty.yaml"),
               "--dotnet-mode", "dotnet-trace", "--proc-scan-interval-ms", "100",
               "--no-perf", "--no-python", "--no-ruby", "--no-java"]
        agent = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(2)
            t0 = time.time()
            subprocess.run(["dotnet", "build", proj, "-nodeReuse:false",
                            "-p:UseSharedCompilation=false", "-o", os.path.join(proj, "bin-out")],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           check=True, timeout=600)
            build_s = time.time() - t0
            time.sleep(5)
            agent.send_signal(signal.SIGINT)
            agent.wait(timeout=60)
        finally:
            if agent.poll() is None:
                agent.kill()
                agent.wait()
        r = {"build_s": build_s, "samples": 0, "with_unknown": 0, "leaf_unknown": 0,
             "frames": 0, "named": 0, "agent_cpu_s": 0.0, "method_events": 0,
             "r2r_entry_points": 0, "stream_bytes": 0}
        for name in sorted(os.listdir(out)):
            if not (name.startswith("profile_") and name.endswith(".col")):
                continue
            sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
            import pputil  # noqa: E402
            header, stacks = pputil.parse_col(os.path.join(out, name))
            counters = header.get("polyprof", {}).get("dotnet", {}).get("counters", {})
            for k in ("method_events", "r2r_entry_points", "stream_bytes"):
                r[k] += counters.get(k, 0)
            for frames, count in stacks:
                if frames[2] not in BUILD_COMMS:
                    continue
                net = [f for f in frames if f.endswith("_[net]")]
                if not net:
                    continue
                r["samples"] += count
                unknown = sum(1 for f in net if f == "[unknown]_[net]")
                r["with_unknown"] += count if unknown else 0
                r["leaf_unknown"] += count if frames[-1] == "[unknown]_[net]" else 0
                r["frames"] += len(net) * count
                r["named"] += (len(net) - unknown) * count
        with open(log) as f:
            r["agent_cpu_s"] = sum(float(x) for x in re.findall(r"agent CPU ([0-9.]+) s", f.read()))
        return r
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--build-dir", default=os.environ.get("PP_BUILD_DIR", os.path.join(SRC, "build")))
    ap.add_argument("--compare", action="append", default=[])
    args = ap.parse_args()
    if not shutil.which("dotnet"):
        print("bench_build_naming: SKIPPED (no .NET SDK on PATH)")
        return
    env = build_workload.dotnet_env()
    template = tempfile.mkdtemp(prefix="ppbench-proj-")
    try:
        subprocess.run(["dotnet", "new", "console", "-o", template, "--no-restore"], env=env,
                       stdout=subprocess.DEVNULL, check=True)
        shutil.copy(os.path.join(build_workload.HERE, "nuget.config"), template)
        subprocess.run(["dotnet", "restore", template], env=env, stdout=subprocess.DEVNULL,
                       check=True)
        trees = [args.build_dir] + args.compare
        totals = {t: [] for t in trees}
        for _ in range(args.rounds):
            for t in trees:
                totals[t].append(one_round(t, template, env))
    finally:
        shutil.rmtree(template, ignore_errors=True)
    for t in trees:
        rs = totals[t]
        s = {k: sum(r[k] for r in rs) for k in rs[0]}
        print("%s: %d rounds, build %.1f s/round: %d .NET samples, %d (%.1f %%) with an [unknown] "
              "frame, %d (%.1f %%) with an [unknown] leaf; %.2f %% of %d .NET frames named; "
              "agent CPU %.2f s/round; method events %d/round (R2R entry points %d), "
              "stream %.1f MB/round" %
              (t, len(rs), s["build_s"] / len(rs), s["samples"], s["with_unknown"],
               100.0 * s["with_unknown"] / max(1, s["samples"]), s["leaf_unknown"],
               100.0 * s["leaf_unknown"] / max(1, s["samples"]),
               100.0 * s["named"] / max(1, s["frames"]), s["frames"], s["agent_cpu_s"] / len(rs),
               s["method_events"] // len(rs), s["r2r_entry_points"] // len(rs),
               s["stream_bytes"] / len(rs) / 1e6))


if __name__ == "__main__":
    main()
