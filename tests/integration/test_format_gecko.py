#!/usr/bin/env python3
"""`--to gecko`: the Firefox Profiler's processed format, checked against the
format's rules (tests/integration/gecko_schema.py: every table column as
long as its `length`, every index in range, prefixes before their stacks,
categories and subcategories declared, marker times ordered) and for
content: per-thread self samples by function equal the .col's counts, one
category per runtime, Java tiers as subcategories, a GC marker on the
thread whose stacks ran the collector.
"""
import collections
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gecko_schema  # noqa: E402
import pputil  # noqa: E402
from pputil import check  # noqa: E402

EMPTY = os.path.join(pputil.SRC, "tests", "integration", "empty.yaml")
COL = """# {"start_time": "2026-11-22T01:00:00", "end_time": "2026-11-22T01:01:00"}
0;;python3;main (app.py:10)_[p];compute (calc.py:5)_[p] 300
0;;python3;main (app.py:10)_[p];render (tpl.py:8)_[p] 150
0;;python3;main (app.py:10)_[p];<GC>_[p] 30
0;web;java;Thread.run()V_[0];com.acme.Worker.loop()V_[j] 200
0;;ruby;<main> - app.rb:3_[rb];work - app.rb:7_[rb] 40
0;;swapper;secondary_startup_64_[k];do_idle_[k] 50
"""

work = pputil.tempdir("ppgecko-")
src = os.path.join(work, "in.col")
out = os.path.join(work, "out.json")
with open(src, "w") as f:
    f.write(COL)
p = subprocess.run([pputil.AGENT, "convert", src, "--to", "gecko", "-o", out, "--config", EMPTY],
                   capture_output=True, text=True, timeout=60)
check(p.returncode == 0 and os.path.exists(out), "convert --to gecko (%s)" % p.stderr.strip()[:200])
with open(out) as f:
    prof = json.load(f)
errors = gecko_schema.validate(prof)
check(not errors, "valid processed profile (%s)" % errors[:5])

strings = prof["shared"]["stringArray"]
cats = [c["name"] for c in prof["meta"]["categories"]]
threads = {t["name"]: t for t in prof["threads"]}
check(sorted(threads) == ["java", "python3", "ruby", "swapper"], "one thread per comm (%s)" % sorted(threads))


def self_counts(t):
    """Function name -> self weight, and the category names of the leaves."""
    st, ft, fu = t["stackTable"], t["frameTable"], t["funcTable"]
    counts, leaf_cats = collections.Counter(), {}
    for s, w in zip(t["samples"]["stack"], t["samples"]["weight"]):
        fr = st["frame"][s]
        name = strings[fu["name"][ft["func"][fr]]]
        counts[name] += w
        leaf_cats[name] = (cats[st["category"][s]], st["subcategory"][s])
    return counts, leaf_cats


py, py_cats = self_counts(threads["python3"])
check(py == {"compute": 300, "render": 150, "<GC>": 30},
      "python3 self samples (%s)" % dict(py))
check(py_cats["compute"][0] == "Python" and py_cats["<GC>"][0] == "GC",
      "Python and GC categories (%s)" % py_cats)
jv, jv_cats = self_counts(threads["java"])
check(jv == {"com.acme.Worker.loop()V": 200}, "java self samples (%s)" % dict(jv))
jcat = prof["meta"]["categories"][cats.index("Java")]
check(jv_cats["com.acme.Worker.loop()V"][0] == "Java"
      and jcat["subcategories"][jv_cats["com.acme.Worker.loop()V"][1]] == "JIT",
      "Java JIT frame: Java/JIT (%s)" % jv_cats)
rb, rb_cats = self_counts(threads["ruby"])
check(rb_cats.get("work", ("",))[0] == "Ruby", "Ruby category (%s)" % rb_cats)
_, k_cats = self_counts(threads["swapper"])
check(k_cats["do_idle"][0] == "Kernel", "kernel category (%s)" % k_cats)

m = threads["python3"]["markers"]
check(m["length"] == 1 and strings[m["name"][0]] == "GC" and m["data"][0]["samples"] == 30,
      "GC marker on the thread that collected (%s)" % m)
check(threads["java"]["markers"]["length"] == 0, "no GC marker where no collector ran")
check(prof["meta"]["startTime"] == 1795309200000, "startTime from the .col header (%s)" % prof["meta"]["startTime"])

# a live session of the example plugin: same validity, samples add up to the .col's
sess = pputil.tempdir()
p = pputil.run_agent(sess, pputil.PLUGIN_DIR, "--example-mode", "states", "--output-format", "col,gecko", duration=2)
cols = sorted(f for f in os.listdir(sess) if f.startswith("profile_") and f.endswith(".col"))
geckos = sorted(f for f in os.listdir(sess) if f.startswith("profile_") and f.endswith(".gecko.json"))
check(p.returncode == 0 and cols and len(cols) == len(geckos), "session wrote .col and .gecko.json (%s)" % os.listdir(sess))
if cols and geckos:
    total_col = sum(c for _, c in pputil.parse_col(os.path.join(sess, cols[0]))[1])
    with open(os.path.join(sess, geckos[0])) as f:
        live = json.load(f)
    check(not gecko_schema.validate(live), "live profile valid (%s)" % gecko_schema.validate(live)[:5])
    total = sum(sum(t["samples"]["weight"]) for t in live["threads"])
    check(total == total_col and total > 0, "live sample total %d == .col total %d" % (total, total_col))

# `run --format gecko`: one program, the same writer
rg = os.path.join(work, "run.gecko.json")
p = subprocess.run([pputil.AGENT, "run", "--format", "gecko", "--output", rg, "--plugin-dir", pputil.PLUGIN_DIR,
                    "--example-mode", "states", "--config", EMPTY, "--", "sleep", "1"],
                   capture_output=True, text=True, timeout=60)
check(p.returncode == 0 and os.path.exists(rg), "run --format gecko (%s)" % p.stderr.strip()[-200:])
if os.path.exists(rg):
    with open(rg) as f:
        one = json.load(f)
    check(not gecko_schema.validate(one) and any(t["name"] == "sleep" for t in one["threads"]),
          "run's profile valid, with the program's thread (%s)" % [t["name"] for t in one["threads"]])
pputil.finish()
