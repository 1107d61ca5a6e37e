"""polyprof run --format heatmap with relative source paths: a Python
program that compiles its code under a relative name (as embedders and
template engines do; `lib/hot.py`) gets that file's text in the page, read
from the current directory by default or from --source-root, and a reason
when the root does not hold it. A --source-root that does not exist is
refused."""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cmdutil  # noqa: E402
import pputil  # noqa: E402
from pputil import check  # noqa: E402

if not os.path.exists(pputil.AGENT):
    pputil.skip("agent not built: " + pputil.AGENT)
prog_dir = pputil.tempdir("ppcmd-heatmap-src-")
out_dir = pputil.tempdir("ppcmd-heatmap-")
os.makedirs(os.path.join(prog_dir, "lib"))
os.chmod(prog_dir, 0o755)
with open(os.path.join(prog_dir, "lib", "hot.py"), "w") as f:
    f.write("import time\n\n\ndef hot_loop():\n    t = time.time()\n    while time.time() - t < 2:\n"
            "        sum(range(1000))\n\n\nhot_loop()\n")
LOADER = "exec(compile(open('lib/hot.py').read(), 'lib/hot.py', 'exec'))"


def page_files(path):
    with open(path) as f:
        m = re.search(r'<script type="application/json" id="data">(.*?)</script>', f.read(), re.S)
    return {x["path"]: x for x in json.loads(m.group(1))["files"]} if m else {}


def heatmap(name, *extra, cwd=prog_dir):
    """The program always starts in its own directory; polyprof in cwd."""
    out = os.path.join(out_dir, name)
    r = cmdutil.polyprof("run", "--format", "heatmap", "--output", out, *extra, "--", "sh", "-c",
                         'cd "$0" && exec "$1" -c "$2"', prog_dir, sys.executable, LOADER, cwd=cwd)
    print(name, r.returncode, r.stderr[-400:])
    return r, page_files(out) if os.path.exists(out) else {}


# started from its directory: the relative path is read from the current directory
r, files = heatmap("cwd.html")
w = files.get("lib/hot.py")
print(sorted(files))
check(r.returncode == 0 and w is not None, "the page lists lib/hot.py by its relative path")
check(w is not None and w["src"] and "def hot_loop" in w["src"], "its text is embedded, read from the current directory")
check(w is not None and any(n for n in w["lines"][1::3]), "its lines carry self samples")

# polyprof started elsewhere: --source-root names the program's directory
r, files = heatmap("root.html", "--source-root", prog_dir, cwd=out_dir)
w = files.get("lib/hot.py")
check(w is not None and w["src"] and "def hot_loop" in w["src"], "--source-root: the text is read from there")

# a root that does not hold the file: counts without text, and why
r, files = heatmap("wrong.html", cwd=out_dir)
w = files.get("lib/hot.py")
check(w is not None and w["src"] is None and w["why"], "a root without the file: no text, a reason (%s)" % (w or {}).get("why"))

r = cmdutil.polyprof("run", "--format", "heatmap", "--output", os.path.join(out_dir, "x.html"),
                     "--source-root", "/nonexistent/dir", "--", "true")
check(r.returncode == 2 and "--source-root /nonexistent/dir" in r.stderr and not os.path.exists(os.path.join(out_dir, "x.html")),
      "a missing --source-root: one line naming it, exit code 2, nothing written")
pputil.finish()
