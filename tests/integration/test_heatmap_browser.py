#!/usr/bin/env python3
"""`--to heatmap` in a real headless Chromium (tests/integration/html/cdp.py).

A .col naming real source files is converted; the page must list the files
by total samples, open a file from the index with per-line self/total counts
over its text (sampled lines tinted), jump to a line from a
#file=...&line=N link, keep hostile source and paths as text, leave out a
file that is not world-readable (with the reason), and make no network
request.
"""
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "html"))
import cdp  # noqa: E402
import pputil  # noqa: E402
from pputil import check  # noqa: E402

chromium = cdp.find_chromium()
if not chromium:
    pputil.skip("no Chromium (install the Debian package 'chromium' or set PP_CHROMIUM)")
work = pputil.tempdir("ppheat-")
src = os.path.join(work, "src")
os.makedirs(src)
with open(os.path.join(src, "calc.py"), "w") as f:
    f.write("import os\n\ndef compute(n):\n    s = 0\n    for i in range(n):\n        s += i * i\n"
            "    return s\n\ndef render():\n    return '</script><script>window.__pwned=1</script>'\n")
with open(os.path.join(src, "private.py"), "w") as f:
    f.write("TOPSECRET = 1\n")
os.chmod(os.path.join(src, "private.py"), 0o600)
evil = os.path.join(src, '<img src=x onerror="window.__pwned=2">.py')
col = f"""# {{"start_time": "2026-11-22T01:00:00"}}
0;;python3;main ({src}/app.py:10)_[p];compute ({src}/calc.py:6)_[p] 300
0;;python3;main ({src}/app.py:10)_[p];compute ({src}/calc.py:6)_[p];PyNumber_Add_[pn] 50
0;;python3;main ({src}/app.py:10)_[p];render ({src}/calc.py:10)_[p] 100
0;;python3;main ({src}/private.py:1)_[p] 7
0;;python3;main ({evil}:2)_[p] 3
0;;ruby;<main> - {src}/app.rb:3_[rb];work - {src}/app.rb:7_[rb] 40
"""
with open(os.path.join(work, "in.col"), "w") as f:
    f.write(col)
out = os.path.join(work, "heat.html")
p = subprocess.run([pputil.AGENT, "convert", os.path.join(work, "in.col"), "--to", "heatmap", "-o", out,
                    "--config", os.path.join(HERE, "empty.yaml")], capture_output=True, text=True, timeout=60)
check(p.returncode == 0 and os.path.exists(out), "convert --to heatmap (%s)" % p.stderr.strip()[:200])
with open(out) as f:
    page_text = f.read()
check("TOPSECRET" not in page_text, "a file that is not world-readable is not embedded")

browser = cdp.Browser(chromium)
try:
    page = browser.new_page()
    page.navigate("file://" + out)
    rows = page.eval("[...document.querySelectorAll('#index tbody tr')].map(r => [...r.cells].map(c => c.textContent))")
    check(rows and sorted(r[0] for r in rows[:2]) == [src + "/app.py", src + "/calc.py"]
          and [r[3].strip() for r in rows[:2]] == ["90.0%", "90.0%"], "index: highest total first (%s)" % rows[:2])
    check(any(r[0] == src + "/app.py" and r[1] == "0" and r[2] == "450" for r in rows), "index: app.py self 0 total 450")
    check(any(r[0] == src + "/calc.py" and r[1] == "450" and r[2] == "450" for r in rows),
          "index: calc.py self 450 total 450")
    page.eval("[...document.querySelectorAll('#index a')].find(a => a.textContent.endsWith('/calc.py')).click()")
    check(page.wait_for("!document.getElementById('source').hidden", 5), "clicking a file opens it")
    line6 = page.eval("[...document.getElementById('L6').cells].map(c => c.textContent)")
    check(line6 == ["6", "350", "350", "        s += i * i"], "line 6: self 350, total 350, its text (%s)" % line6)
    tinted = page.eval("[...document.querySelectorAll('#source tbody tr')].filter(r => r.style.background).map(r => r.id)")
    check(tinted == ["L6", "L10"], "exactly the sampled lines are tinted (%s)" % tinted)
    check(page.eval("document.getElementById('L10').cells[3].textContent").startswith("    return '</script>"),
          "hostile source stays text")
    page.eval("location.hash = '#file=' + encodeURIComponent(%r) + '&line=10'" % (src + "/calc.py"))
    check(page.wait_for("document.querySelector('#source tr.target') && document.querySelector('#source tr.target').id === 'L10'", 5),
          "a #file=...&line= link marks that line")
    os.makedirs(os.path.join(pputil.BUILD, "tests", "html_browser"), exist_ok=True)
    page.screenshot(os.path.join(pputil.BUILD, "tests", "html_browser", "heatmap_file.png"))
    page.eval("location.hash = '#file=' + encodeURIComponent(%r)" % (src + "/private.py"))
    why = page.eval("document.getElementById('why').textContent")
    check("not world-readable" in why, "the private file shows why its text is absent (%s)" % why)
    page.eval("location.hash = '#file=' + encodeURIComponent(%r)" % evil)
    check(page.eval("document.title").startswith(evil), "a hostile path is a title, as text")
    page.eval("location.hash = ''")
    check(page.eval("document.querySelectorAll('#index img').length") == 0 and page.eval("window.__pwned") is None,
          "no markup from paths or sources ran")
    reqs = [e["params"]["request"]["url"] for e in page.events("Network.requestWillBeSent")]
    check(all(u.startswith("file://") for u in reqs), "no network request (%s)" % reqs)
finally:
    browser.close()

# `run --format heatmap` on a real Python program: its hot lines, from the plugin's line numbers
hot = os.path.join(src, "hot.py")
with open(hot, "w") as f:
    f.write("import time\ndef hot():\n    s = 0\n    for i in range(100000):\n        s += i * i\n    return s\n\n"
            "t = time.time()\nwhile time.time() - t < 1.5:\n    hot()\n")
for d in (work, src):
    os.chmod(d, 0o755)
os.chmod(hot, 0o644)
live = os.path.join(work, "live.html")
p = subprocess.run([pputil.AGENT, "run", "--format", "heatmap", "--output", live, "--plugin-dir", pputil.PLUGIN_DIR,
                    "--no-perf", "--config", os.path.join(HERE, "empty.yaml"), "--", sys.executable, hot],
                   capture_output=True, text=True, timeout=60)
check(p.returncode == 0 and os.path.exists(live), "run --format heatmap (%s)" % p.stderr.strip()[-300:])
if os.path.exists(live):
    with open(live) as f:
        m = re.search(r'<script type="application/json" id="data">(.*?)</script>', f.read(), re.S)
    files = {x["path"]: x for x in json.loads(m.group(1))["files"]} if m else {}
    x = files.get(hot)
    lines = {x["lines"][i]: x["lines"][i + 1:i + 3] for i in range(0, len(x["lines"]), 3)} if x else {}
    check(x and x["src"] and x["src"].startswith("import time"), "the program's source is in the page")
    hottest = max(lines, key=lambda n: lines[n][0]) if lines else 0
    check(hottest in (4, 5) and lines.get(10, [0, 0])[1] >= 0.8 * x["total"],
          "the loop lines are hottest, the call line holds the rest as total (%s)" % lines)
pputil.finish()
