"""OTLP profiles export (--otlp-endpoint) against a loopback receiver that
decodes every request with protoc and the vendored opentelemetry-proto
files (third_party/opentelemetry-proto, v1.11.0):

- the request is an ExportProfilesServiceRequest protoc reads with no
  unknown field, POSTed gzipped as application/x-protobuf to
  /v1development/profiles;
- what a collector's profiles receiver relies on: every dictionary table
  present with its zero entry first, every index in range, a sample type,
  a period, a time within the session, a 16-byte profile id, the resource
  attributes host.name and service.name;
- the samples add up to the session's .col and carry the same processes;
- a collector answering 503 is retried; one that is down gets the request
  spooled (upload.spool_dir/otlp), and the next run delivers it;
- a partial_success reply is logged with the collector's message.
"""
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

if not shutil.which("protoc"):
    pputil.skip("protoc not installed (Debian package protobuf-compiler)")
import otlp_receiver  # noqa: E402

FAST = os.path.join(pputil.SRC, "tests", "integration", "upload_fast.yaml")
work = pputil.tempdir("ppotlp-")
rx = otlp_receiver.Receiver()


def run(endpoint, spool, *extra, duration=1):
    out = pputil.tempdir()
    cmd = pputil.agent_cmd(out, pputil.PLUGIN_DIR, "--otlp-endpoint", endpoint, "--spool-dir", spool,
                           "--service-name", "svc", "--example-mode", "states", "-f", "97",
                           "--config", FAST, "--server-upload-timeout", "3", *extra,
                           duration=duration)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    log = cmd[cmd.index("--log-file") + 1]
    with open(log, errors="replace") as f:
        return p, out, f.read()


def one(msg, name):
    v = msg.get(name, [])
    return v[0] if v else {}


def attrs_of(resource):
    return {a["key"][0]: one(a, "value").get("string_value", [None])[0]
            for a in resource.get("attributes", [])}


# ---- 1. one session, decoded and checked field by field ------------------
spool = os.path.join(work, "spool1")
t0 = time.time()
p, out, log = run(rx.url + "/", spool)
t1 = time.time()
check(p.returncode == 0 and len(rx.requests) == 1, "one export per session (%d, rc %d)%s"
      % (len(rx.requests), p.returncode, "" if rx.requests else ": " + log[-400:]))
path, headers, raw = rx.requests[0] if rx.requests else ("", {}, b"")
check(path == otlp_receiver.PATH and headers.get("Content-Type") == "application/x-protobuf"
      and headers.get("Content-Encoding") == "gzip", "POST %s, protobuf, gzip" % path)
try:
    text = otlp_receiver.protoc_decode(raw)
    ok = True
except ValueError as e:
    text, ok = "", False
    print(e)
check(ok, "protoc decodes the request with the official .proto files")
unknown = [ln for ln in text.splitlines() if ln.strip()[:1].isdigit()]
check(not unknown, "no field unknown to the .proto files (%s)" % unknown[:3])
req = otlp_receiver.parse_text(text)
d = one(req, "dictionary")
strings = d.get("string_table", [])
tables = {n: d.get(n, []) for n in ("mapping_table", "location_table", "function_table",
                                    "attribute_table", "stack_table", "link_table")}
check(strings[:1] == [""], "string_table[0] is \"\"")
check(all(t and (not t[0] or n == "link_table") for n, t in tables.items()),
      "every dictionary table present with the zero entry first (%s)"
      % {n: len(t) for n, t in tables.items()})
link0 = one(d, "link_table")
check(len(link0.get("trace_id", [b""])[0]) == 16 and len(link0.get("span_id", [b""])[0]) == 8,
      "link_table[0] has zero ids of 16 and 8 bytes")


def in_range(v, table):
    return isinstance(v, int) and 0 <= v < len(table)


bad = []
for i, loc in enumerate(tables["location_table"][1:], 1):
    for ln in loc.get("lines", []):
        if not in_range(ln.get("function_index", [0])[0], tables["function_table"]):
            bad.append("location %d" % i)
    for a in loc.get("attribute_indices", []):
        if not in_range(a, tables["attribute_table"]):
            bad.append("location %d attribute" % i)
for i, fn in enumerate(tables["function_table"][1:], 1):
    if not any(fn.get(k) for k in ("name_strindex", "system_name_strindex", "filename_strindex")):
        bad.append("function %d has no name" % i)
    for k in ("name_strindex", "system_name_strindex", "filename_strindex"):
        if not in_range(fn.get(k, [0])[0], strings):
            bad.append("function %d %s" % (i, k))
for i, st in enumerate(tables["stack_table"][1:], 1):
    if not st.get("location_indices") or not all(in_range(x, tables["location_table"])
                                                 for x in st["location_indices"]):
        bad.append("stack %d" % i)
for i, a in enumerate(tables["attribute_table"][1:], 1):
    if not in_range(a.get("key_strindex", [0])[0], strings) or not a.get("value"):
        bad.append("attribute %d" % i)
check(not bad, "every dictionary index in range (%s)" % bad[:5])

rps = req.get("resource_profiles", [])
check(len(rps) >= 1, "resource_profiles present (%d)" % len(rps))
_, col_stacks = pputil.parse_col(glob.glob(os.path.join(out, "profile_*.col"))[0])
col_total = sum(c for _, c in col_stacks)
# ":<pid>" is the .col's stand-in for a comm never seen: OTLP leaves it out
col_comms = {fr[2] for fr, _ in col_stacks if len(fr) > 2 and not fr[2].startswith(":")}
total, comms, bad, pids = 0, set(), [], set()
for rp in rps:
    ra = attrs_of(one(rp, "resource"))
    if not ra.get("host.name") or ra.get("service.name") != "svc":
        bad.append("resource %s" % ra)
    for sp in rp.get("scope_profiles", []):
        if one(sp, "scope").get("name") != ["polyprof"]:
            bad.append("scope")
        for prof in sp.get("profiles", []):
            stype, ptype = one(prof, "sample_type"), one(prof, "period_type")
            if [strings[stype.get("type_strindex", [0])[0]], strings[stype.get("unit_strindex", [0])[0]]] != ["samples", "count"]:
                bad.append("sample_type")
            if [strings[ptype.get("type_strindex", [0])[0]], strings[ptype.get("unit_strindex", [0])[0]]] != ["cpu", "nanoseconds"] \
                    or prof.get("period") != [1000000000 // 97]:
                bad.append("period")
            t = prof.get("time_unix_nano", [0])[0] / 1e9
            if not (t0 - 2 <= t <= t1) or not prof.get("duration_nano"):
                bad.append("time %s" % t)
            pid_ = prof.get("profile_id", [b""])[0]
            if len(pid_) != 16 or pid_ == b"\0" * 16:
                bad.append("profile_id")
            for s in prof.get("samples", []):
                if not in_range(s.get("stack_index", [0])[0], tables["stack_table"]) or \
                        not all(in_range(a, tables["attribute_table"]) for a in s.get("attribute_indices", [])):
                    bad.append("sample index")
                    continue
                total += sum(s.get("values", []))
                for a in s.get("attribute_indices", []):
                    kv = tables["attribute_table"][a]
                    key = strings[kv["key_strindex"][0]]
                    val = one(kv, "value")
                    if key == "process.executable.name":
                        comms.add(val.get("string_value", [""])[0])
                    elif key == "process.pid":
                        pids.add(val.get("int_value", [0])[0])
check(not bad, "resource, scope, sample type, period, time and profile id (%s)" % bad[:5])
check(total == col_total and total > 0, "samples add up to the session's .col (%d / %d)" % (total, col_total))
check(comms == col_comms and len(pids) > 1, "the same processes as the .col (%d comms, %d pids; %s / %s)"
      % (len(comms), len(pids), sorted(comms - col_comms)[:4], sorted(col_comms - comms)[:4]))
names = {strings[f.get("name_strindex", [0])[0]] for f in tables["function_table"][1:]}
col_frames = {x for fr, _ in col_stacks for x in fr[3:]}
check(any(n and n in col_frames for n in names), "function names are the .col's frames")

# ---- 2. 503 twice: retried within the session, then delivered -----------
n = len(rx.requests)
rx.fail_next = 2
out2 = pputil.tempdir()
cmd = pputil.agent_cmd(out2, pputil.PLUGIN_DIR, "--otlp-endpoint", rx.url, "--spool-dir",
                       os.path.join(work, "spool2"), "--example-mode", "states", "-c",
                       "--config", FAST, duration=1)
agent = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
deadline = time.time() + 30
while time.time() < deadline and len(rx.requests) == n:
    time.sleep(0.1)
agent.send_signal(signal.SIGTERM)
agent.wait(timeout=30)
with open(cmd[cmd.index("--log-file") + 1], errors="replace") as f:
    log = f.read()
check(len(rx.requests) > n and "failed (attempt 2/3): HTTP 503" in log
      and not glob.glob(os.path.join(work, "spool2", "otlp", "*")),
      "two 503 answers retried with backoff, then delivered (%d)" % (len(rx.requests) - n))

# ---- 3. collector down: spooled; next run sends both ----------------------
spool = os.path.join(work, "spool3")
down = "http://127.0.0.1:%d" % rx.httpd.server_address[1]
rx2 = otlp_receiver.Receiver()
port = rx2.httpd.server_address[1]
rx2.stop()  # nothing listens there now
p, out, log = run("http://127.0.0.1:%d" % port, spool)
held = glob.glob(os.path.join(spool, "otlp", "*"))
check(len(held) == 1 and "kept in the spool" in log, "collector down: the export is spooled (%s)" % held)
st = os.stat(os.path.join(spool, "otlp")) if held else None
check(st is not None and st.st_mode & 0o777 == 0o700, "OTLP spool directory is private")
n = len(rx.requests)
p, out, log = run(down, spool)
check(len(rx.requests) == n + 2 and not glob.glob(os.path.join(spool, "otlp", "*")),
      "next run delivered its own and the spooled export (%d)" % (len(rx.requests) - n))
if len(rx.requests) == n + 2:
    try:
        otlp_receiver.protoc_decode(rx.requests[-1][2])
        otlp_receiver.protoc_decode(rx.requests[-2][2])
        ok = True
    except ValueError:
        ok = False
    check(ok, "the spooled export decodes too")

# ---- 4. partial success is reported ---------------------------------------
rx.reply = otlp_receiver.partial_success(1, "profile too old")
p, out, log = run(rx.url, os.path.join(work, "spool4"))
check("rejected 1 profile(s): profile too old" in log, "partial_success logged with its message")
rx.reply = b"\x0a\xff\x01"  # a length past the end
p, out, log = run(rx.url, os.path.join(work, "spool4"))
check(p.returncode == 0 and "unreadable reply" in log, "a malformed reply is reported, not trusted")
rx.stop()
pputil.finish()
