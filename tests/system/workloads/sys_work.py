"""System-test workload, Python 2.7 and 3.x: burns CPU in sys_py_hot (or
sys_py_exec_hot when started as the exec target) for BUSY_MS out of every
PERIOD_MS, for at most LIFETIME_S seconds (see sys_work.c).

Usage: python sys_work.py BUSY_MS PERIOD_MS LIFETIME_S [exec]
"""
import os
import sys
import time


def spin(end):
    x = 1
    while time.time() < end:
        for _ in range(2000):
            x = (x * 1103515245 + 12345) & 0xFFFFFFFF
    return x


def sys_py_hot(ms):
    return spin(time.time() + ms / 1000.0)


def sys_py_exec_hot(ms):
    return spin(time.time() + ms / 1000.0)


def main():
    busy, period, life = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
    hot = sys_py_exec_hot if sys.argv[4:] == ["exec"] else sys_py_hot
    sys.stdout.write("ready %d\n" % os.getpid())
    sys.stdout.flush()
    end = time.time() + life
    while time.time() < end:
        t0 = time.time()
        hot(busy)
        left = period / 1000.0 - (time.time() - t0)
        if left > 0:
            time.sleep(left)


main()
