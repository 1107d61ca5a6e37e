"""polyprof run -- CMD on real programs: the known 3:1 split of Python,
Ruby, PHP, Java, Node.js and a native C program (perf's symbols) printed as
a table (parsed back), children followed (a program started through
`timeout`, perf's samples of it included), --no-subprocesses, the program's exit status kept, --format
collapsed plain, --output replaced whole, Ctrl-C still prints, SIGTERM,
SIGHUP, SIGQUIT and a SIGINT sent to polyprof alone passed on to the program
(a Ctrl-C on its terminal not doubled), and a run as an unprivileged
user on its own program."""
import fcntl
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import termios
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cmdutil  # noqa: E402
import pputil  # noqa: E402
from pputil import check  # noqa: E402

if not os.path.exists(pputil.AGENT):
    pputil.skip("agent not built: " + pputil.AGENT)
PY = os.path.join(cmdutil.WORKLOADS, "python", "workload.py")

# python: the split, through the table; exit status of the program kept
r = cmdutil.polyprof("run", "--", sys.executable, "-c",
                     "import runpy,sys; sys.argv=[%r,'split','4']; runpy.run_path(%r, run_name='__main__'); sys.exit(3)" % (PY, PY))
print(r.stdout[-1500:], r.stderr[-800:])
check(r.returncode == 3, "run keeps the program's exit status (3, got %d)" % r.returncode)
rows = cmdutil.parse_table(r.stdout)
check(any(x["runtime"] == "python" and x["where"].startswith(PY + ":") for x in rows), "table rows name file:line and the runtime")
cmdutil.check_split(rows, "three_parts", "one_part", "python")
check("hot spots:" in r.stdout and "work" in r.stdout.split("hot spots:")[1], "hot-spot summary names work()")
check("Hz requested; achieved:" in r.stderr and "missed samples:" in r.stderr, "achieved rate and missed samples printed")

# ruby through `timeout`: a child, followed by default; its status 124 kept
if shutil.which("ruby"):
    r = cmdutil.polyprof("run", "-i", "2000", "--", "timeout", "4", "ruby", os.path.join(cmdutil.WORKLOADS, "ruby", "split.rb"))
    print(r.stdout[-1200:], r.stderr[-600:])
    check(r.returncode == 124, "run: timeout's status 124 kept (got %d)" % r.returncode)
    cmdutil.check_split(cmdutil.parse_table(r.stdout), "heavy_three", "light_one", "ruby (a child of timeout)")
    r = cmdutil.polyprof("run", "--no-subprocesses", "--", "timeout", "2", "ruby", os.path.join(cmdutil.WORKLOADS, "ruby", "split.rb"))
    check("heavy_three" not in r.stdout, "--no-subprocesses: the child's ruby frames are left out")
else:
    check(False, "ruby installed")

# php: the script ends by itself
if shutil.which("php"):
    r = cmdutil.polyprof("run", "--", "php", os.path.join(cmdutil.WORKLOADS, "php", "busy.php"), "4")
    print(r.stdout[-1200:], r.stderr[-600:])
    check(r.returncode == 0, "php run exits 0")
    cmdutil.check_split(cmdutil.parse_table(r.stdout), "heavy_a", "light_b", "php")
else:
    check(False, "php installed")

# java: the JVM's threads (JIT-compiled frames have no file: matched by name)
if shutil.which("java") and shutil.which("javac"):
    sys.path.insert(0, os.path.join(cmdutil.WORKLOADS, "java"))
    import javawork  # noqa: E402
    classes = javawork.compile_workloads(pputil.tempdir("ppcmd-java-"))
    r = cmdutil.polyprof("run", "--", "java", "-cp", classes, "HotCold", "6", "1")
    print(r.stdout[-1000:], r.stderr[-600:])
    rows = [dict(x, function=x["function"].split("(")[0]) for x in cmdutil.parse_table(r.stdout)]
    check(r.returncode == 0, "java run exits 0")
    cmdutil.check_split(rows, "HotCold.hotWork", "HotCold.coldWork", "java", key="self")
else:
    check(False, "java and javac installed")

# node through timeout. Once V8 optimizes round() it may inline heavyPath
# into it (or round into main) without frames of their own: a stack under
# round or main without lightPath is heavy (lightPath resumes from a
# microtask, under neither), as in the nodejs plugin's own tests.
if shutil.which("node"):
    r = cmdutil.polyprof("run", "--format", "collapsed", "--", "timeout", "5", "node",
                         os.path.join(cmdutil.WORKLOADS, "nodejs", "split.js"))
    print(r.stdout[-1000:], r.stderr[-600:])
    heavy = light = 0
    for ln in r.stdout.splitlines():
        stack, _, n = ln.rpartition(" ")
        names = [f.split(" (")[0] for f in stack.split(";")]
        if "lightPath" in names:
            light += int(n)
        elif "heavyPath" in names or "round" in names or "main" in names:
            heavy += int(n)
    share = 100.0 * heavy / (heavy + light) if heavy + light else 0
    print("node: heavy %d light %d: %.1f%%" % (heavy, light, share))
    check(abs(share - 75) <= 5, "node (a child of timeout): heavyPath:lightPath is 3:1 within 5 points (%.1f%%)" % share)
else:
    check(False, "node installed")

# collapsed, plain, into a file replaced whole
out = os.path.join(pputil.tempdir("ppcmd-run-"), "stacks.txt")
with open(out, "w") as f:
    f.write("old\n")
r = cmdutil.polyprof("run", "--format", "collapsed", "--output", out, "--", sys.executable, PY, "split", "3")
text = open(out).read()
print(r.stderr[-600:], text[:300])
lines = [x for x in text.splitlines() if x]
check(r.returncode == 0 and "three_parts" not in r.stdout, "collapsed --output: no stacks on stdout")
check(lines and all(x.rsplit(" ", 1)[1].isdigit() for x in lines), "collapsed: 'frames count' lines only")
check(lines and not any(x.startswith(("0;", "1;")) or "appid:" in x for x in lines), "collapsed: no index, container or appid prefix")
check(any(";three_parts (" in x and x.startswith("python") for x in lines), "collapsed: comm first, then the python frames")
check(not [n for n in os.listdir(os.path.dirname(out)) if ".tmp-" in n], "no temporary file left beside --output")

# a native program (no runtime): perf's symbols, file = the binary
hot = os.path.join(pputil.tempdir("ppcmd-native-"), "hot")
subprocess.run(["cc", "-g", "-O1", "-fno-omit-frame-pointer", "-o", hot,
                os.path.join(pputil.SRC, "tests", "workloads", "perf", "hot.c")], check=True)
r = cmdutil.polyprof("run", "--", hot, "3")
print(r.stdout[-1200:], r.stderr[-400:])
rows = cmdutil.parse_table(r.stdout)
check(r.returncode == 0 and any(x["function"] == "main" and x["where"] == hot and x["runtime"] == "native" for x in rows),
      "native program: main, in the binary, [native]")
cmdutil.check_split(rows, "hot_a", "hot_b", "native (perf)", key="self")


def perf_samples(stderr):
    m = re.search(r" perf (\d+) samples = ", stderr)
    return int(m.group(1)) if m else 0


# through `timeout` the program is polyprof's grandchild, started before perf
# looks or just after: perf keeps its samples all the same (native and the
# native side of Python), but not with --no-subprocesses
r = cmdutil.polyprof("run", "--", "timeout", "3", hot, "10")
print(r.stdout[-600:], r.stderr[-400:])
rows = cmdutil.parse_table(r.stdout)
mine = sum(x["self"] for x in rows if x["function"] in ("hot_a", "hot_b") and x["where"] == hot)
check(r.returncode == 124 and mine >= 0.5 * perf_samples(r.stderr) and mine >= 300,
      "timeout 3 native: perf's samples are the grandchild's (hot_a + hot_b %d of %d)"
      % (mine, perf_samples(r.stderr)))
cmdutil.check_split(rows, "hot_a", "hot_b", "native under timeout (perf)", key="self")
r = cmdutil.polyprof("run", "--", "timeout", "3", sys.executable, "-c", "while 1: pass")
print(r.stdout[-400:], r.stderr[-400:])
check(r.returncode == 124 and perf_samples(r.stderr) >= 300,
      "timeout 3 python: perf samples the grandchild too (%d)" % perf_samples(r.stderr))
r = cmdutil.polyprof("run", "--no-subprocesses", "--", "timeout", "2", hot, "10")
print(r.stderr[-300:])
check(r.returncode == 124 and not any(x["function"] == "hot_a" for x in cmdutil.parse_table(r.stdout)),
      "--no-subprocesses: timeout's child is not sampled")

# -d shorter than the program: the table when -d runs out, then the program's status
t0 = time.time()
r = cmdutil.polyprof("run", "-d", "1", "--", "sh", "-c", "sleep 2; exit 5")
check(r.returncode == 5 and "function (file:line)" in r.stdout and time.time() - t0 >= 2,
      "-d 1 on a 2 s program: printed, then its status 5 once it ended")

# Ctrl-C: profiling stops, the table is still printed
p = subprocess.Popen([pputil.AGENT, "run", "--plugin-dir", pputil.PLUGIN_DIR, "--config", cmdutil.EMPTY_CONFIG,
                      "--", sys.executable, PY, "split", "30"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
time.sleep(3)
os.killpg(p.pid, signal.SIGINT)  # the terminal's Ctrl-C goes to the whole group
o, e = p.communicate(timeout=60)
check(cmdutil.parse_table(o) != [] and "three_parts" in o, "Ctrl-C: the table is still printed")
check(p.returncode in (130, 1), "Ctrl-C: the program's status (killed by SIGINT: 130 or python's 1), got %d" % p.returncode)

# SIGTERM, SIGHUP and SIGQUIT to polyprof alone: passed on to the program, which
# dies of it (128 + N kept), and the profile is still printed
for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
    p = subprocess.Popen([pputil.AGENT, "run", "--plugin-dir", pputil.PLUGIN_DIR, "--config", cmdutil.EMPTY_CONFIG,
                          "--", sys.executable, PY, "split", "30"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))
    time.sleep(3)
    p.send_signal(sig)
    o, e = p.communicate(timeout=60)
    print(sig.name, p.returncode, e[-300:])
    check(p.returncode == 128 + sig, "%s: forwarded, the program's death by it kept (%d, got %d)" % (sig.name, 128 + sig, p.returncode))
    check("three_parts" in o, "%s: the table is still printed" % sig.name)

# SIGINT: to polyprof alone (kill) it is passed on; from the terminal
# (Ctrl-C on the program's tty) the program already has its own and gets no
# second one. Either way profiling stops and the table is printed. The
# program counts the SIGINTs it got and exits with 10 + that count.
COUNTER = ("import signal,sys,time\nn=[0]\ndef h(*a): n[0]+=1\nsignal.signal(signal.SIGINT,h)\n"
           "t=time.time()\nwhile not n[0] and time.time()-t<30: pass\ntime.sleep(0.7)\nsys.exit(10+n[0])")
run_counter = [pputil.AGENT, "run", "--plugin-dir", pputil.PLUGIN_DIR, "--config", cmdutil.EMPTY_CONFIG,
               "--", sys.executable, "-c", COUNTER]
p = subprocess.Popen(run_counter, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
time.sleep(2.5)
p.send_signal(signal.SIGINT)
o, e = p.communicate(timeout=60)
print("SIGINT alone", p.returncode, o[-300:], e[-300:])
check(p.returncode == 11, "SIGINT to polyprof alone: passed on once (status 11, got %d)" % p.returncode)
check("<module>" in o and "Hz requested" in e, "SIGINT to polyprof alone: the table is still printed")


def on_tty():
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


master, slave = os.openpty()
p = subprocess.Popen(run_counter, stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                     preexec_fn=on_tty)
os.close(slave)
time.sleep(2.5)
os.write(master, b"\x03")  # the terminal's Ctrl-C: SIGINT to its foreground group, from the kernel
o, e = p.communicate(timeout=60)
os.close(master)
print("Ctrl-C on a tty", p.returncode, o[-300:], e[-300:])
check(p.returncode == 11, "Ctrl-C on the tty: the program got one SIGINT, not two (status 11, got %d)" % p.returncode)
check("<module>" in o, "Ctrl-C on the tty: the table is still printed")

# SIGTERM as soon as the program has started, while the plugins still load:
# passed on all the same
marker = os.path.join(pputil.tempdir("ppcmd-early-"), "started")
p = subprocess.Popen([pputil.AGENT, "run", "--plugin-dir", pputil.PLUGIN_DIR, "--config", cmdutil.EMPTY_CONFIG,
                      "--", "sh", "-c", "touch %s; exec sleep 30" % marker], stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, text=True)
t0 = time.time()
while not os.path.exists(marker) and time.time() - t0 < 20:
    time.sleep(0.005)
p.send_signal(signal.SIGTERM)
o, e = p.communicate(timeout=60)
check(p.returncode == 143 and time.time() - t0 < 20,
      "SIGTERM during start-up: the program got it, its status 143 kept (got %d)" % p.returncode)

# an unprivileged user on its own program
if shutil.which("setpriv") and os.path.exists("/usr/bin/python3"):
    plugins = pputil.plugin_dir_with(*[os.path.join(pputil.PLUGIN_DIR, n) for n in os.listdir(pputil.PLUGIN_DIR)])
    cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all",
           pputil.AGENT, "run", "--plugin-dir", plugins, "--config", cmdutil.EMPTY_CONFIG,
           "--", "/usr/bin/python3", PY, "split", "4"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120,
                       env=dict(os.environ, HOME="/tmp", TMPDIR="/tmp"))
    print(r.stdout[-1200:], r.stderr[-800:])
    check(r.returncode == 0, "rootless run exits 0 (got %d)" % r.returncode)
    cmdutil.check_split(cmdutil.parse_table(r.stdout), "three_parts", "one_part", "rootless python")
else:
    check(False, "setpriv and /usr/bin/python3 present")
pputil.finish()
