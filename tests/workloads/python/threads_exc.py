"""Three threads for the thread filters: the main thread computes outside
any exception (plain_work); "exc-worker" computes inside an except block
(in_handler) and outside of one (outside_handler); "exc-sleeper" sleeps
inside an except block (sleep_in_handler). The workers name themselves
with prctl(PR_SET_NAME), which is the kernel's thread name.

usage: threads_exc.py SECONDS
"""
import ctypes
import ctypes.util
import sys
import threading
import time

libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
seconds = float(sys.argv[1])
end = time.time() + seconds


def name_me(name):
    libc.prctl(15, ctypes.c_char_p(name.encode()), 0, 0, 0)  # PR_SET_NAME


def spin(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


def plain_work():
    return spin(20000)


def in_handler():
    return spin(20000)


def outside_handler():
    return spin(20000)


def handle_once():
    # raised and handled inside this function, so that on 2.7, too, the
    # exception is no longer the thread's once it returns
    try:
        raise ValueError("x")
    except ValueError:
        in_handler()


def sleep_in_handler():
    try:
        raise KeyError("y")
    except KeyError:
        while time.time() < end:
            time.sleep(0.05)


def worker():
    name_me("exc-worker")
    while time.time() < end:
        handle_once()
        outside_handler()


def sleeper():
    name_me("exc-sleeper")
    sleep_in_handler()


for fn in (worker, sleeper):
    t = threading.Thread(target=fn)
    t.daemon = True
    t.start()
print("ready")
sys.stdout.flush()
while time.time() < end:
    plain_work()
