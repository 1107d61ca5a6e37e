"""The php plugin against a real php-fpm pool.

A static pool of 4 workers on loopback serves requests from 4 client
threads; each request spends ~20 ms in RequestHandler::handle. Workers are
recycled every 25 requests (pm.max_requests), so most of the session's
workers come and go during the session. Mid-session the test also kills
every worker (the master replaces them) and only then switches the app to
phase2_entry: phase2 frames can only come from workers born mid-session.
The .col must show the handler stacks under php-fpm from several workers,
including the replacements, and the idle master must not break anything.
"""
import os
import re
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import phputil as pu  # noqa: E402
import fcgi  # noqa: E402

pu.require_php()
fpm = pu.find_fpm()
if not fpm:
    u.skip("php-fpm not installed (Debian: php-fpm)")
plugins = u.plugin_dir_with(pu.PHP_SO)
app = os.path.join(pu.WORKLOADS, "fpm_app.php")

s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
d = u.tempdir("ppfpm-")
conf = os.path.join(d, "fpm.conf")
WORKERS, MAX_REQ = 4, 200
with open(conf, "w") as f:
    f.write("[global]\npid = %s/fpm.pid\nerror_log = %s/fpm.log\ndaemonize = no\n"
            "[pp]\nuser = root\ngroup = root\nlisten = 127.0.0.1:%d\npm = static\npm.max_children = %d\n"
            "pm.max_requests = %d\nclear_env = no\n" % (d, d, port, WORKERS, MAX_REQ))
marker = os.path.join(d, "phase2")
env = dict(os.environ, PP_PHASE2=marker)
master = subprocess.Popen([fpm, "-R", "-F", "-n", "-y", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          env=env)


def workers():
    """pids whose parent is the FPM master."""
    out = []
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                with open("/proc/%s/stat" % e) as f:
                    st = f.read()
                if int(st[st.rindex(")") + 2:].split()[1]) == master.pid:
                    out.append(int(e))
            except (OSError, ValueError):
                pass
    return out
stop = threading.Event()
served = {}
errors = []


def client():
    while not stop.is_set():
        try:
            body = fcgi.request("127.0.0.1", port, app)
            if body.strip().isdigit():
                served[int(body)] = served.get(int(body), 0) + 1
        except OSError as e:
            errors.append(str(e))
            time.sleep(0.05)


threads = []
try:
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            fcgi.request("127.0.0.1", port, app, timeout=2)
            break
        except OSError:
            time.sleep(0.1)
    else:
        u.skip("php-fpm did not start (see %s/fpm.log)" % d)
    for _ in range(WORKERS):
        t = threading.Thread(target=client, daemon=True)
        t.start()
        threads.append(t)
    out = u.tempdir("ppout-")
    cmd = u.agent_cmd(out, plugins, "-v", "--php-mode", "phpspy", "-f", "100", duration=12)
    logf = cmd[cmd.index("--log-file") + 1]
    agent = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while time.time() < deadline and agent.poll() is None:
        if os.path.exists(logf) and "sampling PHP stacks" in open(logf, errors="replace").read():
            break
        time.sleep(0.1)
    time.sleep(3)
    old = workers()
    for p in old:
        os.kill(p, 9)
    deadline = time.time() + 5
    while time.time() < deadline and any(os.path.exists("/proc/%d" % p) for p in old):
        time.sleep(0.05)
    open(marker, "w").close()
    try:
        so, se = agent.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        agent.kill()
        so, se = agent.communicate()
    stop.set()
    r = subprocess.CompletedProcess(cmd, agent.returncode, so, se)
    with open(logf, encoding="utf-8", errors="replace") as f:
        log = f.read()
    u.check(r.returncode == 0, "agent exits 0 (got %d; stderr: %s)" % (r.returncode, r.stderr[-1500:]))
    header, stacks = u.parse_col(os.path.join(out, "last_profile.col"))
    ps = [(f, c) for f, c in pu.php_stacks(stacks) if f[2].startswith("php-fpm")]
    total = sum(c for _, c in ps)
    h = "RequestHandler::handle %s:11_[php]" % app
    want1 = ["<main> %s:30_[php]" % app, "fpm_entry %s:18_[php]" % app, h]
    want2 = ["<main> %s:28_[php]" % app, "phase2_entry %s:23_[php]" % app, h]
    first = sum(c for f, c in ps if f[3:6] == want1)
    second = sum(c for f, c in ps if f[3:6] == want2)
    u.check(first > 0, "php-fpm stacks <main>;fpm_entry;RequestHandler::handle with lines (%d of %d): %s"
            % (first, total, [f[3:] for f, _ in ps][:2]))
    u.check(second > 0, "replacement workers (born mid-session) sampled: %d phase2_entry samples" % second)
    u.check(first + second >= 0.8 * max(total, 1),
            "most PHP samples are in the handler (%d of %d)" % (first + second, total))
    attached = set(int(p) for p in re.findall(r"pid (\d+): PHP 8\.\d", log))
    u.check(len(served) > WORKERS, "workers were recycled during the session (%d distinct pids served)" % len(served))
    both = attached & set(served)
    u.check(len(both) > WORKERS, "the agent attached to %d serving workers (> %d: recycled ones too)" % (len(both), WORKERS))
    u.check(len(old) == WORKERS, "%d workers killed mid-session" % len(old))
    u.check(not any("Profiling error" in x for f, _ in stacks for x in f if f[2].startswith("php-fpm")),
            "no profiling errors for php-fpm processes")
finally:
    stop.set()
    for t in threads:
        t.join(timeout=15)
    master.terminate()
    try:
        master.wait(timeout=10)
    except subprocess.TimeoutExpired:
        master.kill()
u.finish()
