"""asyncio tasks awaiting each other through gather(), a TaskGroup and a
nested coroutine, or waiting in known functions.

usage: async_tree.py run SECONDS    three computing tasks, each awaited
                                    by a parent task in a different way:
  "gparent" awaits gather(g1)            (g1 computes in gather_child)
  "tparent" runs g TaskGroup with t1     (t1 computes in group_child;
                                          3.11+: no TaskGroup before)
  "nparent" awaits nested_helper(n1), a coroutine that awaits n1
                                         (n1 computes in nested_child)
       async_tree.py wait SECONDS   nothing computes: "a1", "a2", "a3" sleep
                                    in wait_a, "b1" in wait_b, and "main"
                                    awaits gather() of the four
Prints "ready" once every task exists. 3.6 and 3.7 have no task names:
their tasks are known by their coroutines (gather_parent, gather_child,
nested_parent, nested_child, wait_a, wait_b, main).
"""
import asyncio
import sys
import time

mode, seconds = sys.argv[1], float(sys.argv[2])
end = time.time() + seconds


def named(coro, name):
    if sys.version_info < (3, 7):
        return asyncio.ensure_future(coro)
    if sys.version_info < (3, 8):
        return asyncio.create_task(coro)
    return asyncio.create_task(coro, name=name)


def spin():
    x = 0
    for i in range(20000):
        x += i * i
    return x


async def compute():
    while time.time() < end:
        spin()
        await asyncio.sleep(0)


async def gather_child():
    await compute()


async def group_child():
    await compute()


async def nested_child():
    await compute()


async def gather_parent():
    g1 = named(gather_child(), "g1")
    await asyncio.gather(g1)  # GATHER_AWAIT


async def group_parent():
    async with asyncio.TaskGroup() as tg:  # GROUP_AWAIT
        tg.create_task(group_child(), name="t1")


async def nested_helper(task):
    await task  # HELPER_AWAIT


async def nested_parent():
    n1 = named(nested_child(), "n1")
    await nested_helper(n1)  # NESTED_AWAIT


async def wait_a():
    await asyncio.sleep(seconds)  # WAIT_A


async def wait_b():
    await asyncio.sleep(seconds)  # WAIT_B


async def main():
    if sys.version_info >= (3, 8):
        asyncio.current_task().set_name("main")
    if mode == "run":
        parents = [named(gather_parent(), "gparent"),
                   named(nested_parent(), "nparent")]
        if hasattr(asyncio, "TaskGroup"):
            parents.append(named(group_parent(), "tparent"))
        await asyncio.sleep(0.05)
        print("ready")
        sys.stdout.flush()
        await asyncio.gather(*parents)  # RUN_AWAIT
    else:
        tasks = [named(wait_a(), "a%d" % i) for i in (1, 2, 3)]
        tasks.append(named(wait_b(), "b1"))
        await asyncio.sleep(0.05)
        print("ready")
        sys.stdout.flush()
        await asyncio.gather(*tasks)  # MAIN_AWAIT


if hasattr(asyncio, "run"):
    asyncio.run(main())
else:  # 3.6
    asyncio.get_event_loop().run_until_complete(main())
