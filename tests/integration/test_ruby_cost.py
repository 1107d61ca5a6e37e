"""What the ruby plugin costs when its targets sleep, and its two clocks.

  * default (oncpu): every Ruby thread has a CPU-time alarm; the sampler
    wakes only when a thread used 10 ms of CPU (at 100 Hz). Three sleeping
    Ruby processes next to a busy one: no wall-clock ticks at all, no more
    wake-ups than CPU periods (plus a few for new targets), no sample of a
    sleeper, the busy one sampled per its CPU time, and most samples read
    in one system call;
  * oncpu: false (config): every thread on wall-clock ticks, sleepers
    included, as rbspy without --on-cpu.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import rubyutil as r  # noqa: E402

plugin = r.require_ruby_plugin()
plugins = u.plugin_dir_with(plugin)
known_rb = os.path.join(r.WORKLOADS, "known.rb")
SLEEPER = "def idle_sleeper; sleep; end; idle_sleeper"

sleepers = [u.spawn([r.RUBY, "-e", SLEEPER]) for _ in range(3)]
busy = r.workload("known.rb")
try:
    time.sleep(1.0)
    pids = ",".join(str(p.pid) for p in sleepers + [busy])

    # ---- default: CPU alarms ----
    out = u.tempdir("ppout-")
    cpu0 = r.cpu_seconds(busy.pid)
    res = u.run_agent(out, plugins, "--pids", pids, "-f", "100", duration=5)
    cpu = r.cpu_seconds(busy.pid) - cpu0
    u.check(res.returncode == 0, "agent exits 0 (got %d; stderr: %s)" % (res.returncode, res.stderr[-2000:]))
    header, stacks = u.parse_col(os.path.join(out, "last_profile.col"))
    c = header.get("polyprof", {}).get("ruby", {}).get("counters", {})
    u.check(c.get("ticks", -1) == 0, "no wall-clock ticks when every target has CPU alarms: %s" % c)
    u.check(0 < c.get("wakeups", 0) <= c.get("cpu_periods", 0) + 10,
            "the sampler wakes for CPU periods only: %d wake-ups, %d periods"
            % (c.get("wakeups", 0), c.get("cpu_periods", 0)))
    slept = sum(n for f, n in stacks if any(x.startswith("idle_sleeper - ") for x in f))
    u.check(slept == 0, "sleeping Ruby processes are never sampled: %d samples" % slept)
    known = sum(n for _, n in r.stacks_with(stacks, known_rb))
    r.check_cpu_weight("known.rb", known, cpu, 100)
    u.check(c.get("one_read_samples", 0) >= 0.8 * c.get("samples", 0) > 0,
            "most samples are one process_vm_readv: %d of %d"
            % (c.get("one_read_samples", 0), c.get("samples", 0)))

    # ---- oncpu: false: every thread on wall-clock ticks ----
    out2 = u.tempdir("ppout-")
    cfg = os.path.join(out2, "wall.yaml")
    with open(cfg, "w") as f:
        f.write("ruby:\n  oncpu: false\n")
    res = u.run_agent(out2, plugins, "--config", cfg, "--pids", pids, "-f", "100", duration=3)
    u.check(res.returncode == 0, "agent exits 0 with oncpu: false (got %d; stderr: %s)"
            % (res.returncode, res.stderr[-2000:]))
    header, stacks = u.parse_col(os.path.join(out2, "last_profile.col"))
    c = header.get("polyprof", {}).get("ruby", {}).get("counters", {})
    u.check(c.get("ticks", 0) > 0 and c.get("cpu_periods", -1) == 0,
            "oncpu: false samples on wall-clock ticks, no alarms: %s" % c)
    slept = [(f, n) for f, n in stacks if any(x.startswith("idle_sleeper - ") for x in f)]
    u.check(sum(n for _, n in slept) >= 30,
            "sleeping threads are sampled on wall-clock ticks: %d" % sum(n for _, n in slept))
    u.check(all(r.ruby_frames(f)[-1] == "sleep [c function] - (unknown):0" for f, _ in slept),
            "a sleeper's leaf is Kernel#sleep: %s" % {r.ruby_frames(f)[-1] for f, _ in slept})
finally:
    for p in sleepers + [busy]:
        u.kill(p)
u.finish()
