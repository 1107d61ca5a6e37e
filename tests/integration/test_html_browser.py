#!/usr/bin/env python3
"""The HTML flame graph in a real headless Chromium, driven over the DevTools
protocol (tests/integration/html/cdp.py, standard library only).

Pages are written by build/tests/tools/pp_html_render (the real
pp_html_write) from synthetic profiles whose expected numbers this test
computes itself. Checked: the canvas draws; regex search reports the right
share of samples and highlights exactly the matching frames (read back from
the canvas pixels); click-zoom, breadcrumbs, Esc, flame/icicle, theme toggle
and prefers-color-scheme, tooltip, process/container filter, '/' and the
#search= hash; hostile frame names stay text; not a single network request;
a 100,000-distinct-frame page and a 1,500-deep stack render quickly.
Screenshots land in <build>/tests/html_browser/ for a human to look at.

Exit 0 = pass, 77 = skipped (no Chromium or no render tool), else fail.
"""

import os
import re
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "html"))
import cdp  # noqa: E402

BUILD = os.environ.get("PP_BUILD_DIR", os.path.join(HERE, "..", "..", "build"))
TOOLS = os.environ.get("PP_TEST_TOOLS_DIR", os.path.join(BUILD, "tests", "tools"))
RENDER = os.path.join(TOOLS, "pp_html_render")
SHOTS = os.path.join(BUILD, "tests", "html_browser")

HIGHLIGHT = (230, 0, 230)
LIGHT_BG = (255, 255, 255)
DARK_BG = (0x11, 0x13, 0x15)

XSS_SCRIPT = "</script><script>window.__pwned=1</script>"
XSS_IMG = '<img src=x onerror="window.__pwned=2">'
XSS_COMM = "</title><script>window.__pwned=3</script>"
BAD_UTF8_IN = "bad\\xff\\xfeutf8 \\xe2\\x80\\xa8sep"  # as written for the tool
BAD_UTF8_SHOWN = "bad\ufffd\ufffdutf8 \u2028sep"  # what the page must show
TITLE = "polyprof \u2014 test <b>&amp;</b>"

# pid, comm, container, appid, frames (root first, .col suffix = kind), count
SMALL = [
    (100, "python3", "web-1", "", ["_start", "__libc_start_main", "Py_RunMain",
                                   "main (app.py:10)_[p]", "handle (app.py:20)_[p]",
                                   "compute_sum (calc.py:5)_[p]"], 300),
    (100, "python3", "web-1", "", ["_start", "__libc_start_main", "Py_RunMain",
                                   "main (app.py:10)_[p]", "handle (app.py:20)_[p]",
                                   "render (tpl.py:8)_[p]"], 150),
    (100, "python3", "web-1", "", ["_start", "__libc_start_main", "Py_RunMain",
                                   "main (app.py:10)_[p]", "handle (app.py:20)_[p]",
                                   "compute_sum (calc.py:5)_[p]", "PyNumber_Add_[pn]"], 50),
    (100, "python3", "web-1", "", ["entry_SYSCALL_64_[k]", "do_syscall_64_[k]", "ksys_read_[k]"], 40),
    (101, "python3", "web-2", "", ["_start", "__libc_start_main", "Py_RunMain",
                                   "main (app.py:10)_[p]", "idle (app.py:30)_[p]"], 80),
    (200, "java", "", "billing", ["Thread.run()V_[0]", "com.acme.Worker.loop()V_[j]",
                                  "com.acme.Worker.compute_hash(I)J_[i]"], 200),
    (200, "java", "", "billing", ["Thread.run()V_[0]", "com.acme.Worker.loop()V_[j]",
                                  "java.util.HashMap.put_[1]"], 120),
    (300, "node", "", "", ["main (/srv/app.js:1)_[js]", "handler (/srv/app.js:40)_[js]"], 90),
    (400, "ruby", "", "", ["<main> - app.rb:1_[rb]", "work - app.rb:5_[rb]"], 60),
    (500, "php-fpm", "", "", ["{main} index.php:3_[php]", "compute index.php:9_[php]"], 45),
    (600, "dotnet", "", "", ["Program.Main_[net]", "Worker.Run_[net]"], 35),
    (700, XSS_COMM, "", "", [XSS_SCRIPT, XSS_IMG, BAD_UTF8_IN], 25),
    (800, "agent", "", "", ["[Profiling error: attach failed]_[err]"], 10),
]
SUFFIX = re.compile(r"_\[(k|p|pn|pe|j|i|0|1|rb|php|net|js|pseudo|err)\]$")


def shown(frame):
    """A frame's text as the page shows it: suffix gone, escapes decoded."""
    f = SUFFIX.sub("", frame)
    return BAD_UTF8_SHOWN if f == BAD_UTF8_IN else f


def labels(stack):
    pid, comm, container, appid, frames, _ = stack
    out = [container] if container else []
    out.append(comm)
    if appid:
        out.append("appid: " + appid)
    return out + [shown(f) for f in frames]


def expected_search(stacks, regex, flags=re.I):
    rx = re.compile(regex, flags)
    total = sum(s[5] for s in stacks)
    matched = sum(s[5] for s in stacks if any(rx.search(x) for x in labels(s)))
    names = sorted({x for s in stacks for x in labels(s) if rx.search(x)})
    return 100.0 * matched / total, matched, names


def fmt_pct(x):
    """The page's percentage format (fmtPct in flamegraph.html)."""
    if x >= 10 or x == 0:
        return f"{x:.1f}%"
    if x >= 0.01:
        return f"{x:.2f}%"
    return f"{x:.2g}%"


def write_input(path, stacks):
    with open(path, "w", encoding="utf-8") as f:
        for pid, comm, container, appid, frames, count in stacks:
            f.write(";".join([str(pid), comm, container, appid] + frames) + f" {count}\n")


def render(inp, out, *extra):
    import subprocess

    r = subprocess.run([RENDER, "-o", out, *extra, inp], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"pp_html_render failed: {r.stderr}")
    return r.stderr.strip()


class Checks:
    def __init__(self):
        self.failed = 0
        self.passed = 0

    def ok(self, cond, what, detail=""):
        if cond:
            self.passed += 1
            print(f"  ok    {what}")
        else:
            self.failed += 1
            print(f"  FAIL  {what}" + (f": {detail}" if detail else ""))
        return cond


# JS helpers evaluated in the page (read-only).
JS_PIXEL = """((x, y) => {
  const c = document.getElementById('graph'), r = c.getBoundingClientRect();
  const d = c.getContext('2d').getImageData(Math.floor((x - r.left) * devicePixelRatio),
                                            Math.floor((y - r.top) * devicePixelRatio), 1, 1).data;
  return [d[0], d[1], d[2]];
})"""
JS_CANVAS_STATS = """(() => {
  const c = document.getElementById('graph');
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  const bg = [d[0], d[1], d[2]];
  let fg = 0; const colours = new Set();
  for (let i = 0; i < d.length; i += 4 * 3) {
    if (d[i] !== bg[0] || d[i + 1] !== bg[1] || d[i + 2] !== bg[2]) fg++;
    if (colours.size < 5000) colours.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
  }
  return {w: c.width, h: c.height, fg: fg * 3, colours: colours.size};
})()"""


def center(rect):
    return rect["x"] + rect["w"] / 2, rect["y"] + rect["h"] / 2


def element_center(page, selector):
    r = page.eval(f"(() => {{ const r = document.querySelector({selector!r}).getBoundingClientRect();"
                  " return {x: r.left, y: r.top, w: r.width, h: r.height}; })()")
    return center(r)


def renders(page):
    return page.eval("polyprof.state().render.count")


def next_frame(page):
    """Wait until the page has run two animation frames. An input event or a
    scroll only schedules a render (and a scroll event is only dispatched at
    the next frame), so the render an action asked for has run by the second
    frame. Counting renders is not enough: one scheduled by an earlier
    action may still be pending, and would bump the count before the
    action's own render."""
    page.eval("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(1))))")


def wait_render(page, before):
    next_frame(page)
    return page.wait_for(f"polyprof.state().render.count > {before}", 10)


def check_no_network(c, page, url, what):
    reqs = [e["params"]["request"]["url"] for e in page.events("Network.requestWillBeSent")]
    others = [u for u in reqs if u.split("#")[0] != url.split("#")[0]]
    c.ok(not others, f"{what}: no network request besides the page itself", repr(others[:5]))
    res = page.eval("performance.getEntriesByType('resource').map(e => e.name)")
    c.ok(res == [], f"{what}: no resource timing entries", repr(res[:5]))
    errs = [e["params"] for e in page.events("Runtime.exceptionThrown")]
    c.ok(not errs, f"{what}: no uncaught JS exception", repr(errs[:1])[:400])
    logs = [e["params"]["entry"] for e in page.events("Log.entryAdded")
            if e["params"]["entry"].get("level") == "error"]
    c.ok(not logs, f"{what}: no console/CSP errors", repr(logs[:2])[:400])


def test_small(c, browser, tmp):
    inp, html = os.path.join(tmp, "small.txt"), os.path.join(tmp, "small.html")
    write_input(inp, SMALL)
    print("render:", render(inp, html, "-t", TITLE, "--plugin", "perf:1480:98.7:ok",
                            "--plugin", "java:0:0:attach failed"))
    url = "file://" + html
    total = sum(s[5] for s in SMALL)

    print("prefers-color-scheme: dark")
    page = browser.new_page()
    page.call("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    page.navigate(url)
    c.ok(page.wait_for("window.polyprof && polyprof.state().ready", 20), "page becomes ready")
    c.ok(page.eval("polyprof.state().theme") == "dark", "theme follows prefers-color-scheme: dark")
    page.call("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "light"}]})
    c.ok(page.wait_for("polyprof.state().theme === 'light'", 5), "theme follows a preference change")
    page.call("Target.closeTarget", {"targetId": page.target_id})

    print("light page")
    page = browser.new_page()
    page.call("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "light"}]})
    page.navigate(url)
    c.ok(page.wait_for("window.polyprof && polyprof.state().ready", 20), "page becomes ready")
    st = page.eval("polyprof.state()")
    c.ok(st["totalSamples"] == total, "total samples", f"{st['totalSamples']} != {total}")
    c.ok(st["theme"] == "light" and st["mode"] == "flame", "defaults: light theme, flame mode")
    stats = page.eval(JS_CANVAS_STATS)
    c.ok(stats["fg"] > 20000 and stats["colours"] >= 10, "canvas has drawn frames", repr(stats))
    c.ok(page.eval("document.title") == TITLE, "title is the literal text",
         page.eval("document.title"))
    c.ok(page.eval("document.getElementById('title').textContent") == TITLE, "heading is the literal text")

    # hostile names: still text, nothing ran, nothing injected
    c.ok(page.eval("typeof window.__pwned") == "undefined", "no injected script or handler ran")
    c.ok(page.eval("document.querySelectorAll('img,iframe,object,embed,link,base').length") == 0,
         "no injected elements")
    c.ok(page.eval("document.scripts.length") == 2, "exactly the page's two script elements")
    top = [t["name"] for t in st["top"]]
    c.ok(XSS_IMG in top or BAD_UTF8_SHOWN in top or len(top) == 10, "top functions computed", repr(top))
    r = page.eval(f"polyprof.search({re.escape(XSS_SCRIPT)!r})")
    c.ok(r["matchedFrames"] == [XSS_SCRIPT], "a </script> frame name is searchable text", repr(r))
    r = page.eval("polyprof.search('bad.*utf8')")
    c.ok(r["matchedFrames"] == [BAD_UTF8_SHOWN], "invalid UTF-8 shown as U+FFFD, U+2028 kept", repr(r))
    c.ok(page.eval("polyprof.state().zoomPath.length") == 0, "no zoom yet")
    comms = [f["label"] for f in page.eval("polyprof.filters()")]
    c.ok(any(XSS_COMM in x for x in comms), "hostile comm listed as text in the filter")

    # screenshot of the graph as composited, not just the canvas buffer
    png = page.screenshot(os.path.join(SHOTS, "small-light.png"))
    w, h, rows = cdp.png_pixels(page.screenshot(clip={"x": 0, "y": 700, "width": 300, "height": 100}))
    coloured = sum(1 for row in rows for px in row if px != LIGHT_BG)
    c.ok(coloured > 5000, "screenshot shows the graph", f"{coloured} coloured pixels, {len(png)} bytes")

    print("search")
    for regex in ("compute", "COMPUTE", "^(main|handle) ", "Worker\\.", "web-|java", "nothing-matches-this"):
        pct, matched, names = expected_search(SMALL, regex)
        r = page.eval(f"polyprof.search({regex!r})")
        c.ok(abs(r["matchedPct"] - pct) < 1e-9 and r["matchedSamples"] == matched,
             f"search {regex!r}: matched {pct:.3f}%", repr(r))
        c.ok(r["matchedFrames"] == names, f"search {regex!r}: matched frames", f"{r['matchedFrames']} != {names}")
        hl = page.eval("polyprof.state().render.highlighted")
        c.ok(hl == names, f"search {regex!r}: highlighted exactly those", f"{hl} != {names}")
        text = page.eval("document.getElementById('match').textContent")
        if names:
            c.ok(f"matched {fmt_pct(pct)} of samples" in text, f"search {regex!r}: status text", text)
    r = page.eval("polyprof.search('COMPUTE', {ignoreCase: false})")
    c.ok(r["matchedSamples"] == 0, "case-sensitive search", repr(r))

    pct, matched, names = expected_search(SMALL, "compute")
    page.eval("polyprof.search('compute')")
    page.mouse("mouseMoved", 5, 5)  # no hover outline over the frames we sample
    for name in names:
        rect = page.eval(f"polyprof.frameRect({name!r})")
        px = page.eval(f"{JS_PIXEL}({rect['x'] + 1}, {rect['y'] + 1})") if rect else None
        c.ok(px is not None and tuple(px) == HIGHLIGHT, f"pixel of matched {name!r} is the highlight", repr(px))
    for name in ("handle (app.py:20)", "render (tpl.py:8)", "java"):
        rect = page.eval(f"polyprof.frameRect({name!r})")
        px = page.eval(f"{JS_PIXEL}({rect['x'] + 1}, {rect['y'] + 1})") if rect else None
        c.ok(px is not None and tuple(px) != HIGHLIGHT, f"pixel of unmatched {name!r} is not", repr(px))

    r = page.eval("polyprof.search('(unclosed')")
    c.ok(r["error"] and r["matchedSamples"] == 0, "invalid regex reports an error", repr(r))
    c.ok(page.eval("document.getElementById('match').className.includes('error')")
         and page.eval("document.getElementById('match').textContent").startswith("invalid regex"),
         "invalid regex error shown")
    c.ok(page.eval("document.getElementById('search').classList.contains('invalid')"), "search box marked invalid")

    # keyboard: '/' focuses the search box, typing + Enter searches, Esc resets
    page.eval("polyprof.reset()")
    page.key("/", "Slash", 191, "/")
    c.ok(page.eval("document.activeElement.id") == "search", "'/' focuses the search box")
    page.call("Input.insertText", {"text": "render"})
    page.key("Enter", "Enter", 13, "\r")
    pct, matched, names = expected_search(SMALL, "render")
    r = page.eval("polyprof.state().search")
    c.ok(r["regex"] == "render" and r["matchedSamples"] == matched, "typed search + Enter", repr(r))
    c.ok(page.wait_for("location.hash.includes('search=render')", 5), "search is written to the URL hash",
         page.eval("location.hash"))
    page.key("Escape", "Escape", 27)
    r = page.eval("polyprof.state()")
    c.ok(r["search"]["regex"] == "" and r["zoom"] is None, "Esc clears the search", repr(r["search"]))

    print("tooltip")
    rect = page.eval("polyprof.frameRect('handle (app.py:20)')")
    x, y = center(rect)
    page.mouse("mouseMoved", x, y)
    c.ok(page.wait_for("!document.getElementById('tip').hidden", 5), "tooltip shows on hover")
    tip = page.eval("document.getElementById('tip').textContent")
    c.ok(all(s in tip for s in ("handle (app.py:20)", "python", "_[p]", "total 500 samples",
                                fmt_pct(100 * 500 / total), "self 0 samples")),
         "tooltip: name, kind, total, self, %", tip)
    page.screenshot(os.path.join(SHOTS, "small-tooltip.png"))

    print("zoom")
    before = renders(page)
    page.click(x, y)
    wait_render(page, before)
    st = page.eval("polyprof.state()")
    c.ok(st["zoom"] == "handle (app.py:20)", "click zooms into the frame", repr(st["zoom"]))
    c.ok(st["zoomPath"] == ["web-1", "python3", "_start", "__libc_start_main", "Py_RunMain",
                            "main (app.py:10)", "handle (app.py:20)"], "zoom path", repr(st["zoomPath"]))
    cw = page.eval("document.getElementById('graph').clientWidth")
    rect = page.eval("polyprof.frameRect('handle (app.py:20)')")
    c.ok(abs(rect["w"] - cw) < 1.5, "zoomed frame spans the width", f"{rect['w']} vs {cw}")
    c.ok(page.eval("polyprof.frameRect('com.acme.Worker.loop()V')") is None, "other subtrees hidden")
    crumbs = page.eval("[...document.querySelectorAll('#crumbs button')].map(b => b.textContent)")
    c.ok(crumbs == ["all"] + st["zoomPath"], "breadcrumbs", repr(crumbs))
    page.screenshot(os.path.join(SHOTS, "small-zoom.png"))
    rect = page.eval("polyprof.frameRect('python3')")
    before = renders(page)
    page.click(rect["x"] + 40, rect["y"] + 5)
    wait_render(page, before)
    c.ok(page.eval("polyprof.state().zoom") == "python3", "clicking an ancestor zooms out to it")
    x, y = element_center(page, "#crumbs button")
    before = renders(page)
    page.click(x, y)
    wait_render(page, before)
    c.ok(page.eval("polyprof.state().zoom") is None, "breadcrumb 'all' resets the zoom")
    c.ok(page.eval("polyprof.zoomTo('com.acme.Worker.loop()V')") and
         page.eval("polyprof.state().zoom") == "com.acme.Worker.loop()V", "zoomTo(name)")
    page.key("Escape", "Escape", 27)
    c.ok(page.wait_for("polyprof.state().zoom === null", 5), "Esc resets the zoom")
    next_frame(page)  # the reset's render, before measuring the unzoomed graph

    print("flame / icicle")
    canvas = page.eval("(() => { const r = document.getElementById('graph').getBoundingClientRect();"
                       " return {top: r.top, bottom: r.bottom}; })()")
    root = page.eval("polyprof.frameRect('all')")
    c.ok(abs(root["y"] + ROW_H - canvas["bottom"]) < 2, "flame: root row at the bottom", repr((root, canvas)))
    x, y = element_center(page, "#mode")
    before = renders(page)
    page.click(x, y)
    wait_render(page, before)
    root = page.eval("polyprof.frameRect('all')")
    c.ok(page.eval("polyprof.state().mode") == "icicle" and abs(root["y"] - canvas["top"]) < 2,
         "icicle: root row on top", repr(root))
    page.screenshot(os.path.join(SHOTS, "small-icicle.png"))
    before = renders(page)
    page.click(x, y)
    wait_render(page, before)  # the background check below reads the flame render
    c.ok(page.wait_for("polyprof.state().mode === 'flame'", 5), "toggle back to flame")

    print("theme")
    page.mouse("mouseMoved", 5, 5)
    bg = page.eval(f"{JS_PIXEL}(3, {canvas['top'] + 3})")
    c.ok(tuple(bg) == LIGHT_BG, "light canvas background", repr(bg))
    x, y = element_center(page, "#theme")
    before = renders(page)
    page.click(x, y)
    wait_render(page, before)
    bg = page.eval(f"{JS_PIXEL}(3, {canvas['top'] + 3})")
    c.ok(page.eval("polyprof.state().theme") == "dark" and
         page.eval("document.documentElement.dataset.theme") == "dark", "theme button switches to dark")
    c.ok(tuple(bg) == DARK_BG, "dark canvas background", repr(bg))
    page.eval("polyprof.search('compute')")
    page.screenshot(os.path.join(SHOTS, "small-dark-search.png"))
    page.eval("polyprof.reset()")
    page.click(x, y)
    c.ok(page.wait_for("polyprof.state().theme === 'light'", 5), "and back to light")

    print("filter")
    for value, pids in (("pid:200", {200}), ("container:web-1", {100}), ("comm:python3", {100, 101})):
        subset = [s for s in SMALL if s[0] in pids]
        want = sum(s[5] for s in subset)
        before = renders(page)
        page.eval(f"(() => {{ const s = document.getElementById('filter'); s.value = {value!r};"
                  " s.dispatchEvent(new Event('change')); })()")
        wait_render(page, before)
        st = page.eval("polyprof.state()")
        c.ok(st["filter"] == value and st["totalSamples"] == want, f"filter {value}: {want} samples",
             f"{st['filter']} {st['totalSamples']}")
        pct, matched, names = expected_search(subset, "compute")
        r = page.eval("polyprof.search('compute')")
        c.ok(abs(r["matchedPct"] - pct) < 1e-9 and r["matchedFrames"] == names,
             f"filter {value}: search relative to the filtered samples", repr(r))
    page.eval("polyprof.setFilter('all')")
    c.ok(page.eval("polyprof.state().totalSamples") == total, "filter back to all")

    check_no_network(c, page, url, "small page")
    page.call("Target.closeTarget", {"targetId": page.target_id})

    print("URL hash")
    page = browser.new_page()
    pct, matched, names = expected_search(SMALL, "compute_sum")
    page.navigate(url + "#search=compute_sum&mode=icicle&theme=dark")
    c.ok(page.wait_for("window.polyprof && polyprof.state().ready", 20), "page with hash becomes ready")
    st = page.eval("polyprof.state()")
    c.ok(st["search"]["regex"] == "compute_sum" and abs(st["search"]["matchedPct"] - pct) < 1e-9,
         "#search= drives the search", repr(st["search"]))
    c.ok(st["mode"] == "icicle" and st["theme"] == "dark", "#mode= and #theme=")
    c.ok(page.eval("document.getElementById('search').value") == "compute_sum", "search box shows it")
    page.screenshot(os.path.join(SHOTS, "small-dark-icicle-hash.png"))
    before = renders(page)
    page.eval("location.hash = 'search=java'")
    wait_render(page, before)
    c.ok(page.eval("polyprof.state().search.regex") == "java", "hashchange re-runs the search")
    check_no_network(c, page, url, "hash page")
    page.call("Target.closeTarget", {"targetId": page.target_id})


ROW_H = 18


def test_big(c, browser, tmp):
    print("100k distinct frames")
    inp, html = os.path.join(tmp, "big.txt"), os.path.join(tmp, "big.html")
    kinds = ["", "_[p]", "_[j]", "_[k]", "_[rb]"]
    stacks = []
    for i in range(25000):
        pid = 1000 + i % 20
        frames = ["main", f"dispatch_{i % 50}", f"service_{i % 500}"]
        frames += [f"fn_{i}_{j}{kinds[(i + j) % 5]}" for j in range(4)]
        stacks.append((pid, f"worker{pid % 4}", "pod-a" if pid % 2 else "", "", frames, 1 + (i * 7919) % 97))
    write_input(inp, stacks)
    info = render(inp, html)
    print("render:", info)
    distinct = 1 + 50 + 500 + 4 * 25000
    size = os.path.getsize(html)
    page = browser.new_page()
    t0 = time.time()
    page.navigate("file://" + html)
    ready = page.wait_for("window.polyprof && polyprof.state().ready", 60)
    wall = time.time() - t0
    st = page.eval("polyprof.state()")
    tm = st["timings"]
    print(f"  page {size / 1e6:.1f} MB, {st['frames']} frames, {st['nodes']} nodes: ready in {wall * 1000:.0f} ms "
          f"wall (JSON {tm['parse']:.0f} ms, decode {tm['decode']:.0f} ms, tree {tm['build']:.0f} ms, "
          f"first render {tm['firstRender']:.0f} ms, {tm['ready']:.0f} ms after navigation start)")
    c.ok(ready and wall < 5, "100k-frame page ready within 5 s", f"{wall:.2f} s")
    c.ok(st["frames"] == distinct, "all distinct frames are in the page", f"{st['frames']} != {distinct}")
    c.ok(st["totalSamples"] == sum(s[5] for s in stacks), "total samples")
    stats = page.eval(JS_CANVAS_STATS)
    c.ok(stats["fg"] > 20000, "big page canvas drawn", repr(stats))
    page.screenshot(os.path.join(SHOTS, "big.png"))
    t = page.eval("(() => { const t = performance.now(); const r = polyprof.search('fn_1234_');"
                  " return [performance.now() - t, r.matchedFrames.length]; })()")
    pct, matched, names = expected_search(stacks, "fn_1234_")
    c.ok(t[1] == len(names), "big page search matches", f"{t[1]} != {len(names)}")
    c.ok(t[0] < 1000, f"big page search + render in {t[0]:.0f} ms")
    t = page.eval("(() => { const t = performance.now(); polyprof.zoomTo('service_7');"
                  " return performance.now() - t; })()")
    c.ok(page.eval("polyprof.state().zoom") == "service_7" and t < 1000, f"big page zoom in {t:.0f} ms")
    page.screenshot(os.path.join(SHOTS, "big-zoom.png"))
    t = page.eval("(() => { const t = performance.now(); polyprof.setFilter('container:pod-a');"
                  " return performance.now() - t; })()")
    c.ok(page.eval("polyprof.state().filter") == "container:pod-a" and t < 3000,
         f"big page filter (tree rebuild) in {t:.0f} ms")
    page.eval("polyprof.reset(); polyprof.setFilter('all')")
    # hovering across the whole graph stays responsive
    t0 = time.time()
    for i in range(40):
        page.mouse("mouseMoved", 10 + i * 25, 760)
    page.eval("new Promise(r => requestAnimationFrame(() => r(1)))")
    hover = (time.time() - t0) / 40
    c.ok(hover < 0.25, f"hover round trip {hover * 1000:.0f} ms")
    check_no_network(c, page, "file://" + html, "big page")
    page.call("Target.closeTarget", {"targetId": page.target_id})


def test_deep(c, browser, tmp):
    print("1,500-deep stack (virtual scrolling)")
    inp, html = os.path.join(tmp, "deep.txt"), os.path.join(tmp, "deep.html")
    deep = [f"deep_{i}" for i in range(1500)]
    stacks = [(1, "rec", "", "", deep, 10), (1, "rec", "", "", deep[:10] + ["side"], 5)]
    write_input(inp, stacks)
    render(inp, html)
    page = browser.new_page()
    page.navigate("file://" + html)
    c.ok(page.wait_for("window.polyprof && polyprof.state().ready", 20), "deep page ready")
    st = page.eval("polyprof.state()")
    c.ok(st["maxDepth"] == 1501, "depth 1501 (root, process, 1500 frames)", repr(st["maxDepth"]))
    h = page.eval("document.getElementById('graph').height")
    c.ok(h <= 800, "canvas stays viewport-sized", repr(h))
    c.ok(page.eval("polyprof.frameRect('all')") is not None, "flame: root visible at the bottom")
    before = renders(page)
    page.eval("document.getElementById('view').scrollTop = 0")
    wait_render(page, before)
    c.ok(page.eval("polyprof.frameRect('deep_1499')") is not None, "scrolled to the top: the leaf is drawn")
    c.ok(page.eval("polyprof.frameRect('all')") is None, "and the root is not")
    page.screenshot(os.path.join(SHOTS, "deep-top.png"))
    check_no_network(c, page, "file://" + html, "deep page")
    page.call("Target.closeTarget", {"targetId": page.target_id})

    # a graph only a little taller than the view: the root must still start
    # in view (the scroll position is set before the canvas has its height)
    stacks = [(1, "rec", "", "", deep[:41], 10)]
    write_input(inp, stacks)
    render(inp, html)
    page = browser.new_page()
    page.navigate("file://" + html)
    c.ok(page.wait_for("window.polyprof && polyprof.state().ready", 20), "slightly tall page ready")
    over = page.eval("document.getElementById('view').scrollHeight - document.getElementById('view').clientHeight")
    c.ok(0 < over < 150, "graph slightly taller than the view", repr(over))
    c.ok(page.eval("polyprof.frameRect('all')") is not None, "flame: root starts in view")
    page.call("Target.closeTarget", {"targetId": page.target_id})


def main():
    chromium = cdp.find_chromium()
    if not chromium:
        print("SKIPPED: no Chromium (install the Debian package 'chromium' or set PP_CHROMIUM)")
        return 77
    if not os.access(RENDER, os.X_OK):
        print(f"SKIPPED: {RENDER} not built (make pp_html_render)")
        return 77
    os.makedirs(SHOTS, exist_ok=True)
    c = Checks()
    with tempfile.TemporaryDirectory(prefix="pp-html-") as tmp:
        browser = cdp.Browser(chromium)
        try:
            test_small(c, browser, tmp)
            test_big(c, browser, tmp)
            test_deep(c, browser, tmp)
        finally:
            browser.close()
    print(f"screenshots: {SHOTS}")
    print(f"test_html_browser: {c.passed} passed, {c.failed} failed")
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
