"""The agent's own files, plugins and secrets on a host where someone else
planted things (docs/security.md).

Each case runs the real agent (example plugin, 1 s sessions) or its
convert/diff/upload commands and checks that no host file outside is
written, that the error names the culprit and why, and that nothing
already collected is lost:
  - convert and diff with a symlink planted at OUT and at OUT.tmp;
  - an output directory with symlinks planted at the link names and the
    old fixed temp names, plus a crash-left temp file of ours;
  - symlinks planted at the pid file and the log file;
  - a world-writable output directory;
  - a world-writable plugin directory, a group-writable worker_path;
  - a token file readable by others, http:// with a token (and the
    explicit --insecure-http opt-in);
  - a spool holding a crash-left temp file and a cut-off profile next to a
    good one: the good one is uploaded, the cut-off one never is.
"""
import glob
import gzip
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pputil as u  # noqa: E402
from pputil import check  # noqa: E402

EXAMPLE = os.path.join(u.PLUGIN_DIR, "example.so")
WORKER = os.path.join(u.BUILD, "polyprof-worker")
EMPTY = os.path.join(u.SRC, "tests", "integration", "empty.yaml")
if not os.path.exists(EXAMPLE):
    u.skip("example plugin not built: " + EXAMPLE)
if not shutil.which("openssl"):
    u.skip("openssl not installed (needed for the test studio's certificate)")
import studio_server  # noqa: E402

work = u.tempdir("pphostile-")
VICTIM_TEXT = "host file, must stay as it is\n"


def victim(name):
    """A stand-in for a host file root must never overwrite."""
    path = os.path.join(work, name)
    with open(path, "w") as f:
        f.write(VICTIM_TEXT)
    return path


def untouched(path):
    with open(path) as f:
        return f.read() == VICTIM_TEXT


def cli(*args, env=None):
    return subprocess.run([u.AGENT, *args], capture_output=True, text=True, timeout=60, env=env)


def agent(out, *extra, plugins=None, duration=1):
    cmd = u.agent_cmd(out, plugins or u.plugin_dir_with(EXAMPLE), "--example-mode", "states",
                      "--pids", str(os.getpid()), *extra, duration=duration)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120), cmd


def log_text(cmd):
    try:
        with open(cmd[cmd.index("--log-file") + 1]) as f:
            return f.read()
    except OSError:
        return ""


# ---- convert and diff: symlinks at OUT and OUT.tmp ------------------------
col = os.path.join(work, "in.col")
with open(col, "w") as f:
    f.write('# {}\n0;;python3;main (app.py:1)_[p];work (app.py:2)_[p] 10')
for cmd, name in ((["convert", col, "--to", "html"], "conv.html"), (["diff", col, col], "diff.html")):
    out = os.path.join(work, name)
    v1, v2 = victim(name + ".victim1"), victim(name + ".victim2")
    os.symlink(v1, out + ".tmp")
    os.symlink(v2, out)
    p = cli(*cmd, "-o", out, "--config", EMPTY)
    check(p.returncode == 0, "%s with symlinks planted at OUT and OUT.tmp succeeds (%s)"
          % (cmd[0], p.stderr.strip()[:200]))
    check(untouched(v1) and untouched(v2), "%s wrote through neither planted symlink" % cmd[0])
    check(not os.path.islink(out) and "<html" in open(out).read().lower(),
          "%s replaced the symlink at OUT by its own file" % cmd[0])
    check(os.path.islink(out + ".tmp"), "%s left the planted OUT.tmp alone" % cmd[0])
    left = [n for n in os.listdir(work) if n.startswith(".pp-tmp-")]
    check(not left, "%s left no temp file (%s)" % (cmd[0], left))

# ---- output directory: planted links, crash leftovers ---------------------
out = u.tempdir("ppout-")
vlink, vtmp, vhtml = victim("out.victim1"), victim("out.victim2"), victim("out.victim3")
os.symlink(vlink, os.path.join(out, "last_profile.col"))
os.symlink(vtmp, os.path.join(out, "last_profile.col.tmp"))
os.symlink(vhtml, os.path.join(out, "last_flamegraph.html.tmp"))
stale = os.path.join(out, ".pp-tmp-profile_x.col.0123456789abcdef")
with open(stale, "w") as f:
    f.write("half a profile")
os.utime(stale, (time.time() - 3600, time.time() - 3600))
p, cmd = agent(out)
check(p.returncode == 0, "agent with planted links in its output directory exits 0 (%s)" % p.stderr[-300:])
check(untouched(vlink) and untouched(vtmp) and untouched(vhtml),
      "no planted symlink in the output directory was written through")
cols = glob.glob(os.path.join(out, "profile_*.col"))
check(len(cols) == 1 and os.path.realpath(os.path.join(out, "last_profile.col")) == cols[0],
      "the session's profile is written and last_profile.col points at it")
check(not os.path.exists(stale), "a temp file a crash left in the output directory is swept")
check("removed 1 temporary file" in log_text(cmd), "the sweep is logged")

# ---- pid file and log file: planted symlinks -------------------------------
out = u.tempdir("ppout-")
cmd = u.agent_cmd(out, u.plugin_dir_with(EXAMPLE), "--example-mode", "states", "--pids", str(os.getpid()),
                  duration=1)
pidf, logf = cmd[cmd.index("--pid-file") + 1], cmd[cmd.index("--log-file") + 1]
vpid, vlog = victim("pid.victim"), victim("log.victim")
os.symlink(vlog, logf)
os.symlink(vpid, pidf)
p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
check(p.returncode != 0 and ("cannot open pid file %s: not a regular file" % pidf) in p.stderr,
      "a symlink at the pid file is refused, naming it (%s)" % p.stderr.strip()[-200:])
check(untouched(vpid) and untouched(vlog), "neither the pid file's nor the log file's link was written through")
os.unlink(pidf)
p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
check(("cannot open log file %s: not a regular file" % logf) in p.stderr, "the log file's refusal names it")
check(p.returncode == 0 and untouched(vlog) and glob.glob(os.path.join(out, "profile_*.col")),
      "a symlink at the log file: the agent runs and logs elsewhere, the link's target untouched (%s)"
      % p.stderr.strip()[-200:])

# ---- output directory writable by others ----------------------------------
loose = u.tempdir("ppout-")
os.chmod(loose, 0o777)
p, cmd = agent(loose)
msg = p.stderr + log_text(cmd)
check(p.returncode != 0, "a world-writable output directory is refused (rc %d)" % p.returncode)
check(("output directory %s is writable by everyone" % loose) in msg,
      "the refusal names the directory and why (%s)" % msg.strip()[-300:])
check(os.listdir(loose) == [], "nothing is written into it")

# ---- plugin directory and worker binary -----------------------------------
plugins = u.plugin_dir_with(EXAMPLE)
os.chmod(plugins, 0o777)
out = u.tempdir("ppout-")
p, cmd = agent(out, plugins=plugins)
msg = p.stderr + log_text(cmd)
check(p.returncode != 0, "a world-writable plugin directory is refused (rc %d)" % p.returncode)
check(("plugin directory %s refused: %s is writable by everyone" % (plugins, plugins)) in msg,
      "the refusal names the plugin directory and why (%s)" % msg.strip()[-300:])
check(not glob.glob(os.path.join(out, "profile_*")), "no plugin of it ran, no profile written")

wdir = u.tempdir("ppworker-")
os.chmod(wdir, 0o755)
worker = os.path.join(wdir, "polyprof-worker")
shutil.copy(WORKER, worker)
os.chmod(worker, 0o775)
conf = os.path.join(wdir, "worker.yaml")
with open(conf, "w") as f:
    f.write("plugins:\n  worker_path: %s\n" % worker)
out = u.tempdir("ppout-")
p, cmd = agent(out, "--config", conf)
msg = p.stderr + log_text(cmd)
check(("plugins.worker_path %s: %s is writable by its group" % (worker, worker)) in msg,
      "a group-writable worker_path is refused, naming it and why (%s)" % msg.strip()[-300:])
cols = glob.glob(os.path.join(out, "profile_*.col"))
header, _ = u.parse_col(cols[0]) if cols else ({}, [])
stats = (header or {}).get("polyprof", {}).get("example", {})
check(stats.get("samples") == 0 and "writable by its group" in stats.get("status", ""),
      "no plugin ran from the refused worker, and the profile says why (%s)" % stats)

# ---- secrets --------------------------------------------------------------
TOKEN = "tok-hostile-5150"
tokfile = os.path.join(work, "token")
with open(tokfile, "w") as f:
    f.write(TOKEN + "\n")
os.chmod(tokfile, 0o644)
out = u.tempdir("ppout-")
p, cmd = agent(out, "-u", "--service-name", "s", "--server-host", "https://127.0.0.1:9",
               "--token-file", tokfile)
check(p.returncode == 2 and ("--token-file %s: readable by everyone" % tokfile) in p.stderr,
      "a token file readable by others is refused, naming it (%s)" % p.stderr.strip()[-200:])
check(TOKEN not in p.stderr + p.stdout + log_text(cmd), "the refusal does not print the token")
check(not os.listdir(out), "nothing is written after the refusal")

os.chmod(tokfile, 0o600)
p, cmd = agent(out, "-u", "--service-name", "s", "--server-host", "http://127.0.0.1:9",
               "--token-file", tokfile)
check(p.returncode == 2 and "refusing to send the API token in clear text to http://127.0.0.1:9"
      in p.stderr and "--insecure-http" in p.stderr,
      "http:// with a token is refused with the opt-in named (%s)" % p.stderr.strip()[-200:])
p, cmd = agent(out, "-u", "--service-name", "s", "--server-host", "http://127.0.0.1:9",
               "--token-file", tokfile, "--insecure-http", "--spool-dir", os.path.join(work, "sp0"),
               "--server-upload-timeout", "1", "--dont-send-logs")
check("refusing" not in p.stderr, "--insecure-http lets a plain http:// server be used")
check(TOKEN not in p.stderr + log_text(cmd), "the token is never logged")

p, cmd = agent(out, "-u", "--service-name", "s", "--server-host", "https://127.0.0.1:9",
               "--token", TOKEN, "--spool-dir", os.path.join(work, "sp1"),
               "--server-upload-timeout", "1", "--dont-send-logs")
check("prefer --token-file" in p.stderr + log_text(cmd), "--token works but warns to use --token-file")

# ---- spool: crash leftovers and a cut-off profile --------------------------
studio = studio_server.Studio(work, token=TOKEN)
spool = os.path.join(work, "spool")
os.makedirs(spool, mode=0o700)
col_text = '# {"start_time": "2026-11-22T01:00:00"}\n0;;python3;spooled_marker_%s_[p] 5'
good_body = gzip.compress(('{"start_time": "2026-11-22T01:00:00", "end_time": "2026-11-22T01:01:00", '
                           '"hostname": "h", "profile": "%s", "cpu_avg": 1, "mem_avg": 1, '
                           '"spawn_time": "2026-11-22T01:00:00", "gpid": ""}'
                           % (col_text % "good").replace("\n", "\\n").replace('"', '\\"')).encode())
cut_body = gzip.compress(('{"profile": "%s", "pad": "%s"}'
                          % ((col_text % "cut").replace("\n", "\\n").replace('"', '\\"'),
                             os.urandom(2000).hex())).encode())
with open(os.path.join(spool, "0000000001-000001-aaaaaaaa.json.gz"), "wb") as f:
    f.write(cut_body[:len(cut_body) // 2])
with open(os.path.join(spool, "0000000002-000002-bbbbbbbb.json.gz"), "wb") as f:
    f.write(good_body)
for name in (".tmp-0000000003-000003-cccccccc.json.gz", ".pp-tmp-spool.00112233aabbccdd"):
    with open(os.path.join(spool, name), "wb") as f:
        f.write(os.urandom(5000))
out = u.tempdir("ppout-")
p, cmd = agent(out, "-u", "--service-name", "svc", "--server-host", studio.url, "--server-ca", studio.cert,
               "--token-file", tokfile, "--spool-dir", spool, "--dont-send-logs", duration=2)
studio.wait(lambda: any("spooled_marker_good" in c["body"].get("profile", "") for c in studio.committed), 20)
log = log_text(cmd)
profiles = [c["body"].get("profile", "") for c in studio.committed]
check(p.returncode == 0, "agent with a dirty spool exits 0 (%s)" % p.stderr[-300:])
check(any("spooled_marker_good" in x for x in profiles), "the good spooled profile is uploaded")
check(not any("spooled_marker_cut" in x for x in profiles), "the cut-off spooled profile is never uploaded")
check("0000000001-000001-aaaaaaaa.json.gz is incomplete" in log,
      "the cut-off file is named in the log (%s)" % [x for x in log.splitlines() if "spool" in x][:3])
check("removed 2 incomplete file(s)" in log, "the crash-left temp files are removed and logged")
check(not [n for n in os.listdir(spool) if n.startswith(".")], "no temp file is left in the spool")
check(not studio.errors, "every request was well-formed, the token only in its header (%s)" % studio.errors[:2])
check(len(glob.glob(os.path.join(out, "profile_*.col"))) == 1, "the session's own profile is kept locally")
studio.stop()

u.finish()
