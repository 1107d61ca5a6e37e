#!/usr/bin/env python3
"""java plugin safety: a process that maps a file named libjvm.so and calls
itself java (but is no JVM) is never signalled; a JVM with -Xrs is skipped
and keeps running; a JVM that exits mid-session is handled; a JVM in its
own mount + pid namespace (a container without the container runtime) is
profiled through /proc/<pid>/root."""
import ctypes
import ctypes.util  # noqa: F401
import glob
import os
import tempfile
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "workloads", "java"))
import pputil  # noqa: E402
import javawork  # noqa: E402

if os.geteuid() != 0:
    pputil.skip("needs root (attach as the JVM's user, SIGQUIT)")
if not javawork.find_jdk():
    pputil.skip("no JDK (java/javac) installed")

work = pputil.tempdir("ppjava-safe-")
os.chmod(work, 0o755)
# outside /tmp: the namespaced JVM below gets a private /tmp
classes = javawork.compile_workloads(tempfile.mkdtemp(prefix="ppjava-classes-", dir="/var/tmp"))
plugins = pputil.plugin_dir_with(os.path.join(pputil.PLUGIN_DIR, "java.so"))

# 1. an impostor: python, comm "java", with a library named libjvm.so mapped
fake_dir = os.path.join(work, "fake")
os.makedirs(fake_dir)
src = None
for cand in ("/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1",
             "/lib/aarch64-linux-gnu/libz.so.1", "/usr/lib/aarch64-linux-gnu/libz.so.1"):
    if os.path.exists(cand):
        src = cand
        break
fake_lib = os.path.join(fake_dir, "libjvm.so")
shutil.copy(src, fake_lib)
impostor = subprocess.Popen([sys.executable, "-c", (
    "import ctypes, time\n"
    "ctypes.CDLL(%r)\n"
    "libc = ctypes.CDLL(None)\n"
    "libc.prctl(15, b'java', 0, 0, 0)\n"  # PR_SET_NAME
    "time.sleep(120)\n") % fake_lib])

# 2. a JVM with -Xrs (SIGQUIT would kill it) whose attach socket was removed
# (as /tmp cleaners do): it cannot be attached without a signal, so it must
# be skipped. 3. a JVM that exits mid-session.
xrs_out = os.path.join(work, "xrs.out")
xrs = javawork.start(classes, "HotCold", 30, 1, 0, jvm_args=["-Xrs"], stdout=open(xrs_out, "w"))
deadline = time.time() + 15
sock = "/tmp/.java_pid%d" % xrs.pid
while time.time() < deadline and not os.path.exists(sock):
    time.sleep(0.1)  # -Xrs JVMs start their attach listener at startup
if os.path.exists(sock):
    os.unlink(sock)
short = javawork.start(classes, "HotCold", 4, 1, 0)

# 4. a "container": own pid + mount namespace with a private /tmp
cont = None
if shutil.which("unshare"):
    cont_out = os.path.join(work, "cont.out")
    cont = subprocess.Popen(["unshare", "--pid", "--mount", "--fork", "--mount-proc", "sh", "-c",
                             "mount -t tmpfs tmpfs /tmp && exec java -XX:CompileCommand=quiet -Dpp.container=1 -cp %s HotCold 40 2 3000" % classes],
                            stdout=open(cont_out, "w"), stderr=subprocess.STDOUT)
try:
    time.sleep(2.5)
    out_dir = os.path.join(work, "prof")
    res = pputil.run_agent(out_dir, plugins, "-f", "100", "--java-min-age-ms", "0",
                           "--app-id-args-filter", "-Dpp.container=.*", duration=8)
    pputil.check(res.returncode == 0, "agent exits 0 (rc %d)" % res.returncode)
    pputil.check(impostor.poll() is None, "the non-JVM process named java was not signalled (alive)")
    pputil.check(xrs.poll() is None, "the -Xrs JVM was not signalled (alive)")
    pputil.check(short.poll() is not None, "the short JVM exited during the session")
    # it stayed our zombie until poll(): its exit dump (if it was armed) is read and removed all the same
    left = glob.glob("/tmp/.polyprof-%d-*" % short.pid)
    pputil.check(not left, "no exit dump of the short JVM left in /tmp (%s)" % left)
    header, stacks = pputil.parse_col(os.path.join(out_dir, "last_profile.col"))
    texts = [";".join(f) for f, _ in stacks]
    log = res.stderr
    pputil.check("pid %d: profiling skipped: no Signal Dispatcher" % impostor.pid in log,
                 "log: impostor skipped (no Signal Dispatcher thread)")
    pputil.check("pid %d: profiling skipped: JVM runs with -Xrs" % xrs.pid in log, "log: -Xrs JVM skipped")
    pputil.check(not os.path.exists("/tmp/.java_pid%d" % xrs.pid), "no attach socket created in the -Xrs JVM")
    if cont:
        pputil.check(cont.poll() is None, "the namespaced JVM is alive")
        ns_stacks = [t for t in texts if "HotCold.hotWork(J)J_[" in t and "(-Dpp.container=1)" in t]
        pputil.check(len(ns_stacks) > 0, "the namespaced JVM (own pid + mount ns, private /tmp) is profiled")
        def cmdline(p):
            try:
                with open("/proc/%s/cmdline" % p, "rb") as f:
                    return f.read().decode(errors="replace")
            except OSError:
                return ""
        jvm_pids = [int(p) for p in os.listdir("/proc") if p.isdigit() and "-Dpp.container=1" in cmdline(p)]
        copied = [p for p in jvm_pids if any("/tmp/polyprof-" in line and "libpolyprof-jvmti.so" in line
                                             for line in javawork.maps_of(p).splitlines())]
        pputil.check(len(copied) >= 1, "the JVM maps the agent copied into its own /tmp/polyprof-<version>/ (%s %s)" % (jvm_pids, [l for p in jvm_pids for l in javawork.maps_of(p).splitlines() if "jvmti" in l][:2]))
    else:
        print("SKIPPED part: unshare not available for the namespaced JVM")
finally:
    for p in (impostor, xrs, short):
        pputil.kill(p)
    if cont:
        pputil.kill(cont)
with open(xrs_out) as f:
    pputil.check(f.read() == "ready\n", "-Xrs JVM output unchanged")
pputil.finish()
