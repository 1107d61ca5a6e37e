"""One thread sleeps, one burns CPU (profile types: wall shows both, cpu
only the burner). Usage: sleep_burn.py SECONDS"""
import sys
import threading
import time


def sleeper():
    while True:
        time.sleep(0.05)


def burner():
    x = 0
    while True:
        x += 1


threading.Thread(target=sleeper, daemon=True).start()
threading.Thread(target=burner, daemon=True).start()
print("ready", flush=True)
time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 30)
