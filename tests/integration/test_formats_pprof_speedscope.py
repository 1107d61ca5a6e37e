"""pprof and speedscope outputs checked by the real tools.

- pprof: `go tool pprof -top` (Debian golang-go) lists the expected
  functions with the expected flat counts, `-lines` keeps file:line, for a
  converted synthetic .col and for a live agent session (compared with that
  session's .col).
- speedscope: validated against speedscope's published JSON schema
  (dist/release/file-format-schema.json of the npm package `speedscope`)
  with `ajv`, both installed with npm into a temp dir.
"""
import collections
import glob
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pputil  # noqa: E402
from pputil import check  # noqa: E402

SPEEDSCOPE_VERSION = "1.20.0"
AJV_VERSION = "8.17.1"
work = pputil.tempdir("ppformats-")
EMPTY = os.path.join(pputil.SRC, "tests", "integration", "empty.yaml")

COL = """# {"start_time": "2026-11-22T01:00:00", "end_time": "2026-11-22T01:01:00"}
0;;python3;main (app.py:10)_[p];compute (calc.py:5)_[p] 300
0;;python3;main (app.py:10)_[p];render (tpl.py:8)_[p] 150
0;web;java;Thread.run()V_[0];com.acme.Worker.loop()V_[j] 200
0;;swapper;secondary_startup_64_[k];do_idle_[k] 50
1;;python3;main (app.py:10)_[p];compute (calc.py:5)_[p];PyNumber_Add_[pn] 25"""
EXPECT_FLAT = {"compute": 300, "com.acme.Worker.loop()V": 200, "render": 150, "do_idle": 50,
               "PyNumber_Add": 25}


def convert(src, to, out):
    p = subprocess.run([pputil.AGENT, "convert", src, "--to", to, "-o", out, "--config", EMPTY],
                       capture_output=True, text=True, timeout=60)
    return p.returncode == 0 and os.path.exists(out), p.stderr


def pprof_top(path, *extra):
    p = subprocess.run(["go", "tool", "pprof", "-top", "-nodecount=100000", "-nodefraction=0", "-edgefraction=0", "-sample_index=samples", *extra, path],
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, HOME=work, GOCACHE=os.path.join(work, "gocache")))
    flat = {}
    for line in p.stdout.splitlines():
        m = re.match(r"\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+(\d+)\s+[\d.]+%\s+(.*)$", line)
        if m:
            if int(m.group(1)):  # callers show with 0 flat
                flat[m.group(3).strip()] = int(m.group(1))
    return p.returncode, flat, p.stdout + p.stderr


src = os.path.join(work, "in.col")
with open(src, "w") as f:
    f.write(COL)

# ---- pprof ----------------------------------------------------------------
if shutil.which("go"):
    pb = os.path.join(work, "out.pb.gz")
    ok, err = convert(src, "pprof", pb)
    check(ok, "convert --to pprof (%s)" % err.strip()[:200])
    with open(pb, "rb") as f:
        check(f.read(2) == b"\x1f\x8b", "pprof file is gzipped")
    rc, flat, text = pprof_top(pb)
    check(rc == 0, "go tool pprof reads it")
    check(flat == EXPECT_FLAT, "go tool pprof -top: expected functions and counts (%s)" % flat)
    rc, flat, text = pprof_top(pb, "-lines")
    check(flat.get("compute calc.py:5") == 300 and flat.get("render tpl.py:8") == 150,
          "Python frames keep file and line (%s)" % sorted(flat)[:6])
    rc, flat, text = pprof_top(pb, "-tagfocus=comm=java")
    check(flat == {"com.acme.Worker.loop()V": 200}, "comm label filters samples (%s)" % flat)

    # a live session: pprof totals and leaves match the .col of the same session
    out = pputil.tempdir()
    p = pputil.run_agent(out, pputil.PLUGIN_DIR, "--example-mode", "states", "--output-format", "col,pprof,speedscope", duration=2)
    cols = glob.glob(os.path.join(out, "profile_*.col"))
    pbs = glob.glob(os.path.join(out, "profile_*.pb.gz"))
    check(p.returncode == 0 and len(cols) == 1 and len(pbs) == 1, "agent wrote .col and .pb.gz")
    if cols and pbs:
        _, stacks = pputil.parse_col(cols[0])
        leaves = collections.Counter()
        for frames, count in stacks:
            leaves[re.sub(r"_\[[a-z0-9]+\]$", "", frames[-1])] += count
        rc, flat, text = pprof_top(pbs[0])
        check(rc == 0 and sum(flat.values()) == sum(leaves.values()),
              "live pprof total = .col total (%d vs %d)" % (sum(flat.values()), sum(leaves.values())))
        check(all(flat.get(k) == v for k, v in leaves.items() if not k.startswith("(")),
              "live pprof flat counts = .col leaf counts")
else:
    print("SKIPPED (part): go not installed, pprof not validated")

# ---- speedscope -----------------------------------------------------------
ss = os.path.join(work, "out.speedscope.json")
ok, err = convert(src, "speedscope", ss)
check(ok, "convert --to speedscope")
npm = shutil.which("npm")
node = shutil.which("node")
if npm and node:
    nm = os.path.join(work, "npm")
    os.makedirs(nm)
    p = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", nm,
                        "speedscope@" + SPEEDSCOPE_VERSION, "ajv@" + AJV_VERSION],
                       capture_output=True, text=True, timeout=300)
    schema = os.path.join(nm, "node_modules", "speedscope", "dist", "release", "file-format-schema.json")
    if p.returncode != 0 or not os.path.exists(schema):
        check(False, "npm install speedscope ajv: " + p.stderr[-300:])
    else:
        validator = os.path.join(work, "validate.js")
        with open(validator, "w") as f:
            f.write("""
const Ajv = require(%r);
const fs = require("fs");
const schema = JSON.parse(fs.readFileSync(process.argv[2]));
delete schema["$schema"];  // draft-07 meta schema is implied
const validate = new Ajv({allErrors: true, strict: false}).compile(schema);
let bad = 0;
for (const f of process.argv.slice(3)) {
  const ok = validate(JSON.parse(fs.readFileSync(f)));
  console.log((ok ? "valid " : "INVALID ") + f + (ok ? "" : " " + JSON.stringify(validate.errors.slice(0, 5))));
  if (!ok) bad++;
}
process.exit(bad ? 1 : 0);
""" % os.path.join(nm, "node_modules", "ajv"))
        live = glob.glob(os.path.join(out, "profile_*.speedscope.json")) if shutil.which("go") else []
        bad = os.path.join(work, "bad.json")
        with open(bad, "w") as f:
            f.write('{"shared": {"frames": []}, "profiles": [{"type": "sampled"}]}')
        p = subprocess.run([node, validator, schema, ss] + live, capture_output=True, text=True, timeout=120)
        check(p.returncode == 0, "speedscope files valid against the published schema: " + p.stdout.strip()[:300])
        p = subprocess.run([node, validator, schema, bad], capture_output=True, text=True, timeout=120)
        check(p.returncode != 0, "the validator rejects a broken file")
else:
    print("SKIPPED (part): npm/node not installed, speedscope schema not checked")

import json  # noqa: E402
with open(ss) as f:
    doc = json.load(f)
names = [x["name"] for x in doc["shared"]["frames"]]
prof = {x["name"]: x for x in doc["profiles"]}
check(len(doc["profiles"]) == 4, "one speedscope profile per process (%s)" % list(prof))
py = [x for n, x in prof.items() if n.startswith("python3")]
check(py and sum(py[0]["weights"]) + sum(py[-1]["weights"]) >= 450, "python3 samples weighted")
check(all(len(x["samples"]) == len(x["weights"]) for x in doc["profiles"]), "samples and weights line up")
check("compute" in names and not any(n.endswith("_[p]") for n in names),
      "frame names without .col suffixes")
compute = [x for x in doc["shared"]["frames"] if x["name"] == "compute"]
check(compute and compute[0].get("file") == "calc.py" and compute[0].get("line") == 5,
      "a converted Python frame has its file and line apart (%s)" % compute[:1])
pputil.finish()
