"""Start-up latency of `polyprof run -- CMD` on a program that does nothing:
python3 -c pass, java (a class with an empty main) and node -e 0, each
against the plain program and, for Python, `python3 -m cProfile` (the
profiler every Python user has). Prints one line per figure: the median
wall time of each way of running it over N runs and polyprof's overhead
against the plain run, measured in the same run.

    python3 bench/one-program/run.py [RUNS]
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("PP_BUILD_DIR", os.path.join(HERE, "..", "..", "build"))
AGENT = os.path.join(BUILD, "polyprof")
PLUGINS = os.path.join(BUILD, "plugins")
EMPTY = os.path.join(HERE, "..", "..", "tests", "integration", "empty.yaml")
RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 10


def wall(cmd):
    t = time.monotonic()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    dt = time.monotonic() - t
    if r.returncode != 0:
        raise SystemExit("failed (%d): %s" % (r.returncode, " ".join(cmd)))
    return dt


def median(cmd):
    wall(cmd)  # warm the page cache
    return statistics.median(wall(cmd) for _ in range(RUNS))


def polyprof(cmd):
    return [AGENT, "run", "--plugin-dir", PLUGINS, "--config", EMPTY, "--"] + cmd


def report(name, cmd, peers):
    plain = median(cmd)
    pp = median(polyprof(cmd))
    print("%s: plain %.3f s, polyprof run %.3f s (+%.3f s, %.1fx)" % (name, plain, pp, pp - plain, pp / plain))
    for label, pcmd in peers:
        t = median(pcmd)
        print("%s: %s %.3f s; polyprof run / %s = %.2fx" % (name, label, t, label, pp / t))


if not os.path.exists(AGENT):
    raise SystemExit("polyprof not built: " + AGENT)
py = sys.executable  # the interpreter itself, not a version-manager shim
report("python3 -c pass", [py, "-c", "pass"], [("python3 -m cProfile", [py, "-m", "cProfile", "-c", "pass"])
                                                if sys.version_info >= (3, 12) else
                                                ("python3 -m cProfile", [py, "-m", "cProfile", os.devnull])])
if shutil.which("java") and shutil.which("javac"):
    d = tempfile.mkdtemp(prefix="ppbench-java-")
    with open(os.path.join(d, "Empty.java"), "w") as f:
        f.write("public class Empty { public static void main(String[] a) {} }\n")
    subprocess.run(["javac", "-d", d, os.path.join(d, "Empty.java")], check=True)
    report("java Empty", ["java", "-cp", d, "Empty"], [])
    shutil.rmtree(d, ignore_errors=True)
else:
    print("java Empty: SKIPPED (no java/javac)")
if shutil.which("node"):
    report("node -e 0", ["node", "-e", "0"], [])
else:
    print("node -e 0: SKIPPED (no node)")
