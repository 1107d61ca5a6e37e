"""Blocks 3:1 in wait_long and wait_short (30 ms and 10 ms sleeps) on one
thread, the main thread waiting for it (off-CPU profile with Python
frames). Usage: block_3to1.py SECONDS"""
import sys
import threading
import time


def wait_long():
    time.sleep(0.03)


def wait_short():
    time.sleep(0.01)


def blocker():
    while True:
        wait_long()
        wait_short()


# a name of its own: perf's native stacks of this process would carry it
with open("/proc/self/comm", "w") as f:
    f.write("block3to1")
threading.Thread(target=blocker, daemon=True).start()
print("ready", flush=True)
time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 30)
