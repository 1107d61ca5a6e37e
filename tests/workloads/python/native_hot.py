# Hot spots in C called from Python, for python.native: zlib.compress of a
# big buffer (deflate), ctypes calls of libc's memset, and libc's qsort
# calling back into Python for every comparison (C between two Python
# frames), each from its own function. Runs for argv[1] seconds (default
# 30); works on 2.7 and 3.x. With "late-thread" as argv[2]: only a thread
# started a second in compresses.
import ctypes
import ctypes.util
import sys
import time
import zlib

LIBC = ctypes.CDLL(ctypes.util.find_library("c"))
CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))


def compress_loop(data, until):
    while time.time() < until:
        zlib.compress(data, 9)


def memset_loop(buf, until):
    while time.time() < until:
        LIBC.memset(buf, 7, len(buf))


def compare(a, b):
    # long enough that a sample taken in C under it most likely still
    # finds it when the Python stack is read
    x, y = a[0], b[0]
    for _ in range(200):
        x += 0
    return (x > y) - (x < y)


def qsort_loop(values, until):
    arr = (ctypes.c_int * len(values))()
    cmp = CMP(compare)
    while time.time() < until:
        arr[:] = values
        LIBC.qsort(arr, len(arr), ctypes.sizeof(ctypes.c_int), cmp)


def late_thread(seconds, data):
    """The main thread sleeps; a thread started a second after "ready"
    compresses (a thread the sampler must pick up after it started)."""
    import threading

    def late_worker():
        compress_loop(data, time.time() + seconds)

    sys.stdout.write("ready\n")
    sys.stdout.flush()
    time.sleep(1.0)
    t = threading.Thread(target=late_worker)
    t.start()
    t.join()


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
    data = b"".join(b"%d polyprof native frames " % i for i in range(100000))
    buf = ctypes.create_string_buffer(8 << 20)
    values = [(i * 7919) % 2003 for i in range(2000)]
    if len(sys.argv) > 2 and sys.argv[2] == "late-thread":
        late_thread(seconds, data)
        return
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    end = time.time() + seconds
    while time.time() < end:
        compress_loop(data, time.time() + 0.2)
        memset_loop(buf, time.time() + 0.2)
        qsort_loop(values, time.time() + 0.4)


main()
