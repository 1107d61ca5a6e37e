"""Log shipping to the studio's /api/v1/logs and the Pyroscope /ingest push,
both against the loopback HTTPS server of studio_server.py.

- logs: gzipped JSON batches with batch_id, metadata (run_id, version,
  service, hostname), lost_logs_count and records (severity, timestamp,
  text.message...), X-Token / X-Application-Name headers; no token inside;
  --dont-send-logs and GPROFILER_DONT_SEND_LOGS=1 turn it off;
- pyroscope: name "<service>.cpu{hostname=..,runtime=..}", from/until,
  format=folded with folded lines whose counts add up to the session's
  .col; format=pprof sends a gzip-able pprof body.
"""
import glob
import gzip
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pputil  # noqa: E402
from pputil import check  # noqa: E402

if not shutil.which("openssl"):
    pputil.skip("openssl not installed")
import studio_server  # noqa: E402

work = pputil.tempdir("pplogs-")
studio = studio_server.Studio(work)


def run(*extra, env=None, upload=True):
    out = pputil.tempdir()
    up = ["-u", "--token", studio.token, "--service-name", studio.service] if upload else ["--service-name", "svc"]
    cmd = pputil.agent_cmd(out, pputil.PLUGIN_DIR, *up, "--server-host", studio.url,
                           "--api-server", studio.url, "--server-ca", studio.cert,
                           "--spool-dir", os.path.join(work, "spool"), "--example-mode", "states",
                           *extra, duration=1)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    return p, out


# ---- logs -----------------------------------------------------------------
p, _ = run()
check(p.returncode == 0 and len(studio.logs) >= 1, "log batch shipped (%d)" % len(studio.logs))
b = studio.logs[0] if studio.logs else {}
md = b.get("metadata", {})
check(re.fullmatch(r"[0-9a-f]{32}", b.get("batch_id", "")) is not None and "lost_logs_count" in b,
      "batch_id and lost_logs_count")
check(md.get("service_name") == studio.service and md.get("hostname") and md.get("run_id")
      and md.get("gprofiler_version"), "batch metadata")
recs = b.get("logs", [])
check(recs and all(r["severity"] in (3, 4, 5, 6) and isinstance(r["timestamp"], int)
                   and "message" in r["text"] and "cycle_id" in r["text"]["extra"] for r in recs),
      "records: severity, epoch ms, text.message, extra.cycle_id (%d records)" % len(recs))
allrecs = [r for x in studio.logs for r in x.get("logs", [])]
check(any(r["text"]["message"].startswith("session 1:") for r in allrecs),
      "the session summary is in the shipped log (final batch at shutdown)")
check(studio.token not in str(studio.logs), "no token in shipped logs")
check(not studio.errors, "log request headers (%s)" % studio.errors[:3])
n = len(studio.logs)
run("--dont-send-logs")
check(len(studio.logs) == n, "--dont-send-logs: nothing shipped")
run(env=dict(os.environ, GPROFILER_DONT_SEND_LOGS="1"))
check(len(studio.logs) == n, "GPROFILER_DONT_SEND_LOGS=1: nothing shipped")

# ---- pyroscope (without the studio upload) -------------------------------
p, out = run("--pyroscope-url", studio.url, upload=False)
check(p.returncode == 0 and studio.pyroscope, "pushed to /ingest (%s)" % p.stderr[-300:])
_, stacks = pputil.parse_col(glob.glob(os.path.join(out, "profile_*.col"))[0])
total = 0
ok_names = True
for q, body, ctype in studio.pyroscope:
    name = q["name"][0]
    ok_names &= bool(re.fullmatch(r"svc\.cpu\{hostname=[^,{}]+(,container=[^,{}]+)?,runtime=[a-z]+\}", name))
    ok_names &= q["format"] == ["folded"] and q["from"][0] <= q["until"][0] and q["spyName"] == ["polyprof"]
    for line in body.decode().splitlines():
        total += int(line.rsplit(" ", 1)[1])
check(ok_names, "app name, labels, from/until, format=folded (%s)" % studio.pyroscope[0][0]["name"])
check(total == sum(c for _, c in stacks), "folded counts add up to the session (%d)" % total)
yaml = os.path.join(work, "pprof.yaml")
with open(yaml, "w") as f:
    f.write("upload:\n  pyroscope_format: pprof\n")
studio.pyroscope.clear()
cmd_extra = ["--pyroscope-url", studio.url, "--config", yaml]
p, out = run(*cmd_extra, upload=False)
check(len(studio.pyroscope) == 1 and studio.pyroscope[0][0]["format"] == ["pprof"]
      and len(studio.pyroscope[0][1]) > 20, "format=pprof: one push with a protobuf body")
pputil.finish()
