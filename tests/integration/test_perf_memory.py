"""perf plugin, real perf_event sampling: memory stays bounded on a host
with 2,000 active processes.

2,000 processes, each running its own copy of a small binary (2,000
distinct files to symbolize, plus the shared libc), wake up every 250 ms.
The plugin samples them with a small symbol cache (perf.symbol_cache_mb=4)
over several sessions; its peak RSS must stay far below the agent's
per-plugin memory cap (plugins.memory_limit_mb, 256 MiB) and evictions must
show the cache bound at work, without losing symbols.

The binaries carry a symbol table of realistic size (PAD_FUNCS extra
functions): a bare blip has ten symbols, so even 2,000 of them fit in 4 MiB
and no eviction would ever happen. The plugin keeps 16 bytes per symbol in
memory and, for up to 512 files, reads the names from the file it keeps
open, so the size counted here is that lower bound, 16 bytes a symbol: the
N/8 processes the test requires to be sampled hold more than twice the
budget even then, so evictions are certain.
"""
import os
import resource
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perfutil  # noqa: E402
import pputil  # noqa: E402
from pputil import check  # noqa: E402

perfutil.require_perf()
N = int(os.environ.get("PP_PERF_PROCS", "2000"))
soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
if hard != resource.RLIM_INFINITY and hard < N + 200:
    pputil.skip("RLIMIT_NPROC %d is below %d processes" % (hard, N))
tmp = pputil.tempdir("ppperf-mem-")
BUDGET = 4 << 20  # perf.symbol_cache_mb=4
PAD_FUNCS = 2400
PAD_NAME = "pad_%04d"
# what the plugin keeps per function symbol at least (names left in the file)
pad_bytes = PAD_FUNCS * 16
pad_src = os.path.join(tmp, "pad.c")
with open(pad_src, "w") as f:
    for i in range(PAD_FUNCS):  # global: the compiler keeps them
        f.write("int %s(int x) { return x + %d; }\n" % (PAD_NAME % i, i))
blip = perfutil.build_c("blip", tmp, "-O1", "-fno-omit-frame-pointer", pad_src,
                        src=os.path.join(perfutil.WORKLOADS, "blip.c"))
bins = []
for i in range(N):
    b = os.path.join(tmp, "blip%04d" % i)
    shutil.copy(blip, b)  # a distinct inode each: 2,000 objects to load
    bins.append(b)
pids_list = []
pgid = 0
try:
    # posix_spawn in one process group: fast to start, one signal to stop.
    # The blips run at nice 10 (inherited) so the sampler and this script
    # stay ahead of 2,000 of them.
    os.setpriority(os.PRIO_PROCESS, 0, 10)
    for b in bins:
        pid = os.posix_spawn(b, [b, "300"], os.environ, setpgroup=pgid)
        if not pgid:
            pgid = pid
        pids_list.append(pid)
    os.setpriority(os.PRIO_PROCESS, 0, -19)
    time.sleep(1)
    prof = perfutil.profile(4, freq=99, mode="fp", sessions=3, opts=["symbol_cache_mb=4"])
finally:
    if pgid:
        os.killpg(pgid, signal.SIGKILL)
    for pid in pids_list:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass

h = prof.header
rss_mb = h.get("max_rss_kb", 0) / 1024.0
pids = set(pids_list)
seen = {pid for pid, _, _, _ in prof.stacks if pid in pids}
resolved = sum(c for pid, _, frames, c in prof.stacks if pid in pids and "blip_work" in frames)
total = sum(c for pid, _, frames, c in prof.stacks if pid in pids)
print("processes: %d, sampled: %d, samples: %d (%d in blip_work), peak RSS %.1f MiB, cpu %.2f s"
      % (N, len(seen), total, resolved, rss_mb, h.get("cpu_s", 0)))
print("counters:", prof.counters)
check(len(seen) >= N // 8, "many of the %d processes were sampled (%d)" % (N, len(seen)))
print("symbols of the sampled binaries: ~%.1f MiB (%d x %.1f KiB) against a %d MiB budget"
      % (len(seen) * pad_bytes / 1048576.0, len(seen), pad_bytes / 1024.0, BUDGET >> 20))
check(len(seen) * pad_bytes > 2 * BUDGET,
      "precondition: the sampled binaries' symbols exceed twice the cache budget")
own = sum(c for pid, _, frames, c in prof.stacks if pid in pids
          for f in frames if f.startswith("(" + tmp))
print("frames left unsymbolized in the blip binaries: %d" % own)
check(resolved > 0 and own <= total * 0.02,
      "symbols still resolved with the small cache (%d in blip_work, %d unresolved)" % (resolved, own))
check(rss_mb < 128, "plugin peak RSS %.1f MiB stays bounded (< 128 MiB; agent cap 256 MiB)" % rss_mb)
check(prof.counters.get("symbol_evictions", 0) > 0, "the symbol cache budget was enforced (evictions)")
pputil.finish()
