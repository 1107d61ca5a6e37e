#!/usr/bin/env python3
"""System test: every runtime at once, one agent, the shipped config.

One workload per runtime (native C, Go, Python 2.7, Python 3 and Node and
Ruby each inside a private mount + pid namespace with its own /tmp, Java,
PHP, .NET) plus a native program that execs into Python mid-session, all
profiled together by ONE agent in continuous mode for three sessions, with
config/polyprof.yaml as shipped. Flags only for what a test must override:
output dir, session length, plugin dir, pid and log files, continuous mode,
the three runtimes that are off by default as in gProfiler (PHP, Node.js,
.NET), and --debug-plugin-totals to see perf's own per-pid counts.

Each session must show, for every workload: its host pid in perf's and its
runtime plugin's counts, its own function with its runtime's frame suffix,
its appid where gProfiler has a rule, a merged per-pid total equal to perf's
count (in the .col and in the flame graph), and the flame graph rendered in
headless Chromium finding its function under its pid. The exec target shows
native frames before the exec and Python frames (and appid) in the session
after it. tests/system/README.md explains what this proves.

Exit 0 = pass, 77 = skipped (a runtime missing on this machine), else fail.
"""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, os.path.join(HERE, "..", "integration", "html"))
sys.path.insert(0, HERE)
import cdp  # noqa: E402
import pputil as u  # noqa: E402
import sysworkloads as sw  # noqa: E402

SESSION_S = 20  # ~22 perf samples per workload per session at 11 Hz x 10 %
SESSIONS = 3  # checked, after WARMUP
WARMUP = 2  # sessions the workloads start in and runtimes attach in (a busy
            # host delays attaches: nodejs attaches one process per network
            # namespace at a time, and waits up to 5 s for each)
EXEC_AFTER = 3  # the exec target execs half-way through the session after this one
HOT_SHARE = 0.3  # the workload's own function's least share of its samples
MIN_PERF = 2  # per workload and session; bounded by counts, not timings
RUNTIME_PLUGIN = {"python": "python", "java": "java", "nodejs": "nodejs", "php": "php", "ruby": "ruby",
                  "dotnet": "dotnet"}
# What the flame graph page searches (frame names without their suffix).
SEARCH = {"c": r"^sys_c_hot$", "go": r"^main\.sysGoHot$", "python2": r"^sys_py_hot \(",
          "python3-ns": r"^sys_py_hot \(/tmp/", "java": r"^SysWork\.sysJavaHot",
          "node-ns": r"^(sysNodeHot|tick) \(file:///tmp/sys_work", "php": r"^sys_php_hot ",
          "ruby-ns": r"^sys_rb_hot - /tmp/",
          "dotnet": r"SysDotnetHot", "exec": r"^sys_exec_native_hot$"}


def lines_of(stacks, comm, appid):
    """.col lines of one process: the comm field (None: any), and the appid
    frame when there is one (lines carry no pid; comm + appid are unique
    here)."""
    out = []
    for f, c in stacks:
        if len(f) < 3 or comm is not None and f[2] != comm:
            continue
        has = len(f) > 3 and f[3].startswith("appid: ")
        if appid is None and not has or appid is not None and has and f[3] == "appid: " + appid:
            out.append((f[3 + (appid is not None):], c))
    return out


def sessions_in(out):
    """Stems of complete sessions (.col, .html and .plugins.json written)."""
    stems = []
    for col in sorted(glob.glob(os.path.join(out, "profile_*.col"))):
        stem = col[:-4]
        if os.path.exists(stem + ".html") and os.path.exists(stem + ".plugins.json"):
            stems.append(stem)
    return stems


def polyprof_maps(pid):
    """What of ours (or another agent's) is loaded in a process: a second
    agent on the machine would show here as another path."""
    try:
        with open("/proc/%d/maps" % pid) as f:
            return sorted({x.split()[-1] for x in f if "polyprof" in x})
    except OSError as e:
        return str(e)


def other_agents(mine):
    """Other polyprof agents on this machine (not `mine` or its workers):
    their Java agent or Node inspector session can get to our workloads
    first (one agent per host is the supported setup)."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == mine:
            continue
        try:
            exe = os.readlink("/proc/%s/exe" % d)
            with open("/proc/%s/stat" % d) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if os.path.basename(exe) == "polyprof" and ppid != mine:
            found.append("%s (%s)" % (d, exe))
    return found


def check_workload(n, w, stacks, totals):
    """The .col and the per-plugin totals of one session for workload w."""
    perf = totals["plugins"]["perf"]["pids"].get(str(w.pid))
    perf_n = perf["samples"] if perf else 0
    u.check(perf_n >= MIN_PERF, "s%d %s: perf counted host pid %d (%d >= %d samples)" % (n, w.name, w.pid, perf_n,
                                                                                         MIN_PERF))
    plugin = RUNTIME_PLUGIN.get(w.kind)
    if plugin:
        rt = totals["plugins"][plugin]["pids"].get(str(w.pid))
        if not u.check(rt is not None and rt["status"] == "ok" and rt["samples"] > 0,
                       "s%d %s: the %s plugin sampled host pid %d (%s)" % (n, w.name, plugin, w.pid, rt)):
            print("  polyprof libraries mapped in pid %d: %s" % (w.pid, polyprof_maps(w.pid)))
    merged = totals["merged"].get(str(w.pid))
    u.check(merged == perf_n, "s%d %s: merged total of pid %d == perf's count (%s == %d)"
            % (n, w.name, w.pid, merged, perf_n))
    mine = lines_of(stacks, w.comm, w.appid)
    col_n = sum(c for _, c in mine)
    u.check(col_n == perf_n, "s%d %s: .col lines of comm %r%s sum to perf's count (%d == %d)"
            % (n, w.name, w.comm, " appid %r" % w.appid if w.appid else "", col_n, perf_n))
    rx = re.compile(w.func)
    hit = sum(c for f, c in mine if any(rx.search(x) for x in f))
    u.check(hit > 0, "s%d %s: its function %s is in its stacks (%d samples)" % (n, w.name, w.func, hit))
    # The workload spends its CPU in that function: a sampler that reads
    # stacks of threads not running (ruby's once did: 85 % "sleep") fails.
    # PHP is exempt: like phpspy (gProfiler) the php plugin samples wall
    # clock while PHP code runs, so its usleep() shows (docs/php.md).
    if w.kind != "php":
        u.check(col_n and hit >= HOT_SHARE * col_n, "s%d %s: its function has >= %d%% of its samples (%d of %d)"
                % (n, w.name, HOT_SHARE * 100, hit, col_n))
    if plugin in ("python", "ruby", "php"):
        # these plugins see every sample of the pid as the runtime's: no
        # native-only perf stack may be left for it
        suffix = {"python": "_[p]", "ruby": "_[rb]", "php": "_[php]"}[plugin]
        bare = [f for f, c in mine if not any(x.endswith(suffix) for x in f)]
        u.check(not bare, "s%d %s: every stack carries %s frames: %s" % (n, w.name, suffix, bare[:2]))


def check_exec(n, w, stacks, totals, phase, script):
    """The exec target: native before the exec, Python in the session after."""
    perf = totals["plugins"]["perf"]["pids"].get(str(w.pid))
    perf_n = perf["samples"] if perf else 0
    u.check(perf_n >= MIN_PERF, "s%d exec: perf counted pid %d (%d samples)" % (n, w.pid, perf_n))
    u.check(totals["merged"].get(str(w.pid)) == perf_n, "s%d exec: merged total == perf's count" % n)
    if phase == "before":
        mine = lines_of(stacks, "pp_sys_exec", None)
        u.check(sum(c for _, c in mine) == perf_n, "s%d exec (native): .col lines of pp_sys_exec == perf's count" % n)
        u.check(any(x == "sys_exec_native_hot" for f, _ in mine for x in f),
                "s%d exec (native): sys_exec_native_hot frames" % n)
        u.check(str(w.pid) not in totals["plugins"]["python"]["pids"],
                "s%d exec (native): not a python target yet" % n)
    elif phase == "after":
        rt = totals["plugins"]["python"]["pids"].get(str(w.pid))
        u.check(rt is not None and rt["status"] == "ok" and rt["samples"] > 0,
                "s%d exec (python): the python plugin sampled the same pid %d after the exec (%s)" % (n, w.pid, rt))
        appid = "python: %s (%s)" % (script, script)
        mine = lines_of(stacks, "python3", appid)
        u.check(sum(c for _, c in mine) == perf_n,
                "s%d exec (python): .col lines of python3 + %r == perf's count (%d == %d)"
                % (n, appid, sum(c for _, c in mine), perf_n))
        u.check(any(re.match(r"^sys_py_exec_hot \(.*sys_work\.py:\d+\)_\[p\]$", x) for f, _ in mine for x in f),
                "s%d exec (python): sys_py_exec_hot _[p] frames" % n)
        u.check(not [f for f, _ in mine if "sys_exec_native_hot" in f],
                "s%d exec (python): no native frame of the old image" % n)


def check_html(browser, n, stem, ws, totals, exec_phase):
    """The session's flame graph in headless Chromium: every workload's pid
    is in the process filter with perf's count, and its function is found
    (and highlighted) under that pid."""
    url = "file://" + stem + ".html"
    page = browser.new_page()
    try:
        page.navigate(url)
        u.check(page.wait_for("window.polyprof && polyprof.state().ready", 60), "s%d html: page ready" % n)
        labels = {f["value"]: f["label"] for f in page.eval("polyprof.filters()")}
        for w in ws:
            key = "pid:%d" % w.pid
            perf_n = totals["plugins"]["perf"]["pids"].get(str(w.pid), {}).get("samples", 0)
            u.check(key in labels, "s%d html %s: %s listed (%s)" % (n, w.name, key, labels.get(key)))
            got = page.eval("polyprof.setFilter(%s)" % json.dumps(key))
            total = page.eval("polyprof.state().totalSamples")
            u.check(got == key and total == perf_n, "s%d html %s: pid %d shows perf's %d samples (%s)"
                    % (n, w.name, w.pid, perf_n, total))
            if w.name == "exec":
                want = {"before": r"^sys_exec_native_hot$", "after": r"^sys_py_exec_hot \("}.get(exec_phase)
                if want:
                    r = page.eval("polyprof.search(%s)" % json.dumps(want))
                    u.check(r["matchedSamples"] > 0, "s%d html exec (%s): %s under pid %d (%s)"
                            % (n, exec_phase, want, w.pid, r["matchedSamples"]))
                if exec_phase == "after":
                    r = page.eval("polyprof.search('^sys_exec_native_hot$')")
                    u.check(r["matchedSamples"] == 0, "s%d html exec (after): no native frames left" % n)
                continue
            r = page.eval("polyprof.search(%s)" % json.dumps(SEARCH[w.name]))
            hl = page.eval("polyprof.state().render.highlighted")
            u.check(r["matchedSamples"] > 0 and r["matchedFrames"] and hl,
                    "s%d html %s: search %s finds %d samples under pid %d, highlighted %s"
                    % (n, w.name, SEARCH[w.name], r["matchedSamples"], w.pid, hl[:1]))
        page.eval("polyprof.setFilter('all'); polyprof.reset()")
        reqs = [e["params"]["request"]["url"] for e in page.events("Network.requestWillBeSent")]
        u.check(all(x.split("#")[0] == url for x in reqs), "s%d html: no network request" % n)
        errs = page.events("Runtime.exceptionThrown")
        u.check(not errs, "s%d html: no JS exception %s" % (n, str(errs[:1])[:300]))
        os.makedirs(os.path.join(u.BUILD, "tests", "system"), exist_ok=True)
        page.eval("polyprof.search(%s)" % json.dumps("|".join(SEARCH.values())))
        page.screenshot(os.path.join(u.BUILD, "tests", "system", "session%d.png" % n))
    finally:
        page.call("Target.closeTarget", {"targetId": page.target_id})


def wait_sessions(agent, out, count, timeout, on_new=None):
    deadline = time.time() + timeout
    seen = 0
    while time.time() < deadline:
        stems = sessions_in(out)
        while seen < len(stems):
            seen += 1
            if on_new:
                on_new(seen)
        if len(stems) >= count:
            return stems
        if agent.poll() is not None:
            break
        time.sleep(0.5)
    return sessions_in(out)


def main():
    if os.geteuid() != 0:
        u.skip("the agent needs root for perf and reading other processes")
    for so in ("perf", "python", "java", "nodejs", "php", "ruby", "dotnet"):
        if not os.path.exists(os.path.join(u.PLUGIN_DIR, so + ".so")):
            u.skip("plugin %s.so not built in %s" % (so, u.PLUGIN_DIR))
    chromium = cdp.find_chromium()
    if not chromium:
        u.skip("no Chromium (Debian package chromium) to render the flame graph")
    tmp = u.tempdir("ppsystem-")
    print("load average at start: %s" % open("/proc/loadavg").read().split()[:3])
    t0 = time.time()
    try:
        built = sw.build_all(tmp, u.BUILD)
        ws = sw.define(tmp, built)
    except sw.Missing as e:
        u.skip(str(e))
    print("built the workloads in %.0f s" % (time.time() - t0))
    wl = sw.Workloads(tmp, ws)
    agent = None
    browser = None
    out = os.path.join(tmp, "out")
    run = os.path.join(tmp, "run")
    os.makedirs(run)
    log = os.path.join(run, "polyprof.log")
    try:
        # The agent first, then the workloads, as on a host where services
        # start and stop under a running agent: session 1 sees them arrive
        # (targets added mid-session, runtimes attaching) and is the warm-up;
        # sessions 2..4 are checked.
        cmd = [u.AGENT, "--config", os.path.join(u.SRC, "config", "polyprof.yaml"), "-c",
               "-d", str(SESSION_S), "-o", out, "--plugin-dir", u.PLUGIN_DIR,
               "--pid-file", os.path.join(run, "polyprof.pid"), "--log-file", log,
               # off by default, as in gProfiler: a user turns them on like this
               "--php-mode", "phpspy", "--nodejs-mode", "inspector", "--dotnet-mode", "dotnet-trace",
               "--debug-plugin-totals"]
        print("agent:", " ".join(cmd))
        t_agent = time.time()
        agent = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(os.path.join(run, "stderr"), "w"),
                                 start_new_session=True, preexec_fn=sw._child_setup)
        wl.start()
        wl.wait_ready()
        print("workloads ready %.0f s after the agent started" % (time.time() - t_agent))
        for w in ws:
            print("%-10s host pid %-7d sees itself as %-7d %s" % (w.name, w.pid, w.ns_pid, " ".join(w.cmd)[-90:]))
            if w.ns:
                u.check(w.ns_pid == 1 and w.pid != 1, "%s runs as pid 1 of its own pid namespace (host pid %d)"
                        % (w.name, w.pid))
        exec_w = next(w for w in ws if w.name == "exec")

        def on_new(k):
            print("session %d written at +%.0f s, load %s" % (k, time.time() - t_agent,
                                                              open("/proc/loadavg").read().split()[:3]))
            if k == EXEC_AFTER:  # exec half-way through the next session
                time.sleep(SESSION_S / 2)
                os.kill(exec_w.pid, signal.SIGUSR1)

        stems = wait_sessions(agent, out, WARMUP + SESSIONS, (WARMUP + SESSIONS) * SESSION_S + 120, on_new)
        others = other_agents(agent.pid)
        if others:
            print("NOTE: other polyprof agents ran during this test; Java and Node.js checks can fail "
                  "because of them (see README): %s" % ", ".join(others[:6]))
        exe_now = os.readlink("/proc/%d/exe" % exec_w.pid) if os.path.exists("/proc/%d" % exec_w.pid) else "?"
        u.check(os.path.basename(exe_now).startswith("python3"), "exec target now runs %s" % exe_now)
        for w in ws:
            if not u.check(w.proc.poll() is None and os.path.exists("/proc/%d" % w.pid),
                           "%s (pid %d) still running after the sessions" % (w.name, w.pid)):
                print("  exit status %s, its output: %s" % (w.proc.poll(), wl.output(w)[-1500:]))
        agent.send_signal(signal.SIGTERM)
        rc = agent.wait(timeout=60)
        u.check(rc == 0, "agent exits 0 on SIGTERM (%s)" % rc)
        u.check(len(stems) >= WARMUP + SESSIONS, "%d sessions written (%d)" % (WARMUP + SESSIONS, len(stems)))
        stems = stems[WARMUP:WARMUP + SESSIONS]

        script = os.path.join(tmp, "scripts", "sys_work.py")
        browser = cdp.Browser(chromium)
        for n, stem in enumerate(stems, WARMUP + 1):
            print("--- session %d: %s" % (n, os.path.basename(stem)))
            # the exec happens half-way through session EXEC_AFTER + 1
            phase = {EXEC_AFTER: "before", EXEC_AFTER + 2: "after"}.get(n, "during")
            header, stacks = u.parse_col(stem + ".col")
            with open(stem + ".plugins.json") as f:
                totals = json.load(f)
            for name, p in header["polyprof"].items():
                u.check(p["status"] == "ok" and p["restarts"] == 0 and totals["plugins"][name]["status"] == "ok",
                        "s%d plugin %s: status ok, never restarted (%s, %d)" % (n, name, p["status"], p["restarts"]))
            for w in ws:
                if w.name == "exec":
                    check_exec(n, w, stacks, totals, phase, script)
                else:
                    check_workload(n, w, stacks, totals)
            check_html(browser, n, stem, ws, totals, phase)
        with open(log, errors="replace") as f:
            text = f.read()
        crashes = [x for x in text.splitlines() if re.search(r"crash|killed by signal|restart", x, re.I)]
        u.check(not crashes, "no plugin worker crashed or restarted: %s" % crashes[:3])
    finally:
        if browser:
            browser.close()
        if agent and agent.poll() is None:
            os.killpg(agent.pid, signal.SIGKILL)
            agent.wait()
        wl.stop()
        if u.failures and os.path.exists(log):
            with open(log, errors="replace") as f:
                print("---- agent log (tail) ----\n" + "".join(f.readlines()[-80:]))
    print("load average at end: %s; total %.0f s" % (open("/proc/loadavg").read().split()[:3], time.time() - t0))
    if u.failures:
        print("kept for a look: %s" % tmp)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    u.finish()


if __name__ == "__main__":
    main()
