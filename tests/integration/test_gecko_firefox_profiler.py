"""Gecko output loaded by the Firefox Profiler's own code: its command-line
front end (@firefox-devtools/profiler-cli, installed by install-deps.sh
test) bundles the profiler's import, upgrade and call-tree code and runs
under Node.js 24. `polyprof run --format gecko` of a Python program with a
known 3:1 split and a multi-runtime `convert --to gecko` are loaded in it;
the profiler's own function table must give the split within 5 points and
every thread's functions with the .col's self counts, by their names alone:
the .col's runtime layouts ("name (file:line)", "name - file:line") come
apart into name, file and line as in a live profile."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cmdutil  # noqa: E402
import pputil  # noqa: E402
from pputil import check  # noqa: E402

CLI = os.environ.get("PP_PROFILER_CLI", "/opt/polyprof-test/firefox-profiler-cli/node_modules/"
                     "@firefox-devtools/profiler-cli/dist/profiler-cli.js")
# it asks for Node.js 24 (install-deps.sh test puts one there)
NODE = os.environ.get("PP_NODE24", "/opt/polyprof-test/node-24/bin/node")
if not os.path.exists(pputil.AGENT):
    pputil.skip("agent not built: " + pputil.AGENT)
if not os.path.exists(NODE) or not os.path.exists(CLI):
    pputil.skip("Node.js 24 or the Firefox Profiler's CLI not installed (%s, %s; scripts/install-deps.sh test)"
                % (NODE, CLI))
work = pputil.tempdir("ppgecko-ff-")
env = dict(os.environ, HOME=work, NO_COLOR="1")  # its sessions live under $HOME


def pq(*args):
    r = subprocess.run([NODE, CLI] + list(args) + ["--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=120, env=env)
    if r.returncode != 0:
        print("profiler-cli", " ".join(args), "failed:", r.stderr[-600:], r.stdout[-300:])
        return None
    start = r.stdout.find("\n{") + 1 if not r.stdout.startswith("{") else 0  # load says hello first
    try:
        return json.loads(r.stdout[start:])
    except ValueError:
        print("profiler-cli", " ".join(args), "printed no JSON:", r.stdout[-300:])
        return None


def loaded(path):
    """threads {name: {function: self samples}} as the profiler computes them."""
    out = {}
    try:
        if pq("load", path) is None:
            return None
        info = pq("profile", "info", "--all")
        for proc in (info or {}).get("processes", []):
            for t in proc.get("threads", []):
                handle = t.get("threadHandle")
                if not handle or pq("thread", "select", handle) is None:
                    continue
                fns = pq("thread", "functions", "--limit", "0") or {}
                out[t.get("name")] = {f["name"]: (f["selfSamples"], f["totalSamples"])
                                      for f in fns.get("functions", [])}
    finally:
        subprocess.run([NODE, CLI, "stop"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, timeout=60)
    return out


# run --format gecko: the profiler's own totals give the split
gecko = os.path.join(work, "run.json")
r = cmdutil.polyprof("run", "--format", "gecko", "--output", gecko, "--", sys.executable,
                     os.path.join(cmdutil.WORKLOADS, "python", "workload.py"), "split", "3")
check(r.returncode == 0 and os.path.exists(gecko), "run --format gecko wrote the file (%s)" % r.stderr[-200:])
threads = loaded(gecko)
print("run:", json.dumps(threads)[:600])
check(threads is not None and threads, "the Firefox Profiler loads run's gecko file")
fns = {}
for t in (threads or {}).values():
    for name, (s, tot) in t.items():
        fns[name] = fns.get(name, 0) + tot
heavy, light = fns.get("three_parts", 0), fns.get("one_part", 0)
share = 100.0 * heavy / (heavy + light) if heavy + light else 0
print("three_parts %d one_part %d: %.1f%%" % (heavy, light, share))
check(abs(share - 75) <= 5, "the profiler's call tree: three_parts:one_part 3:1 within 5 points (%.1f%%)" % share)

# several runtimes and threads: each thread's self counts as in the .col
COL = """# {"start_time": "2026-11-22T01:00:00", "end_time": "2026-11-22T01:01:00"}
0;;python3;main (app.py:10)_[p];compute (calc.py:5)_[p] 300
0;;python3;main (app.py:10)_[p];render (tpl.py:8)_[p] 150
0;web;java;Thread.run()V_[0];com.acme.Worker.loop()V_[j] 200
0;;ruby;<main> - app.rb:3_[rb];work - app.rb:7_[rb] 40
0;;node;main (/srv/app.js:1);handle (/srv/app.js:20) 60
0;;swapper;secondary_startup_64_[k];do_idle_[k] 50
"""
col = os.path.join(work, "in.col")
with open(col, "w") as f:
    f.write(COL)
out = os.path.join(work, "convert.json")
p = subprocess.run([pputil.AGENT, "convert", col, "--to", "gecko", "-o", out, "--config", cmdutil.EMPTY_CONFIG],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
check(p.returncode == 0, "convert --to gecko (%s)" % p.stderr[-200:])
threads = loaded(out) or {}
print("convert:", json.dumps(threads)[:900])
want = {"python3": {"compute": 300, "render": 150}, "java": {"com.acme.Worker.loop()V": 200},
        "ruby": {"work": 40}, "node": {"handle": 60}, "swapper": {"do_idle": 50}}
for thread, selfs in want.items():
    got = threads.get(thread, {})
    for fn, n in selfs.items():
        s = [v[0] for k, v in got.items() if k == fn]
        check(s == [n], "thread %s: %s self %d in the profiler, by its name alone (got %s)"
              % (thread, fn, n, s))
# the .col's "name (file:line)" and "name - file:line" come apart as in a live
# profile: the function's name, its file, the frame's line
with open(out) as f:
    doc = json.load(f)
located = {}
for t in doc.get("threads", []):
    strings = t.get("stringArray") or doc.get("shared", {}).get("stringArray", [])
    ft, fr = t["funcTable"], t["frameTable"]
    for func, line in zip(fr["func"], fr["line"]):
        file_id = ft["fileName"][func]
        located[(t["name"], strings[ft["name"][func]])] = (
            strings[file_id] if file_id is not None else None, line)
for key, where in {("python3", "compute"): ("calc.py", 5), ("python3", "main"): ("app.py", 10),
                   ("ruby", "work"): ("app.rb", 7), ("ruby", "<main>"): ("app.rb", 3),
                   ("node", "handle"): ("/srv/app.js", 20)}.items():
    check(located.get(key) == where, "convert: %s %s is in %s at line %d (got %s)"
          % (key[0], key[1], where[0], where[1], located.get(key)))
pputil.finish()
