"""A program that spends a known share of its time in the garbage
collector: it makes cyclic garbage with low collection thresholds and
times every collection itself (gc.callbacks; on 2.7, which has no
callbacks, automatic collection is off and it times its own gc.collect()
calls). Every 100 ms it writes "<seconds> <seconds in gc>" (cumulative,
perf_counter) to the file named by its first argument.

usage: gc_heavy.py STATUS_FILE SECONDS
"""
import gc
import os
import sys
import time

clock = getattr(time, "perf_counter", time.time)
status, seconds = sys.argv[1], float(sys.argv[2])
in_gc = [0.0]
started = [0.0]


def on_gc(phase, info):
    if phase == "start":
        started[0] = clock()
    else:
        in_gc[0] += clock() - started[0]


class Node(object):
    def __init__(self, other):
        self.other = other
        self.payload = [other, self]


def make_cycles(n):
    for _ in range(n):
        a = Node(None)
        b = Node(a)
        a.other = b  # GC_CYCLE


# long-lived objects make each collection of the old generation cost more
keep = [[i, str(i)] for i in range(100000)]
if hasattr(gc, "callbacks"):
    gc.set_threshold(700, 2, 2)
    gc.callbacks.append(on_gc)
else:
    gc.disable()

t0 = clock()
last = 0.0
print("ready")
sys.stdout.flush()
while clock() - t0 < seconds:
    make_cycles(200)
    if not hasattr(gc, "callbacks"):
        s = clock()
        gc.collect(0 if int(s * 10) % 3 else 2)  # GC_CALL
        in_gc[0] += clock() - s
    now = clock()
    if now - last >= 0.1:
        last = now
        tmp = status + ".tmp"
        with open(tmp, "w") as f:
            f.write("%.6f %.6f\n" % (now - t0, in_gc[0]))
        os.rename(tmp, status)
