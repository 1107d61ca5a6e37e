"""python.native: native frames under, between and above Python frames.

tests/workloads/python/native_hot.py spends its time in C called from
Python: zlib.compress (deflate) from compress_loop, libc's memset through
ctypes from memset_loop, and libc's qsort from qsort_loop calling back the
Python function compare. Every CPython found runs it at once, one
cpu-mode session with --python-native; each must show deflate above
compress_loop (file:line) and memset above memset_loop, as _[pn] frames
right above the Python frames, under <module>, and qsort's frames between
qsort_loop and compare; most samples must merge. A thread started
mid-session (2.7, 3.12, Debian's 3.11) is picked up. An agent without
CAP_PERFMON falls back to plain sampling with one error line. Then the
option is refused in wall mode with a message naming it.
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import pyutil as py  # noqa: E402

WORKLOAD = py.workload("native_hot.py")
found = py.every_interpreter()


def line_of(text):
    return py.line_with(text, WORKLOAD)


COMPRESS_LINE = line_of("zlib.compress(data, 9)")
MEMSET_LINE = line_of("LIBC.memset(buf, 7, len(buf))")
QSORT_LINE = line_of("LIBC.qsort(arr, len(arr)")
COMPARE_FIRST = line_of("def compare(a, b):")
COMPARE_LINE = line_of("return (x > y) - (x < y)")
PY = py.FRAME_RE

procs = []
try:
    for label, exe, ver in found:
        p, script = py.start_copy(exe, WORKLOAD, ["60"], "ppnat-")
        procs.append((label, ver, p, script))
    py.wait_ready([t[2] for t in procs])
    pids = [t[2].pid for t in procs]
    # a loaded host gives the targets little CPU, and samples follow CPU
    # time: sessions until every target has enough samples (at most 4)
    stacks, counters = [], {}
    for attempt in range(4):
        r, header, more, log = py.profile(pids, "--python-native", duration=8, freq=199)
        u.check(r.returncode == 0, "agent exits 0 (%s)" % r.stderr[-600:])
        stacks += more
        for k, v in (header or {}).get("polyprof", {}).get("python", {}).get("counters",
                                                                             {}).items():
            counters[k] = counters.get(k, 0) + v
        least = min(sum(c for f, c in stacks if any("(" + t[3] + ":" in x for x in f))
                    for t in procs)
        print("note: session %d, fewest samples of a target: %d" % (attempt + 1, least))
        if least >= 150:
            break
    for label, ver, p, script in procs:
        mine = [(f, c) for f, c in stacks if any("(" + script + ":" in x for x in f)]
        total = sum(c for _, c in mine)
        u.check(total > 0, "%s: samples of the workload" % label)

        def under(fn, line, native):
            """samples whose Python leaf is fn at line, with a native frame
            matching native right above it"""
            hit = 0
            for frames, c in mine:
                idx = [i for i, x in enumerate(frames) if PY.match(x)]
                if not idx:
                    continue
                leaf = frames[idx[-1]]
                m = PY.match(leaf)
                if m.group(1).split(".")[-1] != fn or m.group(2) != script or int(m.group(3)) != line:
                    continue
                # native frames, then (the sample in the kernel) kernel frames
                above = [x for x in frames[idx[-1] + 1:] if not x.endswith("_[k]")]
                roots = [PY.match(frames[i]).group(1) for i in idx]
                if roots[0] != "<module>" or not all(x.endswith("_[pn]") for x in above):
                    continue
                if any(native(x[:-5]) for x in above):
                    hit += c
            return hit

        deflate = under("compress_loop", COMPRESS_LINE, lambda n: n.startswith("deflate"))
        memset = under("memset_loop", MEMSET_LINE,
                       lambda n: "memset" in n)
        u.check(deflate > 0, "%s: deflate_[pn] above compress_loop (%s:%d) under <module> (%d of %d)"
                % (label, os.path.basename(script), COMPRESS_LINE, deflate, total))
        u.check(memset > 0, "%s: memset_[pn] above memset_loop (%s:%d) under <module> (%d of %d)"
                % (label, os.path.basename(script), MEMSET_LINE, memset, total))
        # C between two Python frames: qsort_loop -> libc's qsort (its
        # merge sort) -> ctypes' callback -> compare
        between = 0
        for frames, c in mine:
            idx = [i for i, x in enumerate(frames) if PY.match(x)]
            if len(idx) < 2 or PY.match(frames[idx[0]]).group(1) != "<module>":
                continue
            leaf, caller = PY.match(frames[idx[-1]]), PY.match(frames[idx[-2]])
            if leaf.group(1).split(".")[-1] != "compare" or not (
                    COMPARE_FIRST <= int(leaf.group(3)) <= COMPARE_LINE):
                continue
            if (caller.group(1).split(".")[-1], int(caller.group(3))) != ("qsort_loop", QSORT_LINE):
                continue
            mid = frames[idx[-2] + 1:idx[-1]]
            if all(x.endswith("_[pn]") for x in mid) and any("sort" in x for x in mid):
                between += c
        u.check(between > 0, "%s: qsort's frames between qsort_loop (%s:%d) and compare (%d of %d)"
                % (label, os.path.basename(script), QSORT_LINE, between, total))
        # a loaded host reads samples late (those are not interleaved):
        # judged on a share well below what an idle one gives (80-90 %)
        u.check(deflate + memset + between >= total * 0.25,
                "%s: 25 %% of the samples or more in deflate, memset or a qsort callback under "
                "their caller (%d + %d + %d of %d)" % (label, deflate, memset, between, total))

        # never a wrong interleaving: a stack of one loop with the other's
        # C code (an unproven sample has no native frame at all)
        wrong = 0
        for frames, c in mine:
            idx = [i for i, x in enumerate(frames) if PY.match(x)]
            if not idx:
                continue
            fn = PY.match(frames[idx[-1]]).group(1).split(".")[-1]
            above = [x for x in frames[idx[-1] + 1:] if x.endswith("_[pn]")]
            if not above:
                continue
            # compress_loop never goes through ctypes (zlib itself calls
            # memset); memset_loop never through zlib
            if fn == "compress_loop" and any(k in x for x in above
                                             for k in ("ffi", "ctypes", "sort")):
                wrong += c
            if fn == "memset_loop" and any(k in x for x in above
                                           for k in ("deflate", "zlib", "libz", "sort")):
                wrong += c
        u.check(wrong == 0, "%s: no merged stack puts one loop's C code under another (%d)"
                % (label, wrong))
    # kernel frames (a sample taken in the kernel) only on top of the rest
    misplaced = 0
    for frames, c in stacks:
        kinds = [x.endswith("_[k]") for x in frames]
        if True in kinds and not all(kinds[kinds.index(True):]):
            misplaced += c
    u.check(misplaced == 0, "kernel frames only at the leaf end (%d misplaced)" % misplaced)
    merged = counters.get("native_merged", 0)
    mism = counters.get("native_mismatches", 0)
    stale = counters.get("native_stale", 0)
    u.check(merged > 0 and mism <= merged * 0.5,
            "samples read in time mostly merge (%s merged, %s mismatched; %s read late)"
            % (merged, mism, stale))
    # a thread started after the session began gets its event when the
    # plugin next reads the target's threads (every second)
    late = []
    for label, exe, ver in found:
        if label.startswith("debian") or ver[:2] in ((2, 7), (3, 12)):
            p, script = py.start_copy(exe, WORKLOAD, ["20", "late-thread"], "ppnat-")
            late.append((label, p, script))
            procs.append((label, ver, p, script))
    py.wait_ready([t[1] for t in late])
    r, header, lstacks, log = py.profile([t[1].pid for t in late], "--python-native",
                                         duration=5, freq=199)
    for label, p, script in late:
        hit = sum(c for f, c in lstacks
                  if any("late_worker (" + script + ":" in x for x in f)
                  and any(x.startswith("deflate") and x.endswith("_[pn]") for x in f))
        u.check(hit > 0, "%s: a thread started mid-session shows deflate_[pn] under "
                "late_worker (%d samples)" % (label, hit))

    # an agent without CAP_PERFMON (and CAP_SYS_ADMIN, which would do
    # instead): the kernel refuses the events; one error line, and the
    # Python stacks are sampled the plain way at the asked rate
    if shutil.which("setpriv"):
        out = u.tempdir("ppout-")
        cmd = ["setpriv", "--bounding-set=-sys_admin,-perfmon", "--inh-caps=-sys_admin,-perfmon",
               "--"] + u.agent_cmd(out, u.plugin_dir_with(py.PLUGIN), "--pids", str(pids[0]),
                                   "-f", "97", "--python-native", duration=3)
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=120)
        with open(cmd[cmd.index("--log-file") + 1], errors="replace") as f:
            log = f.read()
        _, rstacks = u.parse_col(os.path.join(out, "last_profile.col"))
        n = sum(c for f, c in rstacks if any("(" + procs[0][3] + ":" in x for x in f))
        u.check(r.returncode == 0 and "perf_event_open refused" in log,
                "without CAP_PERFMON: one error line says the events were refused")
        u.check(n >= 97 * 3 * 0.5 and not any(x.endswith("_[pn]") for f, _ in rstacks for x in f),
                "without CAP_PERFMON: plain Python stacks at the plain rate (%d samples)" % n)
    else:
        print("note: setpriv missing, the refusal part is not run")

    # any other mode refuses the option, naming it
    r, header, stacks, log = py.profile(pids[:1], "--python-native", "--python-mode", "wall",
                                        duration=2, freq=20)
    u.check("python.native" in log and "cpu mode only" in log,
            "wall mode refuses --python-native with a message naming it")
finally:
    for _, _, p, _ in procs:
        u.kill(p)
u.finish()
