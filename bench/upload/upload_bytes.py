#!/usr/bin/env python3
"""Bytes uploaded per host per minute at the defaults.

Runs the built agent with its default profiling settings (60 s sessions,
11 Hz, col + html, upload with log shipping on) against the loopback HTTPS
studio of tests/integration/studio_server.py for N sessions, and counts what
reached the server: request bodies (gzipped, as sent) plus request line and
headers, split into profiles and log batches. Prints one line per figure.

  bench/upload/upload_bytes.py [--sessions N] [--plugin-dir DIR] [--workloads] [-- extra agent flags]

--workloads starts one workload per runtime first (bench/overhead/workloads.py,
the overhead benchmark's set) and stops them at the end.

Without a perf/runtime plugin set, pass the plugins you have (the example
plugin needs --example-mode states).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
import studio_server  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--sessions", type=int, default=3)
ap.add_argument("--build", default=os.environ.get("PP_BUILD_DIR", os.path.join(SRC, "build")))
ap.add_argument("--plugin-dir", default=None)
ap.add_argument("--workloads", action="store_true", help="run one workload per runtime meanwhile")
ap.add_argument("extra", nargs="*")
a = ap.parse_args()
work = tempfile.mkdtemp(prefix="ppbench-upload-")
studio = studio_server.Studio(work)
sizes = {"profiles": [], "logs": []}
orig = studio.committed.append


def header_bytes(c):
    q = "&".join("%s=%s" % (k, v[0]) for k, v in c["query"].items())
    return len("POST /api/v2/profiles?%s HTTP/1.1\r\n" % q) + sum(len(k) + len(v) + 4 for k, v in c["headers"].items()) + 2


out = os.path.join(work, "out")
cmd = [os.path.join(a.build, "polyprof"), "-c", "-o", out, "--plugin-dir", a.plugin_dir or os.path.join(a.build, "plugins"),
       "--pid-file", os.path.join(work, "pid"), "--log-file", os.path.join(work, "log"),
       "--config", os.path.join(SRC, "tests", "integration", "empty.yaml"),
       "-u", "--server-host", studio.url, "--api-server", studio.url, "--server-ca", studio.cert,
       "--token", studio.token, "--service-name", studio.service, "--spool-dir", os.path.join(work, "spool")] + a.extra
wl = None
if a.workloads:
    sys.path.insert(0, os.path.join(SRC, "bench", "overhead"))
    import workloads  # noqa: E402
    wl = workloads.Workloads(os.path.abspath(a.build)).start()
    print("workloads: %s" % ", ".join(sorted(wl.pids())))
t0 = time.time()
p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    studio.wait(lambda: len(studio.committed) >= a.sessions, a.sessions * 60 + 120)
finally:
    elapsed = time.time() - t0
    p.terminate()
    p.wait(timeout=60)
    if wl:
        wl.stop()
prof = studio.committed[:a.sessions]
body = sum(c["size"] for c in prof)
hdr = sum(header_bytes(c) for c in prof)
col = sum(len(c["body"]["profile"].encode()) for c in prof)
logs = len(studio.logs)
log_bytes = studio.log_bytes + 350 * logs  # gzipped bodies + ~350 B of request line/headers
minutes = sum(60 for _ in prof) / 60.0
print("host: %d CPUs, %s; sessions: %d x 60 s; agent flags: %s" % (os.cpu_count(), os.uname().release, len(prof), " ".join(a.extra)))
print("profile uploads: %d bytes/min (gzip JSON bodies %d + headers %d over %d sessions; uncompressed .col %d bytes/min)"
      % ((body + hdr) / minutes, body, hdr, len(prof), col / minutes))
print("log shipping: ~%d bytes/min (%d batches: gzipped bodies + ~350 B headers each)" % (log_bytes / minutes, logs))
print("total uploaded per host: ~%d bytes/min" % ((body + hdr + log_bytes) / minutes))
