"""Python workloads for the python plugin's tests (2.7 and 3.x syntax).

    python workload.py <case> [seconds] [idle]

With "idle" the leaf sleeps instead of spinning (stack-shape tests run many
interpreters at once in wall mode and must not load the machine).

Function names and line numbers are asserted by the tests: keep the
LINE_* markers on the lines they name (the tests find them by text).
"""
import hashlib
import sys
import threading
import time

DEADLINE = time.time() + (float(sys.argv[2]) if len(sys.argv) > 2 else 600)
IDLE = len(sys.argv) > 3 and sys.argv[3] == "idle"


def spin(seconds):
    if IDLE:
        time.sleep(seconds)  # LINE_SPIN_IDLE
        return 0
    end = time.time() + seconds
    x = 0
    while time.time() < end:
        x += 1  # LINE_SPIN
    return x


def inner_leaf():
    while time.time() < DEADLINE:
        spin(0.05)  # LINE_INNER


def middle_frame():
    inner_leaf()  # LINE_MIDDLE


def outer_frame():
    middle_frame()  # LINE_OUTER


class Worker(object):
    def run_method(self):
        while time.time() < DEADLINE:
            spin(0.05)  # LINE_METHOD


def three_parts():
    spin(0.03)  # LINE_THREE


def one_part():
    spin(0.01)  # LINE_ONE


def split():
    while time.time() < DEADLINE:
        three_parts()
        one_part()


def sleeper_thread():
    while time.time() < DEADLINE:
        time.sleep(0.5)  # LINE_SLEEP


def busy_thread():
    while time.time() < DEADLINE:
        spin(0.05)  # LINE_BUSY


def threads():
    t = threading.Thread(target=sleeper_thread)
    t.daemon = True
    t.start()
    busy_thread()


def c_call_thread():
    data = b"x" * (64 << 20)
    while time.time() < DEADLINE:
        hashlib.sha256(data).hexdigest()  # LINE_CCALL


def gil():
    t = threading.Thread(target=c_call_thread)
    t.daemon = True
    t.start()
    busy_thread()


def recurse(n):
    if n == 0:
        while time.time() < DEADLINE:
            spin(0.05)  # LINE_RECURSE_LEAF
        return 0
    return recurse(n - 1)  # LINE_RECURSE


def main():
    case = sys.argv[1] if len(sys.argv) > 1 else "nested"
    sys.setrecursionlimit(5000)
    if case == "nested":
        outer_frame()
    elif case == "method":
        Worker().run_method()
    elif case == "split":
        split()
    elif case == "threads":
        threads()
    elif case == "gil":
        gil()
    elif case == "recursion":
        recurse(300)
    elif case == "sleep":
        while time.time() < DEADLINE:
            time.sleep(0.2)
    else:
        raise SystemExit("unknown case " + case)


if __name__ == "__main__":
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    main()
