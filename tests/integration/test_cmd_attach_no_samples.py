"""polyprof attach: a session that samples nothing of a busy program says
why on its closing line, plugin by plugin, instead of "achieved:" alone.

A shell spinning in a loop (busy, no runtime) attached with a plugin
directory holding only the python plugin: the closing line must read
  python 0 samples (matched no process of the program)
and the same program attached with every plugin (perf samples it) must
not list the runtime plugins that matched nothing.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import cmdutil  # noqa: E402
import pputil as u  # noqa: E402

PYTHON = os.path.join(u.PLUGIN_DIR, "python.so")
if not os.path.exists(PYTHON):
    u.skip("python plugin not built: " + PYTHON)


def closing_line(stderr):
    lines = [l for l in stderr.splitlines() if l.startswith("polyprof: ") and "requested" in l]
    return lines[-1] if lines else ""


busy = u.spawn(["sh", "-c", "while :; do :; done"])
try:
    only_python = u.plugin_dir_with(PYTHON)
    out = u.tempdir("ppnosamp-")
    r = subprocess.run([u.AGENT, "attach", str(busy.pid), "-d", "2", "--plugin-dir", only_python,
                        "--config", cmdutil.EMPTY_CONFIG, "-o", out],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    line = closing_line(r.stderr)
    u.check(r.returncode == 0, "attach ran (rc %d: %s)" % (r.returncode, r.stderr[-300:]))
    u.check("python 0 samples (matched no process of the program)" in line,
            "no sample: the closing line names why (%s)" % line)
    r = cmdutil.polyprof("attach", str(busy.pid), "-d", "2", "-o", u.tempdir("ppnosamp-"))
    line = closing_line(r.stderr)
    u.check(r.returncode == 0 and "perf " in line and "samples = " in line,
            "with perf: the program sampled (%s)" % line)
    u.check("matched no process" not in line,
            "with samples: runtime plugins that matched nothing are not listed (%s)" % line)
finally:
    u.kill(busy)
u.finish()
