"""Fault: the upload server is unreachable, then back; and a SIGHUP reload
that changes the upload settings (docs/upload.md).

  down   a real HTTPS studio on loopback is stopped before the agent starts
         and started again (same port) three sessions later. The agent logs
         that the server is unreachable and spools each profile (log lines
         naming the server and the profile), keeps writing local files,
         and once the server is back delivers every session exactly once.
  reload the YAML is rewritten to point at a second studio with another
         token and service, then SIGHUP: the next sessions go to the new
         server with the new credentials and no more to the old one; a
         second reload with upload.enabled: false stops uploads (local
         files go on); a third turns them on again.
"""
import glob
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faultutil as fu  # noqa: E402
import pputil as u  # noqa: E402
import studio_server  # noqa: E402

if not shutil.which("openssl"):
    u.skip("openssl not installed (needed for the test certificate)")
plugin = os.path.join(u.PLUGIN_DIR, "example.so")
if not os.path.exists(plugin):
    u.skip("example plugin not built: " + plugin)
plugins = u.plugin_dir_with(plugin)

work = u.tempdir("ppupfault-")
a = studio_server.Studio(os.path.join(work), token="tok-A", service="svcA")
os.mkdir(os.path.join(work, "b"))
b = studio_server.Studio(os.path.join(work, "b"), token="tok-B", service="svcB")
spool = os.path.join(work, "spool")


def config(studio, enabled=True):
    return ("upload:\n  enabled: %s\n  server_host: %s\n  token: %s\n  service_name: %s\n"
            "  server_ca: %s\n  spool_dir: %s\n  timeout_s: 2\n  connect_timeout_s: 1\n"
            "  retries: 1\n  retry_backoff_ms: 200\n  send_logs: false\n"
            "example:\n  mode: states\n" % ("true" if enabled else "false", studio.url,
                                            studio.token, studio.service, studio.cert, spool))


def spooled():
    return sorted(glob.glob(os.path.join(spool, "*.json.gz")))


a.stop()  # down before the agent starts
sleeper = u.spawn(["sleep", "600"])
out = u.tempdir("ppout-")
agent = None
try:
    agent = fu.Agent(out, plugins, config(a), "--pids", str(sleeper.pid), duration=2)
    # --- down for three sessions ---
    u.check(agent.wait_sessions(3, timeout=60), "three sessions while the server is down")
    u.check(agent.wait_log("kept in the spool"), "a failed upload is spooled")
    log = agent.log()
    u.check("server %s not reachable" % a.url in log, "a log line names the unreachable server")
    u.check(len(fu.cols(out)) >= 3, "local files are written all the same (%d)" % len(fu.cols(out)))
    u.check(len(spooled()) >= 2, "profiles held in the spool (%d)" % len(spooled()))
    a.start()
    ok = a.wait(lambda: len(a.committed) >= len(fu.cols(out)) - 1 and not spooled(), 60)
    u.check(ok, "server back: the spool is delivered (%d delivered, %d sessions)"
            % (len(a.committed), len(fu.cols(out))))
    u.check(agent.wait_log("spooled profile"), "delivery of spooled profiles is logged")

    # --- reload: another server, token and service ---
    with open(agent.config, "w") as f:
        f.write(config(b))
    n_a = len(a.committed)
    agent.proc.send_signal(signal.SIGHUP)
    u.check(agent.wait_log("upload after reload: studio %s" % b.url), "reload names the new server")
    a_at_reload = len(a.committed)
    u.check(b.wait(lambda: len(b.committed) >= 2, 40), "sessions after the reload reach the new "
            "server (%d)" % len(b.committed))
    time.sleep(1)
    u.check(len(a.committed) <= a_at_reload + 1 and a_at_reload >= n_a,
            "and no longer the old one (%d then %d)" % (a_at_reload, len(a.committed)))
    u.check(not b.errors, "with the new token and service name (%s)" % b.errors[:2])

    # --- reload: upload off, then on again ---
    with open(agent.config, "w") as f:
        f.write(config(b, enabled=False))
    agent.proc.send_signal(signal.SIGHUP)
    u.check(agent.wait_log("upload after reload: off"), "reload turning upload off is logged")
    n_b, n_cols = len(b.committed), len(fu.cols(out))
    deadline = time.time() + 30
    while time.time() < deadline and len(fu.cols(out)) < n_cols + 2:
        time.sleep(0.2)
    u.check(len(fu.cols(out)) >= n_cols + 2, "local files go on with upload off")
    u.check(len(b.committed) <= n_b + 1, "no uploads while off (%d then %d)"
            % (n_b, len(b.committed)))
    with open(agent.config, "w") as f:
        f.write(config(b))
    agent.proc.send_signal(signal.SIGHUP)
    n_b = len(b.committed)
    u.check(b.wait(lambda: len(b.committed) >= n_b + 1, 40), "upload on again after a reload")
    u.check(agent.alive(), "the agent never died")
    rc = agent.stop()
    u.check(rc == 0, "agent exit 0 (got %s)" % rc)

    ids = a.ids() + b.ids()
    u.check(len(ids) == len(set(ids)), "no profile delivered twice (%d deliveries)" % len(ids))
    u.check(not a.errors and not b.errors, "no protocol errors (%s)" % (a.errors + b.errors)[:3])
    log = agent.log()
    u.check("tok-A" not in log and "tok-B" not in log, "tokens never logged")
finally:
    if agent:
        agent.kill()
    u.kill(sleeper)
    for s in (a, b):
        try:
            s.stop()
        except Exception:  # already stopped
            pass
u.finish()
