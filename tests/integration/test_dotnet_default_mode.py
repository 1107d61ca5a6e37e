"""The default .NET mode (`--dotnet-mode auto`) on .NET 8, 9 and 10: the
self-contained test workload of each major (scripts/install-deps.sh test,
/opt/polyprof-test/dotnet-<major>/).

One agent run with perf over the three majors at once: per major a process
running the split, and one running the generic, async and exceptions
behaviours that exits in the middle of the third session (the split
without tiered compilation). The plugin
enables the runtime's perf map and perf samples: per major the 3:1 split
within 5 points, the generic, async-state-machine and exception-throwing
methods named from the map, the framework's precompiled frames named (perf
reads the images), the short process's samples kept with its
thread names and appid in the session it exited in, the mode and why in the
app metadata, and the achieved rate and the map's cost logged per process.
Then the same processes with perf off (`--no-perf`, two sessions): auto falls back to
dotnet-trace with the sampler in bursts when `perfless: bursts` says so
(`polyprof run/attach`'s default) and says so (log, metadata), the split's
frames named from EventPipe; with the daemon's defaults (`perfless: none`)
.NET is left unsampled and each process's status says why. And one session asking
for wall time (`--dotnet-wall`, `polyprof run`'s default): auto takes
dotnet-trace, which has it, and says so.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil  # noqa: E402
from pputil import check, finish, skip  # noqa: E402

sys.path.insert(0, os.path.join(pputil.SRC, "tests", "workloads", "dotnet"))
import build_workload  # noqa: E402

MAJORS = ["8", "9", "10"]
ROOT = "/opt/polyprof-test"
NS = "Polyprof.Workload."


def spawn(cmd, **env):
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, env=dict(build_workload.dotnet_env(), **env))


def cols_of(outdir):
    return sorted(f for f in os.listdir(outdir) if f.startswith("profile_") and f.endswith(".col"))


def log_of(cmd):
    with open(os.path.join(os.path.dirname(cmd[cmd.index("--log-file") + 1]), "polyprof.log")) as f:
        return f.read()


def major_of(frames):
    """The major from the appid frame (.col: meta index, container, comm, appid, ...)."""
    for f in frames[3:4]:
        for m in MAJORS:
            if f.startswith("appid: ") and "/dotnet-%s/" % m in f:
                return m
    return None


def metadata_by_major(header):
    out = {}
    for md in header.get("application_metadata", []) or []:
        if isinstance(md, dict):
            for m in MAJORS:
                if "/dotnet-%s/" % m in str(md.get("exe", "")):
                    out[m] = md
    return out


def has(frames, text):
    return any(text in f for f in frames)


def has_method(frames, type_name, method):
    """The method named from the perf map ("[Asm] NS.Type::Method(sig)[tier]_[net]")
    or from its precompiled image ("NS.Type.Method_[net]")."""
    return any(type_name + "::" + method + "(" in f or f.endswith(type_name + "." + method + "_[net]")
               for f in frames)


def run_auto(longs, shorts):
    """Sessions of 3 s with perf; the short processes exit during the third.
    Returns (agent rc, [(col path, header, stacks)], log, exit time)."""
    outdir = pputil.tempdir("ppdotnet-auto-")
    pids = [str(p.pid) for p in list(longs.values()) + list(shorts.values())]
    # 300 Hz: a few hundred split samples even when the host is loaded
    cmd = pputil.agent_cmd(outdir, pputil.PLUGIN_DIR, "--dotnet-mode", "auto", "-c", "-f", "300",
                           "--no-python", "--no-ruby", "--no-java", "--no-php", "--no-nodejs",
                           "--pids", ",".join(pids), duration=3)
    agent = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    exited_at = None
    try:
        deadline = time.time() + 60
        while time.time() < deadline and agent.poll() is None and len(cols_of(outdir)) < 2:
            time.sleep(0.1)
        time.sleep(1.2)
        for p in shorts.values():
            p.stdin.close()
        for p in shorts.values():
            p.wait(timeout=20)
        exited_at = time.time()
        while time.time() < deadline and agent.poll() is None and len(cols_of(outdir)) < 4:
            time.sleep(0.1)
        agent.send_signal(signal.SIGINT)
        agent.wait(timeout=60)
    finally:
        pputil.kill(agent)
    cols = []
    for c in cols_of(outdir):
        path = os.path.join(outdir, c)
        header, stacks = pputil.parse_col(path)
        cols.append((os.path.getmtime(path), header, stacks))
    return agent.returncode, cols, log_of(cmd), exited_at


def run_fallback(longs):
    """Two 4 s sessions without perf (a loaded host may give a target few
    bursts in its first session, which starts with the attach rundown)."""
    outdir = pputil.tempdir("ppdotnet-auto-noperf-")
    cmd = pputil.agent_cmd(outdir, pputil.PLUGIN_DIR, "--dotnet-mode", "auto", "--dotnet-perfless", "bursts",
                           "--no-perf", "-c", "-f", "100", "--no-python", "--no-ruby", "--no-java", "--no-php", "--no-nodejs",
                           "--pids", ",".join(str(p.pid) for p in longs.values()), duration=4)
    agent = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 40
        while time.time() < deadline and agent.poll() is None and len(cols_of(outdir)) < 2:
            time.sleep(0.1)
        agent.send_signal(signal.SIGINT)
        agent.wait(timeout=60)
    finally:
        pputil.kill(agent)
    cols = [pputil.parse_col(os.path.join(outdir, c)) for c in cols_of(outdir)]
    return agent.returncode, cols, log_of(cmd)


def run_perfless_default(longs):
    """One session of the daemon's defaults (no --dotnet-mode) without perf:
    .NET is not sampled (EventPipe would suspend the targets), and each
    process's status says why."""
    outdir = pputil.tempdir("ppdotnet-auto-perfless-")
    cmd = pputil.agent_cmd(outdir, pputil.PLUGIN_DIR, "--no-perf", "-f", "100",
                           "--no-python", "--no-ruby", "--no-java", "--no-php", "--no-nodejs",
                           "--pids", ",".join(str(p.pid) for p in longs.values()), duration=2)
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    cols = [pputil.parse_col(os.path.join(outdir, c)) for c in cols_of(outdir)]
    return p.returncode, cols, log_of(cmd)


def run_wall(longs):
    """One session asking for wall time (`--dotnet-wall`, what `polyprof
    run` asks by default): perf samples threads on a CPU only, so auto takes
    the runtime's sampler."""
    outdir = pputil.tempdir("ppdotnet-auto-wall-")
    cmd = pputil.agent_cmd(outdir, pputil.PLUGIN_DIR, "--dotnet-mode", "auto", "--dotnet-wall", "-f", "100",
                           "--no-python", "--no-ruby", "--no-java", "--no-php", "--no-nodejs",
                           "--pids", ",".join(str(p.pid) for p in longs.values()), duration=3)
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    cols = [pputil.parse_col(os.path.join(outdir, c)) for c in cols_of(outdir)]
    return p.returncode, cols, log_of(cmd)


def main():
    exes = {m: build_workload.published(ROOT, m) for m in MAJORS}
    missing = [m for m, e in exes.items() if not e]
    if missing:
        skip("no up-to-date self-contained workload for .NET %s under %s "
             "(run scripts/install-deps.sh test)" % (", ".join(missing), ROOT))
    longs, shorts = {}, {}
    try:
        # the split without tiered compilation: its methods keep their
        # precompiled code (named by perf from the image), the same code
        # quality for both halves from the start (while one of them runs
        # an instrumented JIT tier the split by work is not 3:1 in time);
        # the short processes tier as usual (JIT code, named from the map)
        longs = {m: spawn([exes[m], "60", "split"], DOTNET_TieredCompilation="0") for m in MAJORS}
        shorts = {m: spawn([exes[m], "60", "generic,async,exceptions,stdin-exit"]) for m in MAJORS}
        for p in list(longs.values()) + list(shorts.values()):
            line = p.stdout.readline()
            if not line.startswith("ready"):
                raise RuntimeError("workload did not start: %r" % line)
        # the short processes' hot methods reach a JIT tier
        time.sleep(2)
        rc, cols, log, exited_at = run_auto(longs, shorts)
        fb_rc, fb_cols, fb_log = run_fallback(longs)
        pl_rc, pl_cols, pl_log = run_perfless_default(longs)
        wall_rc, wall_cols, wall_log = run_wall(longs)
    finally:
        for p in list(longs.values()) + list(shorts.values()):
            pputil.kill(p)
        for p in list(longs.values()) + list(shorts.values()):
            if os.path.exists("/tmp/perf-%d.map" % p.pid):
                os.unlink("/tmp/perf-%d.map" % p.pid)

    check(rc == 0, "auto: agent exits 0 (rc=%s)" % rc)
    check(len(cols) >= 4, "auto: at least 4 sessions written (%d)" % len(cols))
    check("mode auto: perf samples, the runtime writes its perf map" in log,
          "auto with perf: the choice logged")
    split = {m: [0, 0] for m in MAJORS}
    seen = {m: set() for m in MAJORS}
    meta = {}
    for _, header, stacks in cols:
        meta.update(metadata_by_major(header))
        for frames, count in stacks:
            m = major_of(frames)
            if m is None:
                continue
            if has_method(frames, "SplitWorker", "ThreeQuarters"):
                split[m][0] += count
            if has_method(frames, "SplitWorker", "OneQuarter"):
                split[m][1] += count
            seen[m].update(frames)
    # the session the short processes exited in: the first written after
    exit_cols = [c for c in cols if c[0] >= exited_at]
    exit_stacks = exit_cols[0][2] if exit_cols else []
    for m in MAJORS:
        md = meta.get(m, {})
        check(md.get("dotnet_mode") == "perfmap" and "perf samples" in md.get("dotnet_mode_reason", "")
              and str(md.get("dotnet_version", "")).startswith(m + "."),
              ".NET %s: mode, reason and version in the app metadata (%s)" % (m, json.dumps(md)))
        a, b = split[m]
        ratio = a / (a + b) if a + b else 0
        check(a + b >= 100 and 0.70 <= ratio <= 0.80,
              ".NET %s: 3:1 split within 5 points: %.3f (A=%d B=%d)" % (m, ratio, a, b))
        names = seen[m]
        check(has_method(names, NS + "GenericBox`1[System.__Canon]", "GenericCompute"),
              ".NET %s: generic method named (GenericBox`1[System.__Canon]::GenericCompute)" % m)
        check(has_method(names, NS + "AsyncWorker+<AsyncCompute>d__0", "MoveNext"),
              ".NET %s: async state machine named (<AsyncCompute>d__0::MoveNext)" % m)
        check(has_method(names, NS + "ExceptionWorker", "ThrowAndCatch"),
              ".NET %s: exceptions thrown in a loop: ThrowAndCatch named" % m)
        jit = sorted(f for f in names if "[PolyprofWorkload] " + NS in f)
        check(jit, ".NET %s: JIT-compiled workload methods named from the runtime's perf map (%d, e.g. %s)"
              % (m, len(jit), jit[:1]))
        # the process that exited: its samples of that session kept, with
        # its thread names and its appid
        mine = [(fr, c) for fr, c in exit_stacks if major_of(fr) == m and fr[2] in ("generic", "exceptions")]
        check(sum(c for _, c in mine) > 0 and any(has(fr, "ExceptionWorker::") or has(fr, "GenericBox`1")
                                                 for fr, _ in mine),
              ".NET %s: the process that exited mid-session kept its samples of that session, named, "
              "with its appid (%d)" % (m, sum(c for _, c in mine)))
        p = longs[m]
        check(re.search(r"pid %d: \.NET %s\.\S+ sampled by perf at 300 Hz of its CPU time: [0-9.]+ CPUs "
                        r"busy, so about [0-9.]+ samples/s; the target pays its perf map: [1-9][0-9]* lines"
                        % (p.pid, m), log),
              ".NET %s: the achieved rate and the target's cost logged" % m)
    # the framework's frames, precompiled (named by perf from the image) or
    # JIT-compiled (named from the map), with the .NET suffix; hardly any
    # left as the image's path
    for m in MAJORS:
        paths, named = 0, 0
        for _, _, stacks in cols:
            for frames, count in stacks:
                if major_of(frames) != m:
                    continue
                paths += sum(count for f in frames if f.endswith("System.Private.CoreLib.dll)"))
                named += sum(count for f in frames if f.endswith("_[net]") and
                             (f.startswith("System.") or "[System.Private.CoreLib] " in f))
        check(named >= 20 and paths * 20 <= named + paths,
              ".NET %s: framework frames named, <= 5 %% left as System.Private.CoreLib.dll's path "
              "(%d of %d)" % (m, paths, named + paths))

    check(fb_rc == 0, "auto without perf: agent exits 0 (rc=%s)" % fb_rc)
    check("mode auto: no system-wide plugin samples" in fb_log and "sampler in bursts" in fb_log,
          "auto without perf: the fallback to dotnet-trace in bursts logged")
    fb_meta = {}
    fb_split = {m: 0 for m in MAJORS}
    for header, stacks in fb_cols:
        fb_meta.update(metadata_by_major(header))
        for frames, count in stacks:
            m = major_of(frames)
            if m and NS + "SplitWorker.ThreeQuarters_[net]" in frames:
                fb_split[m] += count
    for m in MAJORS:
        md = fb_meta.get(m, {})
        check(md.get("dotnet_mode") == "dotnet-trace (bursts)" and
              "no system-wide plugin" in md.get("dotnet_mode_reason", ""),
              ".NET %s without perf: the fallback and why in the app metadata (%s)" % (m, json.dumps(md)))
        check(fb_split[m] > 0, ".NET %s without perf: the split named from EventPipe (%d)" % (m, fb_split[m]))
        check(re.search(r"pid %d: \.NET %s\.\S+ sampled in bursts" % (longs[m].pid, m), fb_log),
              ".NET %s without perf: the bursts' rate and cost logged" % m)
    check(pl_rc == 0 and "EventPipe sampling suspends the target: .NET not sampled" in pl_log,
          "daemon defaults without perf: .NET left unsampled, said in the log (rc=%s)" % pl_rc)
    pl_net, pl_status = 0, 0
    for _, stacks in pl_cols:
        for frames, count in stacks:
            pl_net += count if any(f.endswith("_[net]") for f in frames) else 0
            pl_status += any(f.startswith("[Profiling skipped: no perf to sample .NET") for f in frames)
    check(pl_net == 0, "daemon defaults without perf: no .NET sample taken (%d)" % pl_net)
    check(pl_status >= len(MAJORS), "daemon defaults without perf: each .NET process's status says why "
          "(%d stacks with '[Profiling skipped: no perf to sample .NET ...]')" % pl_status)
    check(wall_rc == 0 and "mode auto: wall time asked, which perf does not give: dotnet-trace" in wall_log,
          "auto with wall time asked: dotnet-trace, said in the log (rc=%s)" % wall_rc)
    wall_meta = {}
    for header, _ in wall_cols:
        wall_meta.update(metadata_by_major(header))
    check(all(wall_meta.get(m, {}).get("dotnet_mode") == "dotnet-trace" for m in MAJORS),
          "auto with wall time asked: dotnet_mode dotnet-trace in every major's metadata (%s)"
          % {m: wall_meta.get(m, {}).get("dotnet_mode") for m in MAJORS})
    if pputil.failures:
        for m in MAJORS:
            print(m, sorted(seen[m])[:40])
        print(log[-3000:])
    finish()


if __name__ == "__main__":
    main()
