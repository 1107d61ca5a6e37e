"""An integer loop for --python-opcodes: on 3.11+ the interpreter
specializes its instructions (BINARY_OP_ADD_INT, FOR_ITER_RANGE, ...).

usage: opcode_loop.py SECONDS
"""
import sys
import time

end = time.time() + float(sys.argv[1])


def add_loop():
    x = 0
    for i in range(100000):
        x = x + i * 3
    return x


print("ready")
sys.stdout.flush()
while time.time() < end:
    add_loop()
