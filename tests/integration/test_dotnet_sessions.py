"""20 consecutive EventPipe sessions on one .NET process: the target must not
slow down or leak (file descriptors, threads, memory), every session must
carry samples, and the plugin's worker must not grow."""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil  # noqa: E402
from pputil import check, finish, skip  # noqa: E402

sys.path.insert(0, os.path.join(pputil.SRC, "tests", "workloads", "dotnet"))
import build_workload  # noqa: E402

SESSIONS = 20


def proc_facts(pid):
    fds = len(os.listdir("/proc/%d/fd" % pid))
    threads = len(os.listdir("/proc/%d/task" % pid))
    rss = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    return fds, threads, rss


def main():
    try:
        out = build_workload.build(pputil.BUILD)
    except FileNotFoundError as e:
        skip(str(e))
    target = subprocess.Popen([os.path.join(out, "PolyprofWorkload"), "300", "split"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              env=build_workload.dotnet_env())
    target.stdout.readline()
    outdir = pputil.tempdir("ppdotnet-sessions-")
    # only the dotnet plugin: the worker-RSS figure in the session log is the
    # sum over all workers, and perf's symbol cache legitimately grows
    only_dotnet = pputil.plugin_dir_with(os.path.join(pputil.PLUGIN_DIR, "dotnet.so"))
    cmd = pputil.agent_cmd(outdir, only_dotnet, "--dotnet-mode", "dotnet-trace", "-c",
                           "-f", "100", "--pids", str(target.pid), duration=1)
    agent = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    facts = {}
    try:
        deadline = time.time() + 240
        n = 0
        while time.time() < deadline and agent.poll() is None:
            n = len([f for f in os.listdir(outdir) if f.startswith("profile_") and f.endswith(".col")])
            if n in (3, SESSIONS) and n not in facts:
                facts[n] = proc_facts(target.pid)
            if n >= SESSIONS + 1:
                break
            time.sleep(0.2)
        agent.send_signal(signal.SIGINT)
        log, _ = agent.communicate(timeout=60)
    finally:
        pputil.kill(agent)
        target_alive = target.poll() is None
        pputil.kill(target)
    check(agent.returncode == 0, "agent exits 0")
    check(target_alive, "target still running after %d sessions" % SESSIONS)
    cols = sorted(f for f in os.listdir(outdir) if f.startswith("profile_") and f.endswith(".col"))
    check(len(cols) >= SESSIONS, "%d sessions written (%d)" % (SESSIONS, len(cols)))
    counts = []
    restarts = 0
    for c in cols[:SESSIONS]:
        header, stacks = pputil.parse_col(os.path.join(outdir, c))
        restarts = max(restarts, header.get("polyprof", {}).get("dotnet", {}).get("restarts", 0))
        counts.append(sum(n for fr, n in stacks if "Polyprof.Workload.SplitWorker.SpinA_[net]" in fr
                          or "Polyprof.Workload.SplitWorker.SpinB_[net]" in fr))
    print("split samples per session:", counts)
    check(all(c > 0 for c in counts[1:]), "every session has named samples")
    # no slowdown: the sampled rate late in the run is comparable to early on
    # (the machine is shared, so the bound is loose)
    early = sum(counts[1:6]) / 5.0 if len(counts) >= 6 else 0
    late = sum(counts[-5:]) / 5.0 if len(counts) >= 6 else 0
    check(early > 0 and late >= 0.5 * early, "late sessions keep their rate (%.1f vs %.1f)" % (late, early))
    check(restarts == 0, "plugin never restarted")
    if 3 in facts and SESSIONS in facts:
        (fd3, th3, rss3), (fd20, th20, rss20) = facts[3], facts[SESSIONS]
        print("target fds/threads/rss KiB: session 3 %s, session %d %s" % (facts[3], SESSIONS, facts[SESSIONS]))
        check(fd20 <= fd3 + 2, "target fds do not grow (%d -> %d)" % (fd3, fd20))
        check(th20 <= th3 + 2, "target threads do not grow (%d -> %d)" % (th3, th20))
        check(rss20 <= rss3 + 32 * 1024, "target RSS grows < 32 MiB (%d -> %d KiB)" % (rss3, rss20))
    else:
        check(False, "target facts sampled at sessions 3 and %d" % SESSIONS)
    worker_rss = [float(x.split(" MiB")[0].split()[-1]) for x in log.split("workers ")[1:]
                  if " MiB" in x.split("\n")[0]]
    if len(worker_rss) >= 10:
        check(worker_rss[-1] <= worker_rss[2] + 16, "plugin worker RSS stable (%s MiB)" % worker_rss[2::6])
    finish()


if __name__ == "__main__":
    main()
