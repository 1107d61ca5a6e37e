"""Ruby stacks merged with perf's: for a Ruby pid, the ruby plugin's stacks
replace perf's native stacks (scaled to perf's count), other pids keep
perf's. Skipped until the perf plugin (branch `perf`) is built next to the
ruby plugin.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import rubyutil as r  # noqa: E402

plugin = r.require_ruby_plugin()
perf = os.path.join(u.PLUGIN_DIR, "perf.so")
if not os.path.exists(perf):
    u.skip("perf plugin not built (%s): it lives on branch 'perf' until merged" % perf)

plugins = u.plugin_dir_with(plugin, perf)
out = u.tempdir("ppout-")
known = r.workload("known.rb")
busy = u.spawn([sys.executable, "-c", "while True: pass"])
try:
    time.sleep(0.8)
    res = u.run_agent(out, plugins, "-f", "50", duration=4)
    u.check(res.returncode == 0, "agent exits 0 (rc %d: %s)" % (res.returncode, res.stderr[-2000:]))
    header, stacks = u.parse_col(os.path.join(out, "last_profile.col"))
    mine = r.stacks_with(stacks, os.path.join(r.WORKLOADS, "known.rb"))
    u.check(sum(c for _, c in mine) > 0, "the Ruby pid has Ruby frames in the merged profile")
    idx = {f[0] for f, _ in mine}
    native_only = [f for f, _ in stacks if f[0] in idx and f[2] == "ruby" and not any("_[rb]" in x for x in f)
                   and not any(x.startswith("[Profiling") for x in f)]
    u.check(not native_only, "perf's native stacks of the Ruby pid are replaced: %s" % native_only[:3])
    others = [f for f, _ in stacks if f[0] not in idx]
    u.check(len(others) > 0, "other processes keep perf's stacks")
finally:
    u.kill(known)
    u.kill(busy)
u.finish()
