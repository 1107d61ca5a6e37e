"""Helpers of the one-program command tests (run -- CMD, attach, dump):
the command line and the table parsed back."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pputil  # noqa: E402

WORKLOADS = os.path.join(pputil.SRC, "tests", "workloads")
EMPTY_CONFIG = os.path.join(pputil.SRC, "tests", "integration", "empty.yaml")
ROW = re.compile(r"^\s*(\d+)\s+([\d.]+)%\s+(\d+)\s+([\d.]+)%\s+([\d.]+)\s\s(.*)$")


def polyprof(*args, timeout=120, **kw):
    """polyprof COMMAND ARGS with the build's plugins and no config file."""
    cmd = [pputil.AGENT, args[0], "--plugin-dir", pputil.PLUGIN_DIR, "--config", EMPTY_CONFIG] + list(args[1:])
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout, **kw)


def parse_table(text):
    """Rows of `--format table` as dicts: self, self_pct, total, total_pct,
    seconds, function (name), where ("file:line"), runtime."""
    rows = []
    for line in text.splitlines():
        m = ROW.match(line)
        if not m:
            continue
        fn = m.group(6)
        rt = re.search(r" \[([^\]]+)\]$", fn)
        runtime = rt.group(1) if rt else ""
        fn = fn[: rt.start()] if rt else fn
        loc = re.search(r" \(([^()]*)\)$", fn)
        rows.append({
            "self": int(m.group(1)), "self_pct": float(m.group(2)), "total": int(m.group(3)),
            "total_pct": float(m.group(4)), "seconds": float(m.group(5)),
            "function": fn[: loc.start()] if loc else fn, "where": loc.group(1) if loc else "",
            "runtime": runtime,
        })
    return rows


def split_of(rows, heavy, light, key="total"):
    """heavy's share of heavy + light in percent (None without samples)."""
    h = sum(r[key] for r in rows if r["function"] == heavy)
    lo = sum(r[key] for r in rows if r["function"] == light)
    return 100.0 * h / (h + lo) if h + lo else None


def check_split(rows, heavy, light, what, key="total"):
    s = split_of(rows, heavy, light, key)
    print("%s: %s %s%% of %s + %s" % (what, heavy, "%.1f" % s if s is not None else "-", heavy, light))
    return pputil.check(s is not None and abs(s - 75.0) <= 5.0, "%s: %s:%s is 3:1 within 5 points" % (what, heavy, light))
