"""The ruby plugin across exec(): a process is the program it runs now.

Three processes change their program mid-session, keeping their pid:
  * a shell that execs into ruby: attached once it is Ruby (the core
    announces the new image; the target table looks again), its stacks
    are the new program's;
  * a ruby that execs into sleep: its Ruby stacks up to the exec are kept,
    then it is released, and no status is reported for the sleep it became;
  * a ruby that execs into ruby again (the same executable, so nothing in
    /proc tells): the plugin sees the old VM gone and attaches to the new
    one, whose stacks follow.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import rubyutil as r  # noqa: E402

plugin = r.require_ruby_plugin()
plugins = u.plugin_dir_with(plugin)
W = r.WORKLOADS
known_rb, split_rb = os.path.join(W, "known.rb"), os.path.join(W, "split.rb")

SPIN_THEN_EXEC = """
def %(name)s
  t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  x = 0
  x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) - t < %(secs)s
  x
end
%(name)s
exec(*%(argv)r)
"""

shell = u.spawn(["sh", "-c", 'sleep 1.5; exec "$0" "$1"', r.RUBY, known_rb])
to_sleep = u.spawn([r.RUBY, "-e", SPIN_THEN_EXEC % {"name": "before_sleep", "secs": 2.5,
                                                    "argv": ["sleep", "60"]}])
to_ruby = u.spawn([r.RUBY, "-e", SPIN_THEN_EXEC % {"name": "first_image", "secs": 2.5,
                                                   "argv": [r.RUBY, split_rb]}])
procs = [shell, to_sleep, to_ruby]
try:
    time.sleep(0.5)
    out = u.tempdir("ppout-")
    pids = ",".join(str(p.pid) for p in procs)
    res = u.run_agent(out, plugins, "--pids", pids, "-f", "100", duration=8)
    u.check(res.returncode == 0, "agent exits 0 (got %d; stderr: %s)" % (res.returncode, res.stderr[-2000:]))
    header, stacks = u.parse_col(os.path.join(out, "last_profile.col"))

    def samples(fn):
        return sum(c for f, c in stacks if any(fn(x) for x in f))

    known = sum(c for _, c in r.stacks_with(stacks, known_rb))
    u.check(known >= 20, "the shell that became ruby known.rb is profiled: %d samples" % known)
    before = samples(lambda x: x.startswith("before_sleep - "))
    u.check(before >= 10, "the ruby that became sleep: its Ruby stacks before the exec: %d" % before)
    first = samples(lambda x: x.startswith("first_image - "))
    u.check(first >= 10, "the ruby that became ruby: the first image's stacks: %d" % first)
    split = sum(c for _, c in r.stacks_with(stacks, split_rb))
    u.check(split >= 20, "...and the new image's (split.rb), attached again: %d samples" % split)
    statuses = [f for f, _ in stacks if any(x.startswith("[Profiling") for x in f)]
    u.check(statuses == [], "no status: each process was profiled or is no Ruby now: %s" % statuses)
finally:
    for p in procs:
        u.kill(p)
u.finish()
