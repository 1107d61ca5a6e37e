"""The sampling rate each plugin sustains under `polyprof run`: every
runtime's CPU-bound workload is run for a few seconds at the requested
rates (10 kHz first) and the closing line of `run` is parsed: the samples
and rate each plugin achieved and the samples missed. Prints one line per
runtime and rate; the one-program commands' per-runtime default rates
(core/program_defaults.c) come from these figures.

    [RUNTIMES=python,java] python3 bench/one-program/rates.py [SECONDS] [HZ...]
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "..")
BUILD = os.environ.get("PP_BUILD_DIR", os.path.join(SRC, "build"))
AGENT = os.path.join(BUILD, "polyprof")
PLUGINS = os.path.join(BUILD, "plugins")
EMPTY = os.path.join(SRC, "tests", "integration", "empty.yaml")
WL = os.path.join(SRC, "tests", "workloads")
SECONDS = sys.argv[1] if len(sys.argv) > 1 else "5"
WARMUP = 3.0  # a JVM compiles the workload meanwhile
RATES = [int(x) for x in sys.argv[2:]] or [10000, 5000, 2000]
ACHIEVED = re.compile(r"(\w+) (\d+) samples = (\d+) Hz")
MISSED = re.compile(r"missed samples: (\d+)")


def programs():
    """runtime -> (plugin whose rate counts, command); single-threaded
    CPU-bound programs that outlive the run (-d ends it)."""
    d = tempfile.mkdtemp(prefix="pprates-")
    hot = os.path.join(d, "hot")
    subprocess.run(["cc", "-O1", "-fno-omit-frame-pointer", "-o", hot, os.path.join(WL, "perf", "hot.c")], check=True)
    out = {"native": ("perf", [hot, "60"]),
           "python": ("python", [sys.executable, os.path.join(WL, "python", "workload.py"), "split", "60"])}
    if shutil.which("ruby"):
        out["ruby"] = ("ruby", ["ruby", os.path.join(WL, "ruby", "split.rb")])
    if shutil.which("php"):
        out["php"] = ("php", ["php", os.path.join(WL, "php", "busy.php"), "60"])
    if shutil.which("node"):
        out["nodejs"] = ("nodejs", ["node", os.path.join(WL, "nodejs", "split.js")])
    if shutil.which("java") and shutil.which("javac"):
        sys.path.insert(0, os.path.join(WL, "java"))
        import javawork
        out["java"] = ("java", ["java", "-cp", javawork.compile_workloads(d), "HotCold", "60", "1"])
    if shutil.which("dotnet"):
        sys.path.insert(0, os.path.join(WL, "dotnet"))
        import build_workload
        exe = os.path.join(build_workload.build(BUILD), "PolyprofWorkload")
        out["dotnet"] = ("dotnet", [exe, "60", "bench", "1"])
    return out


def measure(cmd, hz):
    """attach to the program once it runs: the rate is not diluted by its
    start-up (a JVM takes seconds), only by the plugins' own attach."""
    prog = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(WARMUP)
        r = subprocess.run([AGENT, "attach", str(prog.pid), "--plugin-dir", PLUGINS, "--config", EMPTY,
                            "-d", SECONDS, "-f", str(hz), "--limit", "1"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        prog.kill()
        prog.wait()
    line = [x for x in r.stderr.splitlines() if "Hz requested" in x]
    if not line:
        return None, None, r.stderr[-300:]
    rates = {m.group(1): (int(m.group(2)), int(m.group(3))) for m in ACHIEVED.finditer(line[-1])}
    m = MISSED.search(line[-1])
    return rates, int(m.group(1)) if m else None, line[-1]


if not os.path.exists(AGENT):
    raise SystemExit("polyprof not built: " + AGENT)
ONLY = os.environ.get("RUNTIMES", "").split(",") if os.environ.get("RUNTIMES") else None
for runtime, (plugin, cmd) in programs().items():
    if ONLY and runtime not in ONLY:
        continue
    for hz in RATES:
        rates, missed, line = measure(cmd, hz)
        if rates is None or plugin not in rates:
            print("%-7s %5d Hz asked: no %s samples (%s)" % (runtime, hz, plugin, line.strip()))
            continue
        n, got = rates[plugin]
        print("%-7s %5d Hz asked: %s %d samples = %d Hz (%.0f%%), missed %s; all: %s" % (
            runtime, hz, plugin, n, got, 100.0 * got / hz, missed,
            ", ".join("%s %d Hz" % (k, v[1]) for k, v in sorted(rates.items()))))
        sys.stdout.flush()
