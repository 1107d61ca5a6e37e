#!/usr/bin/env python3
"""bench/perf: polyprof's perf plugin against the pipeline gProfiler runs,
`perf record -F <f> -a -g` + `perf script`, on the same loaded workload in
the same run. Prints one line per figure:

  agent CPU seconds (perf record + perf script vs polyprof), ratio
  peak RSS of each, ratio
  share of frames resolved to a symbol (sample-weighted), each
  DWARF mode: CPU microseconds per sample (perf record --call-graph dwarf +
  perf script vs polyprof)

Usage: bench/perf/run.py [-F HZ] [-d SECONDS] [--build DIR]
Needs root, the linux-perf package and a C compiler. Standard library only.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))


sys.path.insert(0, os.path.join(HERE, "..", "overhead"))
import procstat  # noqa: E402


def run_measured(cmd, **kw):
    """Runs cmd; returns (cpu seconds, peak RSS KiB, completed process).
    The peak is the child's own VmHWM (procstat.wait_with_peak says why not
    wait4's ru_maxrss)."""
    p = subprocess.Popen(cmd, **kw)
    status, cpu, peak = procstat.wait_with_peak(p.pid)
    p.returncode = os.waitstatus_to_exitcode(status)
    return cpu, peak, p


def run_pair(cmd_a, cmd_b):
    """Runs two commands side by side; returns ((cpu s, peak RSS KiB), (cpu s, peak RSS KiB))."""
    procs = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for c in (cmd_a, cmd_b)]
    peak = {p.pid: 0 for p in procs}
    out = {}
    while len(out) < len(procs):
        for p in procs:
            if p.pid in out:
                continue
            peak[p.pid] = max(peak[p.pid], procstat.status_kib(p.pid, "VmHWM"))
            done, _, ru = os.wait4(p.pid, os.WNOHANG)
            if done:
                out[p.pid] = (ru.ru_utime + ru.ru_stime, peak[p.pid])
        time.sleep(0.05)
    return out[procs[0].pid], out[procs[1].pid]


LEAF = {}


def perf_script_frames(path):
    """Sample-weighted (resolved, total) frames of `perf script` text."""
    resolved = total = samples = leaf_ok = 0
    frame = re.compile(r"^\s+[0-9a-f]+ (.*?) \((.*)\)$")
    first = False
    with open(path, errors="replace") as f:
        for line in f:
            if not line.strip():
                continue
            m = frame.match(line)
            if not m:
                if not line[0].isspace():
                    samples += 1
                    first = True
                continue
            total += 1
            sym = m.group(1)
            if sym != "[unknown]":
                resolved += 1
                if first:
                    leaf_ok += 1
            first = False
    LEAF[path] = leaf_ok / max(samples, 1)
    return resolved, total, samples


def polyprof_frames(path):
    resolved = total = samples = leaf_ok = 0
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            stack, _, count = line.rstrip("\n").rpartition(" ")
            c = int(count)
            frames = stack.split(";")[2:]
            samples += c
            if frames and frames[-1] != "[unknown]" and not frames[-1].startswith("("):
                leaf_ok += c
            for fr in frames:
                total += c
                if fr != "[unknown]" and not fr.startswith("("):
                    resolved += c
    LEAF[path] = leaf_ok / max(samples, 1)
    return resolved, total, samples


def header(path):
    import json
    with open(path) as f:
        for line in f:
            if line.startswith("# "):
                return json.loads(line[2:])
    return {}


def start_workload(tmp):
    hot = os.path.join(tmp, "hot_fp")
    hot_nofp = os.path.join(tmp, "hot_nofp")
    sysc = os.path.join(tmp, "syscalls")
    w = os.path.join(SRC, "tests", "workloads", "perf")
    subprocess.run(["cc", "-O1", "-g", "-fno-omit-frame-pointer", "-o", hot, os.path.join(w, "hot.c")], check=True)
    subprocess.run(["cc", "-O2", "-g", "-fomit-frame-pointer", "-o", hot_nofp, os.path.join(w, "hot.c")], check=True)
    subprocess.run(["cc", "-O1", "-g", "-fno-omit-frame-pointer", "-o", sysc, os.path.join(w, "syscalls.c")], check=True)
    procs = [
        subprocess.Popen([hot, "100000"]),
        subprocess.Popen([hot_nofp, "100000"]),
        subprocess.Popen([sysc, "100000"]),
        # process churn: short-lived processes, as a busy host has
        subprocess.Popen(["sh", "-c", "while :; do /bin/true; sleep 0.02; done"]),
        subprocess.Popen([sys.executable, "-c", "import time\nwhile True:\n  sum(i*i for i in range(100000))\n  time.sleep(0.01)"]),
    ]
    return procs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-F", type=int, default=99)
    ap.add_argument("-d", type=float, default=20)
    ap.add_argument("--dwarf-freq", type=int, default=49)
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    a = ap.parse_args()
    harness = os.path.join(a.build, "tests", "tools", "pp_perf_harness")
    plugin = os.path.join(a.build, "plugins", "perf.so")
    perf = shutil.which("perf")
    if not perf or not os.path.exists(harness) or os.geteuid() != 0:
        print("SKIPPED: needs root, perf (linux-perf) and a built tree (%s)" % harness)
        return 0
    tmp = tempfile.mkdtemp(prefix="ppbench-perf-")
    procs = start_workload(tmp)
    time.sleep(1)
    try:
        res = {}
        # Both pipelines sample the same workload over the same interval, at
        # the same time; each is charged its own CPU time and RSS.
        data = os.path.join(tmp, "perf.data")
        txt = os.path.join(tmp, "perf.txt")
        col = os.path.join(tmp, "polyprof.col")
        (c1, r1), (c3, r3) = run_pair(
            [perf, "record", "-q", "-F", str(a.F), "-a", "-g", "-m", "129", "-o", data, "--",
             "sleep", str(a.d)],
            [harness, plugin, "-d", str(a.d), "-F", str(a.F), "-m", "fp", "-o", col])
        with open(txt, "w") as out:
            c2, r2, _ = run_measured([perf, "script", "-F", "+pid", "-i", data], stdout=out,
                                     stderr=subprocess.DEVNULL)
        res["perf"] = (c1 + c2, max(r1, r2)) + perf_script_frames(txt)
        res["polyprof"] = (c3, r3) + polyprof_frames(col)

        pc, pr, pres, ptot, psamp = res["perf"]
        qc, qr, qres, qtot, qsamp = res["polyprof"]
        print("bench/perf: F=%d Hz, %.0f s, %d CPUs, workload: 2 CPU-bound C, syscalls, python, process churn" % (a.F, a.d, os.cpu_count()))
        print("fp  samples: perf %d, polyprof %d" % (psamp, qsamp))
        print("fp  agent CPU seconds: perf record %.3f + script %.3f = %.3f s, polyprof %.3f s, ratio %.2f (target <= 0.50)"
              % (c1, c2, pc, qc, qc / pc if pc else 0))
        print("fp  peak RSS: perf %d KiB, polyprof %d KiB, ratio %.2f" % (pr, qr, qr / pr if pr else 0))
        print("fp  frames resolved: perf %.1f%%, polyprof %.1f%% (target: equal or better)"
              % (100.0 * pres / max(ptot, 1), 100.0 * qres / max(qtot, 1)))
        print("fp  leaf frame resolved: perf %.1f%%, polyprof %.1f%% of samples" % (100 * LEAF[txt], 100 * LEAF[col]))

        # --- DWARF: CPU per sample
        (c1, r1), (c3, r3) = run_pair(
            [perf, "record", "-q", "-F", str(a.dwarf_freq), "-a", "--call-graph", "dwarf,8192",
             "-m", "257", "-o", data, "--", "sleep", str(a.d)],
            [harness, plugin, "-d", str(a.d), "-F", str(a.dwarf_freq), "-m", "dwarf", "-o", col])
        with open(txt, "w") as out:
            c2, r2, _ = run_measured([perf, "script", "-F", "+pid", "-i", data], stdout=out,
                                     stderr=subprocess.DEVNULL)
        dres, dtot, dsamp = perf_script_frames(txt)
        qres2, qtot2, qsamp2 = polyprof_frames(col)
        h = header(col).get("counters", {})
        print("dwarf samples: perf %d, polyprof %d" % (dsamp, qsamp2))
        print("dwarf CPU us per sample: perf record+script %.0f us, polyprof %.0f us (unwinding alone %.0f us), ratio %.2f"
              % (1e6 * (c1 + c2) / max(dsamp, 1), 1e6 * c3 / max(qsamp2, 1),
                 h.get("unwind_ns", 0) / 1000.0 / max(h.get("samples", 1), 1),
                 (c3 / max(qsamp2, 1)) / ((c1 + c2) / max(dsamp, 1)) if dsamp and c1 + c2 else 0))
        print("dwarf peak RSS: perf %d KiB, polyprof %d KiB" % (max(r1, r2), r3))
        print("dwarf frames resolved: perf %.1f%%, polyprof %.1f%%"
              % (100.0 * dres / max(dtot, 1), 100.0 * qres2 / max(qtot2, 1)))
        print("dwarf leaf frame resolved: perf %.1f%%, polyprof %.1f%% of samples" % (100 * LEAF[txt], 100 * LEAF[col]))
    finally:
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
