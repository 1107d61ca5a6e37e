"""The nodejs plugin's v8 mode against one Node.js major (the cases every
tests/integration/test_nodejs_v8_node<major>.py runs).

One agent, started first with the nodejs plugin in v8 mode and no --pids,
profiles three processes of that Node version, each with its own copy of
its script (so its frames and appid name a path no other process uses):

1. split.js (3:1 CPU split between heavyPath and lightPath), preloaded with
   sigcount.js: both paths sampled (the share within 5 points is
   test_nodejs_v8_split's, on every version at once), function names with their
   script path and definition line, the target never receives a signal
   and never listens on a TCP port while profiled.
2. syncloop.js: the main thread never returns to the event loop; its
   stacks still carry its JS frames.
3. oneshot.js, started once the agent runs, about a second of CPU in a
   uniquely named function: JS frames in nearly all of its samples.
"""
import json
import os
import random
import shutil
import subprocess
import time

import nodetest as n  # noqa: E402
import pputil as u  # noqa: E402


def node_binary(major):
    path = "/opt/polyprof-test/node-%d/bin/node" % major
    if os.access(path, os.X_OK):
        return path
    if major == 20 and n.NODE:
        v = subprocess.run([n.NODE, "--version"], stdout=subprocess.PIPE, text=True).stdout
        if v.startswith("v20."):
            return n.NODE
    u.skip("Node.js %d not installed at %s (scripts/install-deps.sh test installs it)"
           % (major, path))


def line_of(path, prefix):
    with open(path) as f:
        for i, t in enumerate(f, 1):
            if t.lstrip().startswith(prefix):
                return i
    raise AssertionError("%s not in %s" % (prefix, path))


def copy_workload(name, text=None):
    d = u.tempdir("ppv8-")
    dst = os.path.join(d, name)
    if text is None:
        shutil.copy(os.path.join(n.WORKLOADS, name), dst)
    else:
        with open(dst, "w") as f:
            f.write(text)
    return dst


def other_node_profilers(own_agent):
    """Other polyprof agents running the nodejs plugin (processes mapping
    a nodejs.so, as workers or inline, not ours): one in inspector mode
    signals every Node process it finds, this test's target included."""
    found = []
    mine = {own_agent}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if int(d) in mine or ppid in mine:
                continue
            with open("/proc/%s/maps" % d) as f:
                if "/nodejs.so" in f.read():
                    found.append(int(d))
        except (OSError, ValueError, IndexError):
            continue
    return found


TIER_SUFFIXES = ("_[0]", "_[1]", "_[j]", "_[i]")


def js_frame(frame):
    """A frame without the tier suffix the v8 mode writes (interpreted,
    baseline, optimized, inlined)."""
    for sfx in TIER_SUFFIXES:
        if frame.endswith(sfx):
            return frame[:-len(sfx)]
    return frame


def of_script(stacks, script):
    """Stacks of the process running script: its appid names the path."""
    return [(f, c) for f, c in stacks if any(x.startswith("appid: ") and script in x for x in f)]


def require_plugin():
    """Root and a built plugin. Not nodetest.require_node(): another agent
    in inspector mode on the host does not make this mode's results about
    it (its signals are told apart, see run())."""
    if os.geteuid() != 0:
        u.skip("the v8 mode needs root (perf events on other users' threads, process_vm_readv)")
    plugin = os.path.join(u.PLUGIN_DIR, "nodejs.so")
    if not os.path.exists(plugin):
        u.skip("nodejs plugin not built: " + plugin)


def enough(profiles, split, sync):
    """Samples enough to judge the split and the sync loop: a loaded host
    gives the targets less CPU, so the run goes on (up to a minute) until
    the sessions after the first hold them."""
    try:
        _, stacks = n.stacks_of(profiles)
    except (OSError, ValueError):
        return False
    return (sum(c for _, c in of_script(stacks, split)) >= 150 and
            sum(c for _, c in of_script(stacks, sync)) >= 80)


def run(major):
    require_plugin()
    node = node_binary(major)
    version = subprocess.run([node, "--version"], stdout=subprocess.PIPE, text=True).stdout.strip()
    print("Node.js %s (%s)" % (version, node))
    plugins = n.plugin_dir()
    foreign = other_node_profilers(0)
    split = copy_workload("split.js")
    sync = copy_workload("syncloop.js")
    tag = "burnOneSecond%d" % random.randrange(10**6, 10**7)
    with open(os.path.join(n.WORKLOADS, "oneshot.js")) as f:
        oneshot = copy_workload("oneshot.js", f.read().replace("burnOneSecond", tag))
    sigfile = os.path.join(u.tempdir("ppv8sig-"), "counts.json")

    out = u.tempdir("ppout-")
    # new processes are looked for every 100 ms (the host's default is 1 s,
    # as long as the one-shot process lives)
    agent = n.Agent(out, plugins, "--nodejs-mode", "v8", "--proc-scan-interval-ms", "100",
                    duration=2)
    procs = []
    try:
        env = dict(os.environ, SIGCOUNT_FILE=sigfile)
        err_path = os.path.join(os.path.dirname(sigfile), "stderr")
        with open(err_path, "w") as err:
            target = subprocess.Popen([node, "-r", os.path.join(n.WORKLOADS, "sigcount.js"),
                                       split], stdout=subprocess.DEVNULL, stderr=err, env=env)
        procs.append(target)
        procs.append(subprocess.Popen([node, sync], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
        # the one-shot process starts once the agent has written a session
        u.check(agent.wait_sessions(1, 60) >= 1, "agent wrote its first session")
        shot = subprocess.Popen([node, oneshot], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        procs.append(shot)
        listening = set()
        end = time.time() + 60
        while time.time() < end and agent.p.poll() is None:
            listening |= n.listening_ports(target.pid)
            foreign = foreign or other_node_profilers(agent.p.pid)
            time.sleep(0.3)
            if len(agent.profiles()) >= 5 and enough(agent.profiles()[1:], split, sync):
                break
        u.check(shot.wait(timeout=30) == 0, "one-shot process exited 0")
        rc = agent.stop()
        if not u.check(rc == 0, "agent exits 0 (rc %s)" % rc):
            print(agent.stderr[-3000:])
        u.check(target.poll() is None, "split target still running")
        with open(sigfile) as f:
            counts = json.load(f)
        received = {k: v for k, v in counts.items() if v}
        if foreign:
            print("note: other nodejs profilers run on this host %s: signals %s and listening "
                  "ports %s may be theirs" % (foreign, received, listening))
        else:
            u.check(not received, "the target received no signal (%s)" % counts)
            u.check(not listening, "the target listened on no TCP port (%s)" % listening)
        profiles = agent.profiles()
        header, all_stacks = n.stacks_of(profiles)
        _, later = n.stacks_of(profiles[1:])
        counters = header.get("polyprof", {}).get("nodejs", {}).get("counters", {})
        print("counters of the last session: %s" % counters)
        log = agent.log_text()
        u.check("Profiling skipped" not in "".join(";".join(f) for f, _ in
                                                   of_script(all_stacks, split)),
                "split target not skipped")

        # 1. split: names, files, lines, 3:1
        mine = of_script(later, split)
        heavy = n.frames_with(mine, "heavyPath (")
        light = n.frames_with(mine, "lightPath (")
        total = sum(c for _, c in mine)
        u.check(total >= 50, "split: %d samples (>= 50)" % total)
        # the 3:1 share itself is test_nodejs_v8_split's (all four versions)
        print("split: heavy:light %.1f%% (%d vs %d)" % (100.0 * heavy / max(heavy + light, 1),
                                                      heavy, light))
        u.check(heavy > light > 0, "split: both paths sampled, heavy more (%d vs %d)"
                % (heavy, light))
        frames = {js_frame(x) for f, _ in mine for x in f}
        for fn, prefix in (("heavyPath", "function heavyPath"), ("lightPath", "async function lightPath"),
                           ("spin", "function spin"), ("main", "async function main")):
            want = "%s (%s:%d)" % (fn, split, line_of(split, prefix))
            u.check(want in frames, "split: frame %s" % want)
        crunch = [x for x in frames if x.startswith("crunch (")]
        # optimized heavyPath may inline crunch (Node 24's Maglev does): when it shows, its line
        want = "crunch (%s:%d)" % (split, line_of(split, "crunch(ms)"))
        u.check(all(x == want for x in crunch), "split: crunch frames are %s (%s)" % (want, crunch))
        u.check(any([x.split(" (")[0] for x in f].index("heavyPath") >
                    [x.split(" (")[0] for x in f].index("main")
                    for f, _ in mine if any(x.startswith("heavyPath (") for x in f) and
                    any(x.startswith("main (") for x in f)),
                "split: heavyPath under main")
        with open(err_path) as f:
            err_text = f.read()
        u.check("Debugger" not in err_text or bool(foreign),
                "split: no inspector message on stderr (%r)" % err_text[:200])

        # 2. a main thread that never returns to the event loop
        stuck = of_script(later, sync)
        st_total = sum(c for _, c in stuck)
        st_js = n.frames_with(stuck, "neverYields (%s:" % sync)
        u.check(st_total >= 50 and st_js >= 0.9 * st_total,
                "syncloop: JS frames in %d of %d samples" % (st_js, st_total))

        # 3. a one-second process started after the agent
        # its appid (kept by the agent after the process exited) names its script
        shot_stacks = of_script(all_stacks, oneshot)
        shot_js = n.frames_with(shot_stacks, tag + " (")
        shot_all = sum(c for _, c in shot_stacks)
        u.check(shot_js >= 20, "one-shot: %d samples in %s" % (shot_js, tag))
        u.check(shot_js >= 0.9 * shot_all, "one-shot: JS frames in %d of its %d samples"
                % (shot_js, shot_all))
        u.check("pid %d: V8 metadata" % shot.pid in log, "one-shot: attached (log)")
    finally:
        for p in procs:
            u.kill(p)
        if agent.p.poll() is None:
            agent.stop()
    u.finish()
