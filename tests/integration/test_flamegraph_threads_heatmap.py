#!/usr/bin/env python3
"""The flame graph's thread names and its links to the line heatmap, in
headless Chromium (tests/integration/html/cdp.py).

A synthetic profile (tests/tools/pp_html_render) has a process whose
stacks carry thread names: each thread is a level under its process and an
entry of the filter, and filtering to one keeps exactly its samples; a
hostile thread name stays text; the Python plugin's "<thread: NAME>" root
frames are threads the same way. With a heatmap beside the page, a Python
frame's tooltip names its source line and, once zoomed, a link opens the
heatmap (written by `convert --to heatmap` from the same stacks) on that
line.
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "html"))
import cdp  # noqa: E402
import pputil  # noqa: E402
from pputil import check  # noqa: E402

RENDER = os.path.join(os.environ.get("PP_TEST_TOOLS_DIR", os.path.join(pputil.BUILD, "tests", "tools")), "pp_html_render")
chromium = cdp.find_chromium()
if not chromium:
    pputil.skip("no Chromium (install the Debian package 'chromium' or set PP_CHROMIUM)")
if not os.access(RENDER, os.X_OK):
    pputil.skip(RENDER + " not built")
work = pputil.tempdir("ppthreads-")
src = os.path.join(work, "app.py")
with open(src, "w") as f:
    f.write("def main():\n    work()\n\ndef work():\n    x = 1\n    return x\n")
EVIL = "<img src=x onerror=window.__pwned=1>"
# pid;comm;container;appid;frames count -- the first comm of a pid is the process's
STACKS = f"""100;java;;;Thread.run()V_[0];Main.main()V_[j] 10
100;worker-1;;;Thread.run()V_[0];Worker.loop()V_[j] 300
100;worker-2;;;Thread.run()V_[0];Worker.loop()V_[j] 100
100;{EVIL};;;Thread.run()V_[0] 5
200;python3;;;main ({src}:2)_[p];work ({src}:5)_[p] 70
300;python3;;;<thread: MainThread>_[pseudo];serve (srv.py:9)_[p] 40
300;python3;;;<thread: Pool-1>_[pseudo];serve (srv.py:9)_[p] 20
"""
inp = os.path.join(work, "in.txt")
with open(inp, "w") as f:
    f.write(STACKS)
page_path = os.path.join(work, "profile.html")
p = subprocess.run([RENDER, "-o", page_path, "--heatmap", "profile.heatmap.html", inp], capture_output=True, text=True, timeout=60)
check(p.returncode == 0, "render (%s)" % p.stderr.strip()[-200:])
col = os.path.join(work, "in.col")
with open(col, "w") as f:
    f.write(f"0;;python3;main ({src}:2)_[p];work ({src}:5)_[p] 70\n")
p = subprocess.run([pputil.AGENT, "convert", col, "--to", "heatmap", "-o", os.path.join(work, "profile.heatmap.html"),
                    "--config", os.path.join(HERE, "empty.yaml")], capture_output=True, text=True, timeout=60)
check(p.returncode == 0, "the heatmap beside it (%s)" % p.stderr.strip()[-200:])

browser = cdp.Browser(chromium)
try:
    page = browser.new_page()
    page.navigate("file://" + page_path)
    check(page.wait_for("window.polyprof && polyprof.state().ready", 20), "page ready")
    filters = {f["value"]: f["label"] for f in page.eval("polyprof.filters()")}
    check("thread:100:worker-1" in filters and "thread:100:worker-2" in filters and "java" in filters["thread:100:worker-1"],
          "each named thread is a filter entry, with its process (%s)" % sorted(filters))
    check(page.eval("polyprof.frameRect('thread: worker-1')") is not None and page.eval("polyprof.frameRect('java')") is not None,
          "threads are drawn as a level under their process")
    page.eval("polyprof.setFilter('thread:100:worker-1')")
    check(page.eval("polyprof.state().totalSamples") == 300, "the worker-1 filter keeps its 300 samples (%s)" % page.eval("polyprof.state().totalSamples"))
    page.eval("polyprof.setFilter('all')")
    check("thread:300:MainThread" in filters and "thread:300:Pool-1" in filters,
          "Python's <thread: NAME> root frames become threads too")
    check(page.eval("polyprof.frameRect('thread: Pool-1')") is not None
          and page.eval("polyprof.frameRect('<thread: Pool-1>')") is None, "drawn as the thread level, not as a frame")
    page.eval("polyprof.setFilter('thread:300:Pool-1')")
    check(page.eval("polyprof.state().totalSamples") == 20, "the Pool-1 filter keeps its 20 samples")
    page.eval("polyprof.setFilter('all')")
    check(page.eval("typeof window.__pwned") == "undefined" and page.eval("polyprof.frameRect(%r)" % ("thread: " + EVIL)) is not None,
          "a hostile thread name is drawn as text")
    r = page.eval("polyprof.frameRect('work (%s:5)')" % src)
    check(r is not None, "the Python frame is drawn")
    if r:
        page.mouse("mouseMoved", r["x"] + r["w"] / 2, r["y"] + 5)
        tip = page.eval("document.getElementById('tip').innerText")
        check("source %s:5" % src in tip, "tooltip names the source line (%r)" % tip)
        page.click(r["x"] + r["w"] / 2, r["y"] + 5)
        href = page.eval("(document.querySelector('#crumbs a.srclink') || {}).href")
        check(href and href.endswith("profile.heatmap.html#file=%s&line=5" % src.replace("/", "%2F")), "zoomed: a link to the heatmap line (%s)" % href)
        if href:
            page.navigate(href)
            check(page.wait_for("document.querySelector('#source tr.target') !== null", 10)
                  and page.eval("document.querySelector('#source tr.target').id") == "L5",
                  "the link opens the heatmap on line 5")
    page.navigate("file://" + page_path)
    page.wait_for("window.polyprof && polyprof.state().ready", 20)
    check(page.eval("polyprof.zoomTo('Main.main()V')") and page.eval("document.querySelector('#crumbs a.srclink')") is None,
          "a frame without a source line has no link")
finally:
    browser.close()
pputil.finish()
