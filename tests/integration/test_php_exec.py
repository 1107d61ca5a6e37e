"""The php plugin across exec: same pid and start time, a new program.

Two processes, handed by pid in one session:

  into   a shell that execs php busy.php after 2 s: not PHP when the
         session starts (the core does not hand it over), PHP once the
         core's /proc scan sees the new image: its stacks must appear.
  out    php spinning in exec_out_spin() for 2 s, then pcntl_exec()ing
         sleep: its PHP stacks from before the exec are kept (under the
         comm it had then), and the process it became is let go without
         a "[Profiling ...]" status.
  again  php spinning in before_exec_spin(), then pcntl_exec()ing php
         itself on other code (after_exec_spin): the same file, so only
         the plugin can tell (executor_globals moved with the new
         image's addresses): both functions must show up.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import phputil as pu  # noqa: E402

php = pu.require_php()
plugins = u.plugin_dir_with(pu.PHP_SO)
busy_php = os.path.join(pu.WORKLOADS, "busy.php")
sleep = "/usr/bin/sleep" if os.path.exists("/usr/bin/sleep") else "/bin/sleep"
if os.popen("%s -m" % php).read().find("pcntl") < 0:
    u.skip("php without pcntl (pcntl_exec)")
OUT_CODE = ('function exec_out_spin() { $x = 0; for ($i = 0; $i < 100000; $i++) { $x += $i %% 7; } return $x; }'
            '$t = microtime(true) + 2.5; while (microtime(true) < $t) { exec_out_spin(); }'
            'pcntl_exec("%s", ["60"]);' % sleep)

AGAIN_CODE = ('function before_exec_spin() { $x = 0; for ($i = 0; $i < 100000; $i++) { $x += $i %% 7; } return $x; }'
              '$t = microtime(true) + 2.5; while (microtime(true) < $t) { before_exec_spin(); }'
              'pcntl_exec(PHP_BINARY, ["-r", %r]);' %
              'function after_exec_spin() { $x = 0; for ($i = 0; $i < 100000; $i++) { $x += $i % 7; } return $x; }'
              ' while (true) { after_exec_spin(); }')

into = u.spawn(["sh", "-c", 'sleep 2; exec "$0" "$1" 60', php, busy_php])
out_p = u.spawn([php, "-r", OUT_CODE])
again = u.spawn([php, "-r", AGAIN_CODE])
try:
    time.sleep(0.5)
    out = u.tempdir("ppout-")
    r, log = pu.run_agent_logged(out, plugins, "--php-mode", "phpspy", "--pids", "%d,%d,%d" % (into.pid, out_p.pid, again.pid),
                                 "-f", "50", duration=8)
    u.check(r.returncode == 0, "agent exits 0 (got %d; stderr: %s)" % (r.returncode, r.stderr[-1500:]))
    with open("/proc/%d/comm" % out_p.pid) as f:
        u.check(f.read().strip() == "sleep", "the 'out' process exec'd into sleep during the session")
    _, stacks = u.parse_col(os.path.join(out, "last_profile.col"))
    ps = pu.php_stacks(stacks)
    into_n = sum(c for f, c in ps if any(x.startswith("heavy_a %s:" % busy_php) for x in f))
    out_n = sum(c for f, c in ps if any(x.startswith("exec_out_spin ") for x in f))
    u.check(into_n > 0, "the shell that exec'd php is profiled after its exec (%d samples in heavy_a)" % into_n)
    u.check(out_n > 0, "php is profiled before it exec'd into sleep (%d samples in exec_out_spin)" % out_n)
    before = sum(c for f, c in ps if any(x.startswith("before_exec_spin ") for x in f))
    after = sum(c for f, c in ps if any(x.startswith("after_exec_spin ") for x in f))
    u.check(before > 0 and after > 0, "php exec'ing php is profiled before (%d) and after (%d) its exec" %
            (before, after))
    out_comms = {f[2] for f, _ in ps if any(x.startswith("exec_out_spin ") for x in f)}
    u.check(out_comms <= {"php", os.path.basename(os.path.realpath(php))},
            "its stacks keep the comm it had when sampled: %s" % out_comms)
    status = [x for f, _ in stacks for x in f if x.startswith("[Profiling")]
    u.check(not status, "no process has a profiling status (sleep is not PHP, nothing failed): %s" % status[:3])
finally:
    u.kill(into)
    u.kill(out_p)
    u.kill(again)
u.finish()
