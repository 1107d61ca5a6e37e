"""Three asyncio tasks in a 3:1:0 CPU split, awaiting each other in known
chains: "hot" computes 3 units per turn, "warm" 1 unit, "idle" none (it
awaits "hot"); the main task ("main") awaits "warm". Every turn ends in
asyncio.sleep(0), so the loop alternates the two computing tasks.
Every 100 ms it writes "<seconds in hot's spin> <seconds in warm's spin>"
(cumulative, perf_counter: time preempted counts, as it does for a
sampler counting runnable threads) to STATUS_FILE.

3.6 and 3.7 have no task names: their tasks are known by their
coroutines (main, hot_loop, warm_loop, idle_wait).

usage: async_chain.py SECONDS STATUS_FILE [subclass]
  subclass: hot, warm and idle are instances of a Python class derived
  from asyncio.Task (made by the loop's task factory); main stays a Task.
"""
import asyncio
import os
import sys
import time

seconds, status = float(sys.argv[1]), sys.argv[2]
subclass = sys.argv[3:] == ["subclass"]
end = time.time() + seconds
spent = {"hot": 0.0, "warm": 0.0}
last = [0.0]


def spin(units):
    x = 0
    for i in range(units * 20000):
        x += i * i
    return x


def timed_spin(who, units):
    t = time.perf_counter()
    spin(units)
    now = time.perf_counter()
    spent[who] += now - t
    if now - last[0] >= 0.1:
        last[0] = now
        with open(status + ".tmp", "w") as f:
            f.write("%.6f %.6f\n" % (spent["hot"], spent["warm"]))
        os.rename(status + ".tmp", status)


async def hot_loop():
    while time.time() < end:
        timed_spin("hot", 3)
        await asyncio.sleep(0)


async def warm_loop():
    while time.time() < end:
        timed_spin("warm", 1)
        await asyncio.sleep(0)


async def idle_wait(task):
    await task  # IDLE_AWAIT


class CountingTask(asyncio.Task):
    """A task class written in Python: its instances are the C Task's."""
    steps = 0


def named(coro, name):
    if sys.version_info < (3, 7):
        return asyncio.ensure_future(coro)
    if sys.version_info < (3, 8):
        return asyncio.create_task(coro)
    return asyncio.create_task(coro, name=name)


async def main():
    if sys.version_info >= (3, 8):
        asyncio.current_task().set_name("main")
    if subclass:
        asyncio.get_running_loop().set_task_factory(
            lambda loop, coro, **kw: CountingTask(coro, loop=loop, **kw))
    hot = named(hot_loop(), "hot")
    warm = named(warm_loop(), "warm")
    idle = named(idle_wait(hot), "idle")
    print("ready")
    sys.stdout.flush()
    await warm  # MAIN_AWAIT
    await idle


if hasattr(asyncio, "run"):
    asyncio.run(main())
else:  # 3.6
    asyncio.get_event_loop().run_until_complete(main())
