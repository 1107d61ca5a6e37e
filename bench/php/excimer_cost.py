#!/usr/bin/env python3
"""excimer's own CPU per sample, amplified above run-to-run noise: one
work.php worker alone, without excimer then with excimer at a high rate,
in interleaved pairs; cost per sample = (CPU with - CPU without) / samples.
At 100 Hz the difference is lost in the noise of the whole-run figures
(bench.py); at 5 kHz it is ~60 % of the run. Standard library only.
Usage: bench/php/excimer_cost.py [--hz 5000] [--pairs 5] [--iters 60000]"""
import argparse
import os
import re
import resource
import shutil
import subprocess
import sys

WORK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "work.php")


def run(php, hz, iters):
    def cpu():
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime
    before = cpu()
    out = subprocess.run([php, WORK, str(iters)], env=dict(os.environ, EXCIMER_HZ=str(hz)),
                         stdout=subprocess.PIPE, text=True).stdout
    m = re.search(r"samples (\d+)", out)
    return cpu() - before, int(m.group(1)) if m else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hz", type=int, default=5000)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--iters", type=int, default=60000)
    a = ap.parse_args()
    php = shutil.which("php") or shutil.which("php8.2")
    if not php:
        print("SKIPPED: php not installed (Debian: php-cli)")
        return 0
    base = exc = samples = 0.0
    for _ in range(a.pairs):
        b, _ = run(php, 0, a.iters)
        e, s = run(php, a.hz, a.iters)
        if s == 0:
            print("SKIPPED: excimer not installed (Debian: php-excimer)")
            return 0
        print("base %.3f s, excimer %.3f s, %d samples: %.1f us per sample (load %.1f)" % (
            b, e, s, 1e6 * (e - b) / s, os.getloadavg()[0]), flush=True)
        base, exc, samples = base + b, exc + e, samples + s
    print("excimer at %d Hz: %.1f us per sample (%.2f s over %.2f s, %d samples)" % (
        a.hz, 1e6 * (exc - base) / samples, exc - base, base, samples))
    return 0


if __name__ == "__main__":
    sys.exit(main())
