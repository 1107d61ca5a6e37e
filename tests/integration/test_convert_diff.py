"""`polyprof convert`, `polyprof diff` and `polyprof upload-file`.

- convert a .col to html / speedscope / pprof / col; the HTML opens in
  headless Chromium (tests/integration/html/cdp.py) and becomes ready with
  no script error and no network request; col -> col keeps every stack;
- diff BASE NEW writes the flame graph viewer in its differential mode,
  opened in Chromium: counts normalised by each side's total samples (a
  function doubling its share is red, a vanished one is still drawn, blue),
  tooltips with base/new counts and the change, search, zoom, icicle, dark,
  process filter; hostile frame names stay text; a directory of sessions
  is summed; `--format table` lists what grew, biggest first;
- upload-file round trip: the .col arrives at the loopback studio byte for
  byte with start/end times taken from its header.
"""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "html"))
import pputil  # noqa: E402
from pputil import check  # noqa: E402

EMPTY = os.path.join(pputil.SRC, "tests", "integration", "empty.yaml")
work = pputil.tempdir("ppconvert-")

BASE = """# {"start_time": "2026-11-22T01:00:00", "end_time": "2026-11-22T01:01:00", "metrics": {"cpu_avg": 12.5, "mem_avg": 40.0}}
0;;python3;main (app.py:10)_[p];compute (calc.py:5)_[p] 300
0;;python3;main (app.py:10)_[p];render (tpl.py:8)_[p] 300
0;;python3;main (app.py:10)_[p];gone (old.py:1)_[p] 400"""
# NEW has twice the samples: normalised, compute goes 30% -> 60%,
# render stays 30%, gone vanishes, fresh appears at ~10%.
NEW = """# {}
0;;python3;main (app.py:10)_[p];compute (calc.py:5)_[p] 1200
0;;python3;main (app.py:10)_[p];render (tpl.py:8)_[p] 600
0;;python3;main (app.py:10)_[p];fresh (new.py:1)_[p] 199
0;;evil;</script><script>window.__pwned=1</script>_[k] 1"""


def run(*args):
    return subprocess.run([pputil.AGENT, *args, "--config", EMPTY], capture_output=True, text=True, timeout=60)


base, new = os.path.join(work, "base.col"), os.path.join(work, "new.col")
with open(base, "w") as f:
    f.write(BASE)
with open(new, "w") as f:
    f.write(NEW)

outs = {}
for to, ext in (("html", ".html"), ("speedscope", ".json"), ("pprof", ".pb.gz"), ("col", ".col")):
    out = os.path.join(work, "conv" + ext)
    p = run("convert", base, "--to", to, "-o", out)
    check(p.returncode == 0 and os.path.getsize(out) > 0, "convert --to %s (%s)" % (to, p.stderr.strip()[:200]))
    outs[to] = out
_, a = pputil.parse_col(base)
_, b = pputil.parse_col(outs["col"])
check(sorted(a) == sorted(b), "convert --to col keeps every stack")
p = run("convert", base)
check(p.returncode == 2, "convert without --to is a usage error")
p = run("convert", os.path.join(work, "missing.col"), "--to", "html")
check(p.returncode == 1 and "missing.col" in p.stderr, "missing input named in the error")

diff = os.path.join(work, "diff.html")
p = run("diff", base, new, "-o", diff)
check(p.returncode == 0 and os.path.exists(diff), "diff writes the page (%s)" % p.stderr.strip()[:200])

sessions = os.path.join(work, "sessions")
os.makedirs(sessions)
for name in ("profile_2026-11-22T01:00:00.col", "profile_2026-11-22T01:01:00.col"):
    with open(os.path.join(sessions, name), "w") as f:
        f.write(BASE)
os.symlink("profile_2026-11-22T01:01:00.col", os.path.join(sessions, "last_profile.col"))
p = run("diff", sessions, new, "-o", os.path.join(work, "dirdiff.html"))
check(p.returncode == 0 and "base 2000 samples" in p.stdout, "a directory of sessions is summed, its last_ link not counted twice (%s)" % p.stdout.strip())
p = run("diff", base, new, "--format", "table")
rows = [ln.split(None, 5) for ln in p.stdout.splitlines() if ln.lstrip()[:1] in ("+", "-") and "%" in ln]
check(p.returncode == 0 and rows and rows[0][0] == "+30.00%" and rows[0][5] == "compute (calc.py:5)_[p]",
      "--format table: compute's +30 points first (%s)" % rows[:2])
check([r[5] for r in rows] == ["compute (calc.py:5)_[p]", "fresh (new.py:1)_[p]", "</script><script>window.__pwned=1</script>_[k]"],
      "only what grew is listed (%s)" % [r[5] for r in rows])
p = run("diff", base, os.path.join(work, "nothing"))
check(p.returncode == 1 and p.stderr.count("\n") == 1 and "nothing" in p.stderr, "a missing side: one line naming it (%r)" % p.stderr)

# ---- in a real browser ----------------------------------------------------
try:
    import cdp  # noqa: E402
    chromium = cdp.find_chromium()
except Exception:  # noqa
    chromium = None
if not chromium:
    print("SKIPPED (part): no Chromium, pages not opened")
else:
    br = cdp.Browser(chromium)
    try:
        page = br.new_page()
        page.navigate("file://" + outs["html"])
        check(page.wait_for("window.polyprof && polyprof.state().ready", 20), "converted HTML becomes ready")
        check(not page.events("Runtime.exceptionThrown"), "converted HTML: no script error")
        page = br.new_page()
        page.navigate("file://" + diff)
        check(page.wait_for("window.polyprof && polyprof.state().ready", 20), "diff page: the flame graph viewer is ready")
        check(not page.events("Runtime.exceptionThrown"), "diff page: no script error")
        reqs = [e["params"]["request"]["url"] for e in page.events("Network.requestWillBeSent")]
        check(all(u.startswith("file:") for u in reqs), "diff page makes no network request")
        d = page.eval("polyprof.diff()")
        check(d and d["baseTotal"] == 1000 and d["newTotal"] == 2000, "diff totals (%s)" % d)
        c, r, g, fr = (page.eval("polyprof.diffOf(%r)" % k) for k in
                       ("compute (calc.py:5)", "render (tpl.py:8)", "gone (old.py:1)", "fresh (new.py:1)"))
        check(c and c["base"] == 300 and c["new"] == 1200 and abs(c["delta"] - 0.30) < 1e-9,
              "normalised by total samples: compute 30%% -> 60%% (%s)" % (c,))
        check(r and abs(r["delta"]) < 1e-9, "render unchanged once normalised (%s)" % (r,))
        check(g and g["new"] == 0 and g["base"] == 400 and g["color"].startswith("hsl(215"),
              "a vanished function is drawn, in blue (%s)" % (g,))
        check(fr and abs(fr["delta"] - 0.0995) < 1e-9 and c["color"].startswith("hsl(0.0"),
              "new and grown functions are red (%s, %s)" % (fr, c))
        rect = page.eval("polyprof.frameRect('compute (calc.py:5)')")
        check(rect is not None, "compute is drawn")
        if rect:
            page.mouse("mouseMoved", rect["x"] + rect["w"] / 2, rect["y"] + 5)
            tip = page.eval("document.getElementById('tip').innerText")
            check("base 300" in tip and "new 1,200" in tip.replace("\u202f", ",") or "new 1200" in tip,
                  "tooltip: base and new counts (%r)" % tip)
            check("+30.00 points" in tip, "tooltip: the change (%r)" % tip)
        res = page.eval("polyprof.search('compute|fresh')")
        check(res["matchedFrames"] == ["compute (calc.py:5)", "fresh (new.py:1)"], "search (%s)" % res["matchedFrames"])
        check(page.eval("polyprof.zoomTo('main (app.py:10)')") and page.eval("polyprof.state().zoom") == "main (app.py:10)", "zoom")
        page.eval("polyprof.setMode('icicle'); polyprof.setTheme('dark')")
        check(page.eval("polyprof.state().mode") == "icicle" and page.eval("polyprof.state().theme") == "dark", "icicle and dark")
        labels = [f["label"] for f in page.eval("polyprof.filters()")]
        check(any("python3" in x for x in labels) and any("evil" in x for x in labels), "process filter lists both sides' processes (%s)" % labels)
        check(page.eval("typeof window.__pwned") == "undefined", "hostile frame name stays text")
        page.screenshot(os.path.join(work, "diff.png"))
    finally:
        br.close()

# ---- upload-file round trip ----------------------------------------------
if shutil.which("openssl"):
    import studio_server  # noqa: E402
    studio = studio_server.Studio(work)
    cmd = [pputil.AGENT, "upload-file", "--file-path", base, "--server-host", studio.url, "--token",
           studio.token, "--service-name", studio.service, "--server-ca", studio.cert,
           "--spool-dir", os.path.join(work, "spool"), "--dont-send-logs", "--config", EMPTY]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and len(studio.committed) == 1, "upload-file delivered (%s)" % p.stderr.strip()[-300:])
    if studio.committed:
        body = studio.committed[0]["body"]
        check(body["profile"] == BASE, "the .col arrives byte for byte")
        check(body["start_time"] == "2026-11-22T01:00:00" and body["end_time"] == "2026-11-22T01:01:00",
              "start/end times from the file's header")
        check(body["cpu_avg"] == 12.5 and body["mem_avg"] == 40.0, "metrics from the file's header")
    check(not studio.errors, "protocol checks (%s)" % studio.errors[:3])
    studio.stop()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    check(p.returncode == 1 and len(os.listdir(os.path.join(work, "spool"))) == 1,
          "upload-file with the server down: exit 1, file kept in the spool")
    p = subprocess.run(cmd[:2] + cmd[4:], capture_output=True, text=True, timeout=60)
    check(p.returncode == 2, "upload-file without --file-path is a usage error")
else:
    print("SKIPPED (part): openssl missing, upload-file not tested")
pputil.finish()
