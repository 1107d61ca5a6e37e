"""Python workloads for the python plugin's tests (2.7 and 3.x syntax).

    python workload.py <case> [seconds] [idle]

With "idle" the leaf sleeps instead of spinning (stack-shape tests run many
interpreters at once in wall mode and must not load the machine).

Function names and line numbers are asserted by the tests: keep the
LINE_* markers on the lines they name (the tests find them by text).
"""
import io
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


def work(n):
    x = 0
    for i in range(n):
        x += i  # LINE_WORK
    return x


# The split is by work, not by wall-clock slices: on a loaded machine a
# time-sliced loop measures the scheduler, and short cycles keep the
# sampler from aliasing with the loop's period.
def three_parts():
    # the very same work three times (one work(30000) is not 3x work(10000):
    # its sums grow larger)
    work(10000)  # LINE_THREE
    work(10000)
    work(10000)


def one_part():
    work(10000)  # LINE_ONE


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


def c_call_thread(buf):
    f = io.open("/dev/zero", "rb", buffering=0)
    while time.time() < DEADLINE:
        f.readinto(buf)  # LINE_CCALL (a C call that runs without the GIL, 2.7 too)


def gil():
    buf = bytearray(16 << 20)
    t = threading.Thread(target=c_call_thread, args=(buf,))
    t.daemon = True
    t.start()
    busy_thread()


def before_exec():
    spin(0.05)  # LINE_BEFORE_EXEC


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
    elif case == "deep50":
        recurse(46)  # <module>, main, 47 x recurse, spin: 50 frames
    elif case == "exec":
        # argv[3]: another interpreter; it replaces this one after a while
        end = time.time() + 2
        while time.time() < end:
            before_exec()
        import os
        os.execv(sys.argv[3], [sys.argv[3], sys.argv[0], "nested", sys.argv[2]])
    elif case == "sleep":
        while time.time() < DEADLINE:
            time.sleep(0.2)
    else:
        raise SystemExit("unknown case " + case)


if __name__ == "__main__":
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    main()
