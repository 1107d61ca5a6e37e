"""Upload to a loopback HTTPS studio: protocol, retries, spool, restart.

Runs the real agent (example plugin, 1-2 s sessions) against
studio_server.Studio and checks:
  - headers, query parameters, gzip and JSON body fields; gpid threading;
  - TLS is verified by default (self-signed server refused without
    --server-ca), --insecure-skip-verify works;
  - failure injection (503, slow reply past the timeout, connection refused,
    server down for three sessions then back) ends with every session's
    profile delivered exactly once;
  - the spool cap is respected (oldest dropped with a warning);
  - a restarted agent resends the spool;
  - the token never shows in the agent's command line (POLYPROF_TOKEN,
    --token-file), its log, or the uploaded profile.
"""
import datetime
import glob
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pputil  # noqa: E402
from pputil import check  # noqa: E402
import studio_server  # noqa: E402

if not shutil.which("openssl"):
    pputil.skip("openssl not installed (needed for the test certificate)")

TOKEN = "tok-123"
work = pputil.tempdir("ppupload-")
studio = studio_server.Studio(work, token=TOKEN)
if not os.path.exists(os.path.join(pputil.PLUGIN_DIR, "example.so")):
    pputil.skip("example plugin not built")


def agent(out, spool, *extra, duration=2, token_args=None, env=None):
    cmd = pputil.agent_cmd(out, pputil.PLUGIN_DIR, "-u", "--server-host", studio.url,
                           "--service-name", "svc", "--server-ca", studio.cert,
                           "--spool-dir", spool, "--server-upload-timeout", "2",
                           "--dont-send-logs", "--example-mode", "states", *extra,
                           duration=duration)
    cmd += token_args if token_args is not None else ["--token", TOKEN]
    return cmd


def log_of(cmd):
    return cmd[cmd.index("--log-file") + 1]


def cols(out):
    return sorted(glob.glob(os.path.join(out, "profile_*.col")))


def spool_files(spool):
    return sorted(glob.glob(os.path.join(spool, "*.json.gz")))


# ---- 1. protocol, gpid, token hygiene -------------------------------------
out, spool = pputil.tempdir(), os.path.join(work, "spool1")
tokfile = os.path.join(work, "token")
with open(tokfile, "w") as f:
    f.write(TOKEN + "\n")
os.chmod(tokfile, 0o600)
cmd = agent(out, spool, "-c", duration=1, token_args=["--token-file", tokfile])
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
ok = studio.wait(lambda: len(studio.committed) >= 2, 30)
with open("/proc/%d/cmdline" % p.pid, "rb") as f:
    check(TOKEN.encode() not in f.read(), "--token-file keeps the token out of the command line")
p.send_signal(signal.SIGTERM)
p.communicate(timeout=30)
check(ok and p.returncode == 0, "two sessions uploaded, agent exit 0")
check(not studio.errors, "requests carry the studio's headers, query and body (%s)" % studio.errors[:3])
c = studio.committed
check(c[0]["body"]["gpid"] == "" and c[1]["body"]["gpid"] == c[0]["gpid"],
      "gpid of a reply is sent with the next upload")
b = c[0]["body"]
check(b["start_time"] <= b["end_time"] and b["spawn_time"] <= b["start_time"], "session times in the body")
local = {os.path.basename(x)[8:-4] for x in cols(out)}
check(all(x["body"]["end_time"] in local for x in c), "every uploaded profile is a local .col too")
with open(cols(out)[0], encoding="utf-8") as f:
    first = f.read()
check(any(x["body"]["profile"] == first for x in c), "the body's profile is the .col text")
with open(log_of(cmd), encoding="utf-8") as f:
    logtext = f.read()
check(TOKEN not in logtext, "token not in the agent log")
check(TOKEN not in first, "token not in the .col")

# ---- 2. TLS verified by default -------------------------------------------
out, spool = pputil.tempdir(), os.path.join(work, "spool2")
n0 = len(studio.committed)
cmd = agent(out, spool, duration=1)
cmd.remove("--server-ca")
cmd.remove(studio.cert)
p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=dict(os.environ))
check(len(studio.committed) == n0 and len(spool_files(spool)) == 1,
      "self-signed server refused without --server-ca; profile spooled")
cmd = agent(out, spool, "--insecure-skip-verify", duration=1)
cmd[cmd.index("--server-ca"):cmd.index("--server-ca") + 2] = []
p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
check(len(studio.committed) == n0 + 2 and not spool_files(spool),
      "--insecure-skip-verify: new profile and the spooled one delivered")

def same_session(end_time, stem):
    """A session ended in the same second as the one before gets the next
    second in its file name (core/session_output.c); its body keeps the real
    end time."""
    fmt = "%Y-%m-%dT%H:%M:%S"
    try:
        d = (datetime.datetime.strptime(stem, fmt) - datetime.datetime.strptime(end_time[:19], fmt))
    except ValueError:
        return False
    return d.total_seconds() in (0, 1)


# ---- 3. failure injection: every profile exactly once ---------------------
out, spool = pputil.tempdir(), os.path.join(work, "spool3")
studio.committed.clear()
studio.script[:] = [503, "ok", ("slow", 3.5), "ok"]
env = dict(os.environ, POLYPROF_TOKEN=TOKEN)
cmd = agent(out, spool, "-c", duration=2, token_args=[], env=env)
cmd[cmd.index("--config"):cmd.index("--config")] = []
p = subprocess.Popen(cmd + ["--config", os.path.join(pputil.SRC, "tests", "integration", "upload_fast.yaml")],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
with open("/proc/%d/cmdline" % p.pid, "rb") as f:
    check(TOKEN.encode() not in f.read(), "POLYPROF_TOKEN keeps the token out of the command line")
check(studio.wait(lambda: len(studio.committed) >= 2, 40), "503 and a slow reply were retried")
studio.stop()
n_before = len(cols(out))
deadline = time.time() + 40
while time.time() < deadline and len(cols(out)) < n_before + 3:
    time.sleep(0.2)
time.sleep(2.5)  # the third session's retries run out
held = len(spool_files(spool))
check(held >= 3, "server down for three sessions: %d profiles in the spool" % held)
studio.start()
ok = studio.wait(lambda: len(studio.committed) >= len(cols(out)) and not spool_files(spool), 40)
p.send_signal(signal.SIGTERM)
_, err = p.communicate(timeout=40)
ids = studio.ids()
check(p.returncode == 0, "agent exit 0")
check(len(ids) == len(set(ids)), "no profile delivered twice (%d deliveries)" % len(ids))
ends = sorted(x["body"]["end_time"] for x in studio.committed)
local = sorted(os.path.basename(x)[8:-4] for x in cols(out))
check(len(ends) == len(local) and all(same_session(e, f) for e, f in zip(ends, local)),
      "every session delivered exactly once (%d sessions, %d delivered)" % (len(local), len(ends)))
check(not spool_files(spool), "spool empty at the end")
check(len(studio.late) >= 1 and studio.late[0] in ids, "the timed-out upload was resent and delivered")
check(not studio.errors, "no protocol errors (%s)" % studio.errors[:3])

# ---- 4. spool cap, then an agent restart resends the spool ----------------
out, spool = pputil.tempdir(), os.path.join(work, "spool4")
studio.stop()
# room for about three profiles of this host (their size varies with its load)
biggest = max(x["size"] for x in studio.committed)
cap = int(biggest * 3.5)
cmd = agent(out, spool, "-c", "--spool-max-size", str(cap), duration=1)
cmd += ["--config", os.path.join(pputil.SRC, "tests", "integration", "upload_fast.yaml")]
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
deadline = time.time() + 60
while time.time() < deadline and len(cols(out)) < 8:
    time.sleep(0.2)
p.send_signal(signal.SIGTERM)
p.communicate(timeout=40)
sizes = [os.path.getsize(x) for x in spool_files(spool)]
check(sum(sizes) <= cap, "spool within its cap (%d bytes in %d files, cap %d)" % (sum(sizes), len(sizes), cap))
check(0 < len(sizes) < len(cols(out)), "oldest profiles dropped (%d sessions, %d kept)" % (len(cols(out)), len(sizes)))
with open(log_of(cmd), encoding="utf-8") as f:
    check("dropped the" in f.read(), "dropping from the spool is logged as a warning")
st = os.stat(spool)
check(st.st_mode & 0o777 == 0o700 and st.st_uid == os.geteuid(), "spool directory is 0700 and ours")
kept = len(sizes)
studio.start()
studio.committed.clear()
cmd = agent(out, spool, duration=1)
p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
check(studio.wait(lambda: len(studio.committed) == kept + 1, 10) and not spool_files(spool),
      "restarted agent resent the %d spooled profiles and its own" % kept)

pputil.finish()
