"""The ruby plugin around its targets' lives and its switches:
  * a target exiting mid-session: its samples up to the exit are kept, the
    exit is counted, the agent and the other target carry on;
  * a process named ruby* that is no Ruby: [Profiling error: Couldn't get
    ruby version ...] instead of stacks;
  * a server that rewrote its title (puma style) gets a puma appid and the
    ruby_version metadata;
  * --no-ruby and --ruby-mode disabled turn the plugin off.
"""
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import rubyutil as r  # noqa: E402

plugin = r.require_ruby_plugin()
plugins = u.plugin_dir_with(plugin)
W = r.WORKLOADS
exits_rb = os.path.join(W, "exits.rb")
known_rb = os.path.join(W, "known.rb")
server_rb = os.path.join(W, "server_title.rb")

fake_dir = u.tempdir("ppfake-")
fake = os.path.join(fake_dir, "ruby-fake")
shutil.copy("/bin/sleep", fake)

# ---- session 1: exit mid-session, a fake ruby, a puma-titled server ----
out = u.tempdir("ppout-")
known = r.workload("known.rb")
server = r.workload("server_title.rb")
notruby = u.spawn([fake, "300"])
time.sleep(0.8)
exits = r.workload("exits.rb", 2.5)
try:
    time.sleep(0.3)
    pids = "%d,%d,%d,%d" % (known.pid, server.pid, notruby.pid, exits.pid)
    res = u.run_agent(out, plugins, "--pids", pids, "-f", "100", "--ruby-attach-retries", "3",
                      duration=6)
    u.check(res.returncode == 0, "agent exits 0 (got %d; stderr: %s)" % (res.returncode, res.stderr[-2000:]))
    u.check(exits.poll() is not None, "exits.rb ended during the session (rc %s)" % exits.poll())
    header, stacks = u.parse_col(os.path.join(out, "last_profile.col"))
    gone = sum(c for f, c in r.stacks_with(stacks, exits_rb)
               if any(x.startswith("short_lived_work - ") for x in f))
    # under load the short-lived target may run only a little: any sample
    # of it proves the samples taken before the exit were kept
    u.check(gone >= 1, "samples of the exited target up to its exit are kept: %d" % gone)
    alive = sum(c for _, c in r.stacks_with(stacks, known_rb))
    u.check(alive >= 50, "the other target is sampled through the whole session: %d" % alive)
    counters = header.get("polyprof", {}).get("ruby", {}).get("counters", {})
    u.check(counters.get("exited_targets", 0) >= 1, "the exit is counted: %s" % counters)

    err = [f for f, _ in stacks if f[2] == "ruby-fake"]
    u.check(len(err) == 1 and len(err[0]) == 4 and
            err[0][3].startswith("[Profiling error: Couldn't get ruby version") and
            "ruby_version" in err[0][3],
            "a ruby* process without Ruby: [Profiling error: Couldn't get ruby version...]: %s" % err)

    srv = r.stacks_with(stacks, server_rb)
    appids = {x for f, _ in srv for x in f if x.startswith("appid: ")}
    cwd = os.getcwd()
    u.check(appids == {"appid: puma: shopfront (%s)" % cwd},
            "puma-titled server gets appid 'puma: shopfront (<cwd>)': %s" % appids)
    u.check(any(x.startswith("handle_request - %s:" % server_rb) for f, _ in srv for x in f),
            "the server's Ruby frames are there")
    idx = {int(f[0]) for f, _ in srv}
    metas = [header["application_metadata"][i] for i in idx]
    u.check(metas and all(m.get("ruby_version") == r.ruby_version() for m in metas),
            "server metadata has ruby_version: %s" % metas)
finally:
    for p in (known, server, notruby, exits):
        u.kill(p)

# ---- sessions 2 and 3: the plugin switched off (a test plugin keeps the
# agent from refusing to run with no plugin at all) ----
other = os.path.join(u.TEST_PLUGIN_DIR, "tp_ok.so")
if not os.path.exists(other):
    u.skip("test plugin not built: " + other)
both = u.plugin_dir_with(plugin, other)
for flag in (["--no-ruby"], ["--ruby-mode", "disabled"]):
    out = u.tempdir("ppout-")
    known = r.workload("known.rb")
    try:
        time.sleep(0.5)
        res = u.run_agent(out, both, "--pids", str(known.pid), *flag, duration=2)
        u.check(res.returncode == 0, "%s: agent exits 0 (rc %d: %s)" % (" ".join(flag), res.returncode, res.stderr[-1500:]))
        col = os.path.join(out, "last_profile.col")
        text = open(col, encoding="utf-8").read() if os.path.exists(col) else ""
        u.check("_[rb]" not in text, "%s: no Ruby frames in the profile" % " ".join(flag))
        u.check("ruby: disabled" in res.stderr, "%s: the log says ruby is disabled" % " ".join(flag))
    finally:
        u.kill(known)
u.finish()
