#!/usr/bin/env python3
"""java plugin, perfmap mode: no agent in the JVM; every session runs
jcmd Compiler.perfmap over the attach socket, so /tmp/perf-<pid>.map names
the JIT-compiled methods for perf. Also: --no-java / mode disabled leave
JVMs alone. (That perf's own output then shows named JIT frames is checked
on the perf plugin's side.)"""
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "workloads", "java"))
import pputil  # noqa: E402
import javawork  # noqa: E402

if os.geteuid() != 0:
    pputil.skip("needs root (attach as the JVM's user, SIGQUIT)")
if not javawork.find_jdk():
    pputil.skip("no JDK (java/javac) installed")

classes = javawork.compile_workloads()
work = pputil.tempdir("ppjava-pm-")
plugins = pputil.plugin_dir_with(os.path.join(pputil.PLUGIN_DIR, "java.so"))
out_path = os.path.join(work, "jvm.out")
proc = javawork.start(classes, "HotCold", 60, 2, 0, stdout=open(out_path, "w"))
pmap = "/tmp/perf-%d.map" % proc.pid
try:
    pputil.check(javawork.wait_for_line(out_path, "ready"), "JVM started")
    # disabled: nothing touches the JVM (the example plugin keeps the agent
    # from refusing to run with no plugin at all)
    both = pputil.plugin_dir_with(os.path.join(pputil.PLUGIN_DIR, "java.so"),
                                  os.path.join(pputil.PLUGIN_DIR, "example.so"))
    for flags in (["--no-java"], ["--java-mode", "disabled"]):
        res = pputil.run_agent(os.path.join(work, "off"), both, "--java-min-age-ms", "0", "--example-mode", "states",
                               *flags, duration=2)
        pputil.check(res.returncode == 0 and not os.path.exists("/tmp/.java_pid%d" % proc.pid),
                     "%s: no attach (rc %d)" % (" ".join(flags), res.returncode))

    res = pputil.run_agent(os.path.join(work, "prof"), plugins, "--java-mode", "perfmap", "--java-min-age-ms", "0",
                           duration=4)
    pputil.check(res.returncode == 0, "agent exits 0 in perfmap mode")
    pputil.check(os.path.exists(pmap), "%s written" % pmap)
    text = open(pmap).read() if os.path.exists(pmap) else ""
    lines = text.splitlines()
    pputil.check(len(lines) > 10 and all(re.match(r"^0x[0-9a-f]+ 0x[0-9a-f]+ .+", ln) for ln in lines[:50]),
                 "perf map format '0x<start> 0x<size> <name>' (%d lines)" % len(lines))
    pputil.check(any("HotCold.hotWork(long)" in ln for ln in lines), "JIT-compiled HotCold.hotWork is named")
    maps = javawork.maps_of(proc.pid)
    pputil.check("libpolyprof-jvmti" not in maps, "no agent loaded in perfmap mode")
    pputil.check(proc.poll() is None, "JVM still running")
finally:
    pputil.kill(proc)
    if os.path.exists(pmap):
        os.unlink(pmap)
with open(out_path) as f:
    pputil.check(f.read() == "ready\n", "JVM output unchanged")


def child_pid(pid, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        try:
            with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
                kids = f.read().split()
            if kids:
                return int(kids[0])
        except OSError:
            pass
        time.sleep(0.05)
    return None


# A JVM in a pid namespace of its own: the perf plugin reads its map in
# the JVM's root under its namespace pid, so no copy of the map (text the
# container controls) lands in the host's /tmp under its host pid.
out_path = os.path.join(work, "jvm-ns.out")
wrapper = javawork.start(classes, "HotCold", 60, 2, 0, stdout=open(out_path, "w"),
                         prefix=["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", '"$@" & wait', "sh"])
jvm = shell = None
try:
    shell = child_pid(wrapper.pid)
    jvm = child_pid(shell) if shell else None
    pputil.check(jvm is not None and javawork.wait_for_line(out_path, "ready"), "JVM started in its own pid namespace")
    own_map = "/tmp/perf-2.map"  # its /tmp is the host's; its pid there is 2
    host_copy = "/tmp/perf-%d.map" % (jvm or 0)
    res = pputil.run_agent(os.path.join(work, "prof-ns"), plugins, "--java-mode", "perfmap", "--java-min-age-ms", "0",
                           duration=3)
    pputil.check(res.returncode == 0, "agent exits 0 with a JVM in a pid namespace")
    pputil.check(os.path.exists(own_map), "the JVM wrote its own map (%s) for the session" % own_map)
    pputil.check(not os.path.exists(host_copy), "no copy of it under the host pid (%s)" % host_copy)
finally:
    for pid in (jvm, shell):  # the namespace's init (shell) outlives unshare
        if pid:
            try:
                os.kill(pid, 9)
            except OSError:
                pass
    pputil.kill(wrapper)
    for f in ("/tmp/perf-2.map", "/tmp/perf-%d.map" % (jvm or 0)):
        if jvm and os.path.exists(f):
            os.unlink(f)

# A JVM of the host's pid namespace with a /tmp of its own (another mount
# namespace): perf cannot reach its map once it is gone, so the agent keeps
# a copy in the java plugin's runtime directory (root's, 0600, at most
# 64 MiB) while it lives, never in the host's /tmp, and removes it when
# the JVM exits.
vclasses = tempfile.mkdtemp(prefix="ppjava-pm-classes-", dir="/var/tmp")
javawork.compile_workloads(vclasses)
out_path = os.path.join(work, "jvm-mnt.out")
jvm = javawork.start(vclasses, "HotCold", 60, 2, 0, stdout=open(out_path, "w"),
                     prefix=["unshare", "--mount", "sh", "-c",
                             'mount --make-rprivate / && mount -t tmpfs tmpfs /tmp && exec "$@"', "sh"])
copy = "/run/polyprof/java/perf-%d.map" % jvm.pid
host_tmp = "/tmp/perf-%d.map" % jvm.pid
agent = None
try:
    pputil.check(javawork.wait_for_line(out_path, "ready"), "JVM started with a /tmp of its own")
    cmd = pputil.agent_cmd(os.path.join(work, "prof-mnt"), plugins, "-c", "--java-mode", "perfmap",
                           "--java-min-age-ms", "0", duration=1)
    agent = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.time() + 30
    while time.time() < end and not os.path.exists(copy):
        time.sleep(0.2)
    st = os.lstat(copy) if os.path.exists(copy) else None
    pputil.check(st is not None and stat.S_ISREG(st.st_mode) and st.st_uid == 0 and st.st_mode & 0o077 == 0,
                 "a copy of its map is in the agent's runtime directory while it lives (%s)" % copy)
    pputil.check(not os.path.exists(host_tmp), "nothing written to the host's /tmp (%s)" % host_tmp)
    text = open(copy).read() if st else ""
    pputil.check(any("HotCold.hotWork(long)" in ln for ln in text.splitlines()), "the copy names HotCold.hotWork")
    pputil.kill(jvm)
    end = time.time() + 15
    while time.time() < end and os.path.exists(copy):
        time.sleep(0.2)
    pputil.check(not os.path.exists(copy), "the copy is removed when the JVM exits")
    pputil.check(agent.poll() is None, "the agent runs on")
finally:
    pputil.kill(jvm)
    if agent:
        agent.send_signal(signal.SIGTERM)
        try:
            agent.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pputil.kill(agent)
    if os.path.exists(copy):
        os.unlink(copy)
    shutil.rmtree(vclasses, ignore_errors=True)
pputil.finish()
