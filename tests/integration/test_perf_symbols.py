"""perf plugin, real perf_event sampling: symbolization in one session.

Runs at once: a syscall-heavy program (kernel frames, _[k]), a Go program
(symbols + golang_version metadata), a stripped binary ((path) frames), a
JIT-like program with its own /tmp/perf-PID.map, a binary that exists only
inside a private mount namespace, and a process that starts after sampling
began and exits before the snapshot (keeps its samples).
"""
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perfutil  # noqa: E402
import pputil  # noqa: E402
from pputil import check  # noqa: E402

perfutil.require_perf()
tmp = pputil.tempdir("ppperf-sym-")
W = perfutil.WORKLOADS
fp_bin, _ = perfutil.build_hot(tmp)
sys_bin = perfutil.build_c("syscalls", tmp, "-O1", "-fno-omit-frame-pointer")
jit_bin = perfutil.build_c("jit", tmp, "-O1", "-fno-omit-frame-pointer")
stripped = os.path.join(tmp, "hot_stripped")
shutil.copy(fp_bin, stripped)
subprocess.run(["strip", "-s", stripped], check=True)

go_bin = None
if shutil.which("go"):
    env = dict(os.environ, GOCACHE=os.path.join(tmp, "gocache"), GOPATH=os.path.join(tmp, "gopath"),
               GO111MODULE="off", GOFLAGS="-buildvcs=false", CGO_ENABLED="0")
    go_bin = os.path.join(tmp, "gohot")
    r = subprocess.run(["go", "build", "-o", go_bin, os.path.join(W, "gohot.go")], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        print(r.stdout)
        go_bin = None
else:
    print("NOTE: no 'go' (Debian golang-go): the Go check is skipped")

# a binary visible only inside a private mount namespace
ns_dir = os.path.join(tmp, "nsmnt")
os.mkdir(ns_dir)
have_unshare = shutil.which("unshare") is not None

DUR = 6
LIFE = "180"  # killed at the end; long enough for a slow, shared machine
procs = {}
procs["sys"] = perfutil.spawn([sys_bin, LIFE])
procs["stripped"] = perfutil.spawn([stripped, LIFE])
procs["jit"] = perfutil.spawn([jit_bin, LIFE])
if go_bin:
    procs["go"] = perfutil.spawn([go_bin, LIFE])
if have_unshare:
    script = "mount -t tmpfs tmpfs %s && cp %s %s/nsbin && exec %s/nsbin %d" % (
        ns_dir, fp_bin, ns_dir, ns_dir, int(LIFE))
    procs["ns"] = perfutil.spawn(["unshare", "-m", "--propagation", "private", "sh", "-c", script])


def late_start():
    # started once sampling runs, exits long before the snapshot
    time.sleep(1)
    procs["late"] = perfutil.spawn([fp_bin, "2"])


try:
    prof = perfutil.profile_until({p.pid for p in procs.values()}, 0, DUR, freq=199, mode="fp",
                                  need_each=40, on_start=late_start)
finally:
    late_exited_before = "late" in procs and procs["late"].poll() is not None
    for p in procs.values():
        pputil.kill(p)

print("counters:", prof.counters)


def frames_of(key):
    return prof.of(procs[key].pid)


def any_frame(key, pred):
    return sum(c for frames, c in frames_of(key) if any(pred(f) for f in frames))


# kernel frames
ksamples = any_frame("sys", lambda f: f.endswith("_[k]"))
total = sum(c for _, c in frames_of("sys"))
print("syscalls: %d of %d samples with kernel frames" % (ksamples, total))
prof.dump(procs["sys"].pid, 3)
check(total > 0 and ksamples >= total * 0.5, "kernel frames with _[k] for the syscall workload")
check(any_frame("sys", lambda f: f in ("do_syscall_64_[k]", "entry_SYSCALL_64_after_hwframe_[k]")) > 0,
      "syscall entry symbolized from kallsyms")
check(any_frame("sys", lambda f: f == "syscall_loop") > 0, "user frames above the kernel part")

# stripped binary
want = "(%s)" % stripped
n = any_frame("stripped", lambda f: f == want)
prof.dump(procs["stripped"].pid, 3)
check(n > 0, "stripped binary yields %s frames (%d samples)" % (want, n))
check(any_frame("stripped", lambda f: f == "hot_a") == 0, "no symbols invented for the stripped binary")

# JIT perf map
n = any_frame("jit", lambda f: f == "LazyCompile:*jitHotLoop app.js:42")
prof.dump(procs["jit"].pid, 3)
check(n > 0, "JIT symbols from /tmp/perf-PID.map (%d samples)" % n)

# mount namespace
if have_unshare:
    check(not os.path.exists(os.path.join(ns_dir, "nsbin")), "namespaced binary invisible on the host")
    n = any_frame("ns", lambda f: f == "hot_a")
    prof.dump(procs["ns"].pid, 3)
    check(n > 0, "binary only visible in a private mount namespace is symbolized (%d samples)" % n)
else:
    print("NOTE: no unshare(1): mount namespace check skipped")

# Go
if go_bin:
    n = any_frame("go", lambda f: f == "main.hotLoop")
    prof.dump(procs["go"].pid, 3)
    check(n > 0, "Go symbols (main.hotLoop: %d samples)" % n)
    meta = prof.header.get("app_metadata", {}).get(str(procs["go"].pid), {})
    print("go metadata:", meta)
    check(str(meta.get("golang_version", "")).startswith("go1."), "Go process tagged with its Go version")

# process that started late and exited mid-session
check(late_exited_before, "late process exited before the snapshot")
late = procs["late"].pid
share, resolved, tot = perfutil.hot_ratio(prof, late)
prof.dump(late, 3)
check(tot > 0 and resolved >= 0.9, "process that exited mid-session keeps symbolized samples (%d, %.0f%% resolved)" % (tot, 100 * resolved))
check("hot_fp" in prof.comms(late), "late process named by its exec comm")
pputil.finish()
