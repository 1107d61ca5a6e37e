"""perf plugin through the real agent: the .col the agent writes.

- fp mode: the frame-pointer build's stacks (comm, root to leaf), kernel
  frames with _[k], gProfiler's line layout;
- dwarf mode through the gProfiler flags (--perf-mode dwarf
  --perf-dwarf-stack-size 16384): the build without frame pointers;
- unprivileged: the agent says what to change and goes on perf-less.
"""
import glob
import os
import shutil
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
tmp = pputil.tempdir("ppperf-agent-")
fp_bin, nofp_bin = perfutil.build_hot(tmp)
sys_bin = perfutil.build_c("syscalls", tmp, "-O1", "-fno-omit-frame-pointer")


def run(out, *flags, duration=10):
    r = pputil.run_agent(out, plugins, "-f", "99", *flags, duration=duration, timeout=180)
    cols = sorted(glob.glob(os.path.join(out, "profile_*.col")))
    if r.returncode != 0 or not cols:
        print(r.stdout, r.stderr)
    return r, (pputil.parse_col(cols[-1]) if cols else (None, []))


def stacks_of(stacks, comm):
    # line: <appmeta idx>;<container>;<comm>;<frames...>
    return [(f[3:], c) for f, c in stacks if len(f) > 3 and f[2] == comm]


# normal priority: boosted workloads would starve the agent itself
procs = [pputil.spawn([fp_bin, "90"]), pputil.spawn([nofp_bin, "90"]), pputil.spawn([sys_bin, "90"])]
try:
    out = pputil.tempdir("ppperf-agent-out-")
    r, (header, stacks) = run(out)
    check(r.returncode == 0, "agent exits 0 (fp)")
    check(header is not None and "application_metadata" in header, ".col header written")
    hot = stacks_of(stacks, "hot_fp")
    full = sum(c for f, c in hot if f[-1] in ("hot_a", "hot_b") and "main" in f)
    print("hot_fp: %d samples, %d resolved to main" % (sum(c for _, c in hot), full))
    check(full > 0, "fp: hot_fp stacks root-first down to hot_a/hot_b")
    check(any(f[:2] == ["__libc_start_call_main", "main"] for f, _ in hot), "fp: root frames first")
    ks = stacks_of(stacks, "syscalls")
    check(any(x.endswith("_[k]") for f, _ in ks for x in f), "kernel frames carry _[k] in the .col")
    check(not any("_[k]" in x and not x.endswith("_[k]") for f, _ in stacks for x in f),
          "suffix only at the end of a frame")

    out = pputil.tempdir("ppperf-agent-out-")
    r, (header, stacks) = run(out, "--perf-mode", "dwarf", "--perf-dwarf-stack-size", "16384")
    check(r.returncode == 0, "agent exits 0 (dwarf)")
    nofp = stacks_of(stacks, "hot_nofp")
    full = sum(c for f, c in nofp if f and f[-1] in ("hot_a", "hot_b") and "main" in f)
    print("hot_nofp (dwarf): %d samples, %d resolved to main" % (sum(c for _, c in nofp), full))
    check(full > 0, "dwarf through --perf-mode: the no-FP build resolves to main")
finally:
    for p in procs:
        pputil.kill(p)

if shutil.which("setpriv"):
    with open("/proc/sys/kernel/perf_event_paranoid") as f:
        paranoid = int(f.read())
    if paranoid >= 1:
        out = pputil.tempdir("ppperf-agent-out-")
        run_dir = pputil.tempdir("ppperf-agent-run-")
        # the agent's own directories belong to its user; the plugin
        # directory stays root's and writable by nobody else (both are
        # required of them)
        for d in (out, run_dir):
            os.chown(d, 65534, 65534)
        os.chmod(plugins, 0o755)
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
               "--bounding-set=-all", pputil.AGENT, "-o", out, "-d", "3", "--plugin-dir", plugins,
               "--pid-file", os.path.join(run_dir, "pid"), "--log-file", os.path.join(run_dir, "log"),
               "--config", os.path.join(pputil.SRC, "tests", "integration", "empty.yaml")]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
        log = open(os.path.join(run_dir, "log")).read() if os.path.exists(os.path.join(run_dir, "log")) else ""
        check(r.returncode == 0, "unprivileged agent goes on (exit %d)" % r.returncode)
        check("perf_event_paranoid" in log and "CAP_PERFMON" in log, "unprivileged: the log says what to change")
        check(len(glob.glob(os.path.join(out, "profile_*.col"))) == 1, "unprivileged: a (perf-less) profile is written")
pputil.finish()
