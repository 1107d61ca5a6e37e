"""Thread ids through libc's struct pthread, the way Ruby 2.5-3.0 are read.

Ruby keeps no kernel tid of its own before 3.1, only rb_thread_t.thread_id
(the pthread_t); the plugin finds where libc's struct pthread holds the tid
from the main thread (whose tid is the pid) and maps every Ruby thread
through it, so each gets its CPU alarm. Only Ruby 3.1 exists on the test
machines: `--ruby-thread-ids pthread` makes the plugin read 3.1's tids that
way instead of from rb_thread_t.tid, which runs the same code on a real
Ruby. Checks: the attach log names the offset (720 with glibc on x86_64),
both Ruby threads of threads.rb are sampled on CPU alarms (no wall-clock
ticks, which is what the GVL-holder fallback would use), each a fair share,
weighted by the process's CPU time.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import rubyutil as r  # noqa: E402

plugin = r.require_ruby_plugin()
plugins = u.plugin_dir_with(plugin)
threads_rb = os.path.join(r.WORKLOADS, "threads.rb")
libc = os.confstr("CS_GNU_LIBC_VERSION") if "CS_GNU_LIBC_VERSION" in os.confstr_names else ""

proc = r.workload("threads.rb")
try:
    time.sleep(1.0)
    out = u.tempdir("ppout-")
    logdir = u.tempdir("pplog-")
    log = os.path.join(logdir, "agent.log")
    cpu0 = r.cpu_seconds(proc.pid)
    res = u.run_agent(out, plugins, "--pids", str(proc.pid), "-f", "100", "--ruby-thread-ids",
                      "pthread", "--log-file", log, duration=5)
    cpu = r.cpu_seconds(proc.pid) - cpu0
    u.check(res.returncode == 0, "agent exits 0 (got %d; stderr: %s)" % (res.returncode, res.stderr[-2000:]))
    with open(log, encoding="utf-8", errors="replace") as f:
        attach = [line for line in f if "polyprof.ruby: pid %d: Ruby" % proc.pid in line]
    u.check(len(attach) == 1, "one attach line for the target: %s" % attach)
    line = attach[0] if attach else ""
    want = "tids via struct pthread +720" if libc.startswith("glibc") else "tids via struct pthread +"
    u.check(want in line, "the attach line says where the tid was found (%s): %s" % (want, line.strip()))
    u.check("GVL holder" not in line, "every Ruby thread is sampled, not the GVL holder: %s" % line.strip())

    header, stacks = u.parse_col(os.path.join(out, "last_profile.col"))
    c = header.get("polyprof", {}).get("ruby", {}).get("counters", {})
    u.check(c.get("ticks", -1) == 0 and c.get("cpu_periods", 0) > 0,
            "the threads have CPU alarms (they need tids): no ticks, %d periods" % c.get("cpu_periods", 0))
    th = r.stacks_with(stacks, threads_rb)
    alpha = sum(n for f, n in th if any(x.startswith("thread_alpha_work - ") for x in f))
    beta = sum(n for f, n in th if any(x.startswith("thread_beta_work - ") for x in f))
    r.check_cpu_weight("threads.rb", sum(n for _, n in th), cpu, 100)
    u.check(alpha >= 5 and beta >= 5 and min(alpha, beta) >= 0.25 * (alpha + beta),
            "both Ruby threads sampled, each a fair share: alpha %d, beta %d" % (alpha, beta))
finally:
    u.kill(proc)
u.finish()
