"""Bad input to the one-program commands: one clear line on stderr naming
the culprit, exit code 2, nothing written (no --output file, no temporary
file, no program started). The one-program flags given to the agent itself
(no command) are refused the same way, naming the commands they belong to."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cmdutil  # noqa: E402
import pputil  # noqa: E402
from pputil import check  # noqa: E402

if not os.path.exists(pputil.AGENT):
    pputil.skip("agent not built: " + pputil.AGENT)
tmp = pputil.tempdir("ppcmd-bad-")
marker = os.path.join(tmp, "started")
ro = os.path.join(tmp, "ro")
os.mkdir(ro)
os.chmod(ro, 0o555)

# a pid that is gone: one that existed and was reaped
p = subprocess.Popen(["true"])
p.wait()
gone = p.pid

cases = [
    ("unknown command", [pputil.AGENT, "profile-it"], "unknown command 'profile-it'"),
    ("program not found", ["run", "--", "/nonexistent/prog"], "cannot run '/nonexistent/prog'"),
    ("attach a gone pid", ["attach", str(gone)], "no process %d" % gone),
    ("dump a gone pid", ["dump", str(gone)], "no process %d" % gone),
    ("attach not a pid", ["attach", "12ab"], "'12ab' is not a pid"),
    ("dump without pid", ["dump"], "dump needs one PID"),
    ("attach a word", ["attach", "self"], "'self' is not a pid"),
    ("unwritable output", ["run", "--output", "/proc/polyprof-out.txt", "--", "touch", marker], "cannot write --output"),
    ("output in a missing dir", ["run", "--output", os.path.join(tmp, "no", "x"), "--", "touch", marker], "cannot write --output"),
    ("unknown format", ["run", "--format", "bogus", "--", "touch", marker], "--format bogus"),
    ("bad interval", ["run", "-i", "5", "--", "touch", marker], "-i/--interval 5"),
    ("bad sort", ["attach", "1", "--sort", "size"], None),
    # the one-program flags given to the daemon (no command)
    ("daemon --format", [pputil.AGENT, "--format", "table", "-d", "1"], "--format is a flag of run -- CMD, attach"),
    ("daemon --sort", [pputil.AGENT, "-d", "1", "--sort=total"], "--sort is a flag of run -- CMD and attach"),
    ("daemon --limit", [pputil.AGENT, "--limit", "5"], "--limit is a flag of run -- CMD and attach"),
    ("daemon --no-subprocesses", [pputil.AGENT, "--no-subprocesses"], "--no-subprocesses is a flag of run -- CMD,"),
    ("daemon --json", [pputil.AGENT, "--json"], "--json is a flag of dump,"),
    ("daemon -i", [pputil.AGENT, "-i", "1000"], "-i is a flag of run -- CMD, attach and dump"),
    # and to the commands that do not read them
    ("check --format", [pputil.AGENT, "check", "--format", "table"], "--format is a flag of run -- CMD, attach and diff, not of check"),
    ("top --json", [pputil.AGENT, "top", "--json"], "--json is a flag of dump, not of top"),
    ("diff --sort", [pputil.AGENT, "diff", "a.col", "b.col", "--sort", "total"], "--sort is a flag of run -- CMD and attach, not of diff"),
    ("convert --limit", [pputil.AGENT, "convert", "a.col", "--limit", "3"], "--limit is a flag of run -- CMD and attach, not of convert"),
]
for what, args, text in cases:
    if args[0] == pputil.AGENT:
        r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    else:
        r = cmdutil.polyprof(*args, timeout=60)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    print(what, "->", r.returncode, lines)
    check(r.returncode == 2, "%s: exit code 2" % what)
    check(len(lines) == 1 and (text is None or text in lines[0]), "%s: one line naming the culprit" % what)
    check(r.stdout == "", "%s: nothing on stdout" % what)
check(not os.path.exists(marker), "no program was started by a refused command line")
check(os.listdir(ro) == [] and sorted(os.listdir(tmp)) == ["ro"], "nothing half-written")

# not ours: as an ordinary user, a root process (pid 1)
if os.geteuid() == 0:
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", pputil.AGENT, "attach", "1",
                        "--plugin-dir", pputil.PLUGIN_DIR, "--config", cmdutil.EMPTY_CONFIG],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    print(r.returncode, r.stderr)
    check(r.returncode == 2 and "belongs to root, not to you" in r.stderr and len(r.stderr.splitlines()) == 1,
          "attach a pid that is not ours: one line, exit 2")
pputil.finish()
