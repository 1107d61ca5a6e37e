"""Capabilities for one step only, on real attaches.

A java worker holds CAP_SETUID/CAP_SETGID, CAP_KILL and CAP_DAC_OVERRIDE
and a nodejs worker CAP_SYS_ADMIN, CAP_SYS_CHROOT, CAP_KILL and
CAP_DAC_OVERRIDE permitted but not effective: only the step that needs
them raises them (java: the attach child that takes the JVM's ids and
signals it, the agent copy; nodejs: the thread that enters the target's
network namespace with setns(), the attach guard's bpf() calls, the
SIGUSR1, the helper's socket). Watched every 50 ms for a whole run, the
workers' CapEff (/proc/PID/status, the main thread) never holds them in
two looks in a row (a step lasts milliseconds) while CapPrm does, and both attaches work: a JVM running as nobody (its attach
socket answers only its own uid) has JIT frames, and a Node.js process in a
network namespace of its own (its inspector reachable only from there) has
JavaScript frames in inspector mode.
"""
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
for sub in ("java", "nodejs"):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workloads", sub))
import pputil as u  # noqa: E402
import javawork  # noqa: E402
import nodetest as n  # noqa: E402

if os.geteuid() != 0:
    u.skip("needs root: attaching as a JVM's user and entering a network namespace")
if not javawork.find_jdk():
    u.skip("no JDK (java/javac) installed")
n.require_node()

NOBODY = 65534
# CAP_SETUID, CAP_SETGID, CAP_KILL, CAP_DAC_OVERRIDE; CAP_SYS_ADMIN, CAP_SYS_CHROOT
STEP = {"java": (1 << 7) | (1 << 6) | (1 << 5) | (1 << 1),
        "nodejs": (1 << 21) | (1 << 18) | (1 << 5) | (1 << 1)}
with open("/proc/sys/kernel/cap_last_cap") as f:
    if int(f.read()) < 38:
        STEP["nodejs"] &= ~(1 << 21)  # perf events need CAP_SYS_ADMIN before 5.8


def caps(pid):
    out = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("CapEff", "CapPrm", "PPid", "Name"):
                    out[k] = v.strip()
    except OSError:
        return None
    return out


def workers_of(agent_pid):
    found = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = caps(int(d))
            if st and st.get("PPid") == str(agent_pid) and st.get("Name", "").startswith("pp-"):
                found[st["Name"][3:]] = int(d)
    return found


base = tempfile.mkdtemp(prefix="ppsteps-", dir="/var/tmp")
os.chmod(base, 0o755)
classes = javawork.compile_workloads(os.path.join(base, "classes"))
jvm = javawork.start(classes, "HotCold", 60, 1, 0, jvm_args=["-Xmx64m"],
                     prefix=["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups"])
node = n.spawn_node_own_netns([os.path.join(u.SRC, "tests", "workloads", "modes", "sleep_burn.js"), "60"])
plugins = u.plugin_dir_with(os.path.join(u.PLUGIN_DIR, "java.so"), os.path.join(u.PLUGIN_DIR, "nodejs.so"))
out = u.tempdir("ppsteps-out-")
try:
    time.sleep(2)  # the JVM's attach listener
    agent = n.Agent(out, plugins, "--nodejs-mode", "inspector", "--java-min-age-ms", "500",
                    "--pids", "%d,%d" % (jvm.pid, node.pid), duration=3)
    seen_eff = {"java": 0, "nodejs": 0}
    # a look may land inside a step of the worker's main thread (the agent
    # copy, a connect: a few ms); a step capability seen in two looks in a
    # row (50 ms apart) was held outside its step
    last_eff = {"java": 0, "nodejs": 0}
    held = {"java": 0, "nodejs": 0}
    seen_prm = {"java": None, "nodejs": None}
    looks = 0
    end = time.time() + 60
    while time.time() < end and len(agent.profiles()) < 4 and agent.p.poll() is None:
        for name, pid in workers_of(agent.p.pid).items():
            st = caps(pid)
            if name in seen_eff and st and "CapEff" in st:
                eff = int(st["CapEff"], 16)
                seen_eff[name] |= eff
                held[name] |= eff & last_eff[name]
                last_eff[name] = eff
                seen_prm[name] = int(st["CapPrm"], 16)
                looks += 1
        time.sleep(0.05)
    rc = agent.stop()
    u.check(rc == 0, "agent exits 0 (rc %s)" % rc)
    u.check(looks > 50, "the workers were watched (%d looks)" % looks)
    for name, step in STEP.items():
        u.check(seen_prm[name] is not None and seen_prm[name] & step == step,
                "%s worker: the step capabilities %#x are permitted (CapPrm %s)"
                % (name, step, "%#x" % seen_prm[name] if seen_prm[name] is not None else "never seen"))
        u.check(held[name] & step == 0,
                "%s worker: never effective outside a step (CapEff in two looks in a row: %#x; "
                "all looks together: %#x)" % (name, held[name], seen_eff[name]))
    header, stacks = n.stacks_of(agent.profiles()[1:])
    java = [(f, c) for f, c in stacks if any(x.startswith("HotCold.") for x in f)]
    u.check(any(x.endswith("_[j]") for f, _ in java for x in f),
            "the JVM running as nobody was attached: JIT frames of HotCold (%d stacks)" % len(java))
    js = [(f, c) for f, c in stacks if any(x.startswith(("burner (", "turn (")) for x in f)]
    u.check(len(js) > 0, "Node.js in its own network namespace was attached in inspector mode: "
            "%d stacks with burner/turn" % len(js))
    if not java or not js:
        print(agent.log_text()[-3000:])
finally:
    u.kill(jvm)
    u.kill(node)
u.finish()
