"""Helpers shared by the integration tests (standard library only).

Tests run the real agent binary against real processes. Paths come from the
environment ctest sets (PP_AGENT, PP_PLUGIN_DIR, ...), with fallbacks to the
default build tree so a test can also be run by hand.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SRC = os.environ.get("PP_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
BUILD = os.environ.get("PP_BUILD_DIR", os.path.join(SRC, "build"))
AGENT = os.environ.get("PP_AGENT", os.path.join(BUILD, "polyprof"))
PLUGIN_DIR = os.environ.get("PP_PLUGIN_DIR", os.path.join(BUILD, "plugins"))
TEST_PLUGIN_DIR = os.environ.get("PP_TEST_PLUGIN_DIR", os.path.join(BUILD, "tests", "plugins"))

SKIP = 77
_checks = []
failures = []
_tempdirs = []


def skip(reason):
    print("SKIPPED: " + reason)
    sys.exit(SKIP)


def check(cond, what):
    """Records one assertion; the summary line comes from finish()."""
    _checks.append(what)
    if cond:
        print("ok: " + what)
    else:
        print("FAIL: " + what)
        failures.append(what)
    return cond


def finish():
    print("%d passed, %d failed" % (len(_checks) - len(failures), len(failures)))
    if failures or os.environ.get("PP_KEEP_TMP"):
        if _tempdirs:
            print("temporary directories kept: %s" % " ".join(_tempdirs))
    else:
        # a test that passed leaves nothing behind (a failed or crashed
        # one keeps its logs and profiles for inspection)
        for d in _tempdirs:
            shutil.rmtree(d, ignore_errors=True)
    sys.exit(1 if failures else 0)


def tempdir(prefix="pptest-"):
    """A fresh directory, removed by finish() if the test passes."""
    d = tempfile.mkdtemp(prefix=prefix)
    _tempdirs.append(d)
    return d


def plugin_dir_with(*paths):
    """A temp plugin directory holding symlinks to exactly these .so files.
    0755 like an installed one: the agent refuses a plugin directory that
    others could write to, and workers that drop root must still read it."""
    d = tempdir("pplugins-")
    os.chmod(d, 0o755)
    for p in paths:
        os.symlink(p, os.path.join(d, os.path.basename(p)))
    return d


def agent_cmd(out_dir, plugin_dir, *extra, duration=3):
    run_dir = tempdir("pprun-")
    return [AGENT, "-o", out_dir, "-d", str(duration), "--plugin-dir", plugin_dir,
            "--pid-file", os.path.join(run_dir, "polyprof.pid"),
            "--log-file", os.path.join(run_dir, "polyprof.log"),
            "--config", os.path.join(SRC, "tests", "integration", "empty.yaml")] + list(extra)


def run_agent(out_dir, plugin_dir, *extra, duration=3, timeout=120):
    cmd = agent_cmd(out_dir, plugin_dir, *extra, duration=duration)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, text=True)
    return p


def parse_col(path):
    """Returns (header dict, list of (frames list, count))."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    lines = text.split("\n")
    header = None
    if lines and lines[0].startswith("# "):
        header = json.loads(lines[0][2:])
        lines = lines[1:]
    stacks = []
    for line in lines:
        if not line:
            continue
        stack, _, count = line.rpartition(" ")
        stacks.append((stack.split(";"), int(count)))
    return header, stacks


def spawn(cmd, **kw):
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)


def kill(p):
    if p.poll() is None:
        p.kill()
    p.wait()
