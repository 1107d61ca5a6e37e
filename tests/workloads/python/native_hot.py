# Hot spots in C called from Python, for python.native: zlib.compress of a
# big buffer (deflate) and ctypes calls of libc's memset, each from its own
# function. Runs for argv[1] seconds (default 30); works on 2.7 and 3.x.
import ctypes
import ctypes.util
import sys
import time
import zlib


def compress_loop(data, until):
    while time.time() < until:
        zlib.compress(data, 9)


def memset_loop(buf, until):
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    while time.time() < until:
        libc.memset(buf, 7, len(buf))


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
    data = b"".join(b"%d polyprof native frames " % i for i in range(100000))
    buf = ctypes.create_string_buffer(8 << 20)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    end = time.time() + seconds
    while time.time() < end:
        compress_loop(data, time.time() + 0.2)
        memset_loop(buf, time.time() + 0.2)


main()
