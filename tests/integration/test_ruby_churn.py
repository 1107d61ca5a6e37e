"""The ruby plugin under churn: threads created and joined continuously,
fibers, eval-defined methods, GC.compact moving objects while the agent
reads them. The agent and its worker must survive (no restart), most
samples must be good, the torn ones counted, and the stacks still sane.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import rubyutil as r  # noqa: E402

plugin = r.require_ruby_plugin()
plugins = u.plugin_dir_with(plugin)
out = u.tempdir("ppout-")
churn_rb = os.path.join(r.WORKLOADS, "churn.rb")
p = r.workload("churn.rb")
try:
    time.sleep(0.8)
    # 10 s: GC.compact takes most of the CPU, and churn itself must show
    res = u.run_agent(out, plugins, "--pids", str(p.pid), "-f", "100", duration=10)
    u.check(res.returncode == 0, "agent exits 0 (rc %d: %s)" % (res.returncode, res.stderr[-2000:]))
    u.check(p.poll() is None, "the target is still running (never stopped or harmed)")
    header, stacks = u.parse_col(os.path.join(out, "last_profile.col"))
    stats = header.get("polyprof", {}).get("ruby", {})
    counters = stats.get("counters", {})
    u.check(stats.get("status") == "ok" and stats.get("restarts") == 0,
            "worker healthy, no restart: %s" % {k: stats.get(k) for k in ("status", "restarts")})
    samples, torn = counters.get("samples", 0), counters.get("dropped_inconsistent", 0)
    u.check(samples >= 20, "sampled %d times (>= 20; the box may be loaded)" % samples)
    u.check(torn <= samples // 2, "torn reads counted, fewer than good ones: %d of %d" % (torn, samples))
    mine = r.stacks_with(stacks, churn_rb)
    u.check(sum(c for _, c in mine) >= 20, "stacks carry churn.rb frames")
    bad = [x for f, _ in mine for x in r.ruby_frames(f) if not (r.frame(x) or r.CFUNC_RE.match(x))]
    u.check(not bad, "every frame well formed: %s" % bad[:5])
    u.check(any(x.startswith("churn - %s:3_[rb]" % churn_rb) for f, _ in mine for x in f),
            "churn's frame has its path and line: 'churn - churn.rb:3'")
finally:
    u.kill(p)
u.finish()
