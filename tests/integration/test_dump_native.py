"""polyprof dump PID of a native program: every thread's native stack as it
is now, blocked threads included (the perf plugin's dump() holds each
thread an instant with ptrace and unwinds its registers and stack copy).
A C program built here has a thread blocked in read() inside
wait_for_work and one spinning in spin_step; both are shown with their
names and those functions in order, as text and JSON. 50 threads are all
dumped, each stopped for well under a millisecond (printed). The program
is unharmed: running, its counter advancing, no thread stopped or left
traced. A thread another tracer holds is reported as such, not touched."""
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cmdutil  # noqa: E402
import pputil  # noqa: E402
from pputil import check  # noqa: E402

if not os.path.exists(pputil.AGENT):
    pputil.skip("agent not built: " + pputil.AGENT)
if not shutil.which("gcc"):
    pputil.skip("gcc not installed")

PROGRAM = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int work_pipe[2];
static volatile unsigned long spins;
static const char *counter_path;

__attribute__((noinline)) static long wait_for_work(void) {
  char c;
  return read(work_pipe[0], &c, 1); /* nobody writes: blocked for good */
}

__attribute__((noinline)) static void *waiter_main(void *arg) {
  (void)arg;
  for (;;) wait_for_work();
  return NULL;
}

__attribute__((noinline)) static void spin_step(void) {
  for (int i = 0; i < 1000; i++) spins++;
}

__attribute__((noinline)) static void *spin_forever(void *arg) {
  (void)arg;
  for (unsigned long n = 0;; n++) {
    spin_step();
    if ((n & 0x3fff) == 0) { /* the test reads how far it got (rarely: spin_step is the point) */
      FILE *f = fopen(counter_path, "w");
      if (f) { fprintf(f, "%lu\n", spins); fclose(f); }
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  int extra = argc > 1 ? atoi(argv[1]) : 0;
  counter_path = argc > 2 ? argv[2] : "/dev/null";
  if (pipe(work_pipe)) return 1;
  pthread_t t;
  pthread_create(&t, NULL, waiter_main, NULL);
  pthread_setname_np(t, "waiter");
  pthread_create(&t, NULL, spin_forever, NULL);
  pthread_setname_np(t, "spinner");
  for (int i = 0; i < extra; i++) {
    char name[16];
    pthread_create(&t, NULL, waiter_main, NULL);
    snprintf(name, sizeof(name), "idle-%d", i);
    pthread_setname_np(t, name);
  }
  printf("ready\n");
  fflush(stdout);
  pause();
  return 0;
}
"""

HOLDER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <unistd.h>
/* holds one thread as its tracer (PTRACE_SEIZE: it keeps running) */
int main(int argc, char **argv) {
  if (argc < 2 || ptrace(PTRACE_SEIZE, atoi(argv[1]), 0, 0) != 0) { perror("seize"); return 1; }
  printf("held\n");
  fflush(stdout);
  pause();
  return 0;
}
"""

tmp = pputil.tempdir("pptest-dump-native-")


def build(name, source):
    src = os.path.join(tmp, name + ".c")
    with open(src, "w") as f:
        f.write(source)
    exe = os.path.join(tmp, name)
    subprocess.run(["gcc", "-g", "-O0", "-fno-omit-frame-pointer", "-pthread", "-o", exe, src], check=True)
    return exe


PROG = build("blocked", PROGRAM)
HOLD = build("holder", HOLDER)
COUNTER = os.path.join(tmp, "counter")


def start(extra=0):
    p = subprocess.Popen([PROG, str(extra), COUNTER], stdout=subprocess.PIPE, text=True)
    check(p.stdout.readline().strip() == "ready", "the program started (%d extra threads)" % extra)
    time.sleep(0.3)
    return p


def threads(pid):
    """tid -> (name, state letter, TracerPid)"""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        base = "/proc/%d/task/%s/" % (pid, tid)
        try:
            name = open(base + "comm").read().strip()
            stat = open(base + "stat").read()
            status = open(base + "status").read()
        except OSError:
            continue
        tracer = int(re.search(r"TracerPid:\s+(\d+)", status).group(1))
        out[int(tid)] = (name, stat[stat.rindex(")") + 2], tracer)
    return out


def counter():
    for _ in range(50):
        try:
            return int(open(COUNTER).read())
        except (OSError, ValueError):
            time.sleep(0.02)
    return -1


def unharmed(p, what, tracer_ok=()):
    time.sleep(0.2)
    check(p.poll() is None, "%s: the program still runs" % what)
    th = threads(p.pid)
    bad = {t: v for t, v in th.items() if v[1] in "tTZ" or (v[2] != 0 and t not in tracer_ok)}
    check(not bad, "%s: no thread stopped, zombie or left traced (%d threads; %s)" % (what, len(th), bad))


def blocks(text):
    """'Stack of' blocks of the text output: tid -> (name, frames)."""
    out = {}
    for b in text.split("\nStack of ")[1:]:
        lines = b.split("\n")
        m = re.match(r'"(.*)" \(thread (\d+), ', lines[0])
        if m:
            out[int(m.group(2))] = (m.group(1), [l.strip() for l in lines[1:] if l.startswith("    ")])
    return out


def index_of(frames, pattern):
    for i, f in enumerate(frames):
        if re.search(pattern, f):
            return i
    return -1


def dump_stats(stderr):
    """From the perf worker's debug line: threads read, the longest a
    thread was stopped (us), the time to read them all (ms)."""
    m = re.findall(r"dump: pid \d+, (\d+) threads, each stopped at most (\d+) us, all read in (\d+) ms", stderr)
    return tuple(int(x) for x in m[-1]) if m else (0, -1, -1)


# two threads of interest: the blocked one and the spinning one
p = start()
try:
    before = counter()
    t0 = time.time()
    r = cmdutil.polyprof("dump", str(p.pid), "-v")
    took = time.time() - t0
    print(r.stdout)
    print(r.stderr[-1500:])
    check(r.returncode == 0, "dump exits 0")
    check("stacks read now" in r.stdout, "dump: stacks read now (the perf plugin's dump()), not a sampling session")
    b = blocks(r.stdout)
    th = threads(p.pid)
    names = {v[0]: t for t, v in th.items()}
    check({"waiter", "spinner"} <= set(names), "the threads are named waiter and spinner (%s)" % names)
    check(set(b) == set(th), "one stack per thread (%s of %s)" % (sorted(b), sorted(th)))
    w = b.get(names.get("waiter"), ("", []))
    s = b.get(names.get("spinner"), ("", []))
    check(w[0] == "waiter" and s[0] == "spinner", "the stacks carry the thread names")
    iread, iwait, imain = index_of(w[1], r"read"), index_of(w[1], r"^wait_for_work"), index_of(w[1], r"^waiter_main")
    check(0 <= iread < iwait < imain, "waiter: read <- wait_for_work <- waiter_main, innermost first (%s)" % w[1][:6])
    ispin, iforever = index_of(s[1], r"^spin_step"), index_of(s[1], r"^spin_forever")
    check(0 <= iforever and (ispin < 0 or ispin < iforever), "spinner: in spin_forever (spin_step) (%s)" % s[1][:4])
    check(index_of(b.get(p.pid, ("", []))[1], r"pause|^main$") >= 0, "main thread: in pause/main (%s)" % b.get(p.pid, ("", []))[1][:4])
    n, us, ms = dump_stats(r.stderr)
    print("dump of %d threads: read in %d ms, each stopped at most %d us; the command took %.2f s" % (n, ms, us, took))
    # a held thread must get a CPU to reach its stop: on a saturated host
    # that takes tens of ms (figures printed above; typical is < 1 ms)
    check(n == len(th) and 0 <= us < 250000, "each thread was stopped briefly (at most %d us)" % us)
    unharmed(p, "after dump")
    after = counter()
    time.sleep(0.3)
    check(counter() > after >= before >= 0, "the spinning thread's counter advances after the dump (%d -> %d)" % (before, counter()))

    r = cmdutil.polyprof("dump", str(p.pid), "--json")
    d = json.loads(r.stdout)
    by_tid = {st["tid"]: st for st in d["stacks"]}
    check(d.get("read") == "now" and set(by_tid) == set(th), "dump --json: read now, one stack per thread")
    jw = by_tid.get(names.get("waiter"), {})
    jnames = [f["name"] for f in jw.get("frames", [])]
    check(jw.get("thread") == "waiter" and 0 <= index_of(jnames, "read") < index_of(jnames, "^wait_for_work$") < index_of(jnames, "^waiter_main$"),
          "dump --json: waiter's frames in order (%s)" % jnames[:5])
    check(all(f["runtime"] in ("native", "kernel") for f in jw.get("frames", [])), "dump --json: the frames are native")
    unharmed(p, "after dump --json")

    # a thread held by another tracer is reported, not touched
    waiter = names.get("waiter")
    h = subprocess.Popen([HOLD, str(waiter)], stdout=subprocess.PIPE, text=True)
    try:
        check(h.stdout.readline().strip() == "held", "the holder traces the waiter thread")
        r = cmdutil.polyprof("dump", str(p.pid))
        print(r.stdout)
        b = blocks(r.stdout)
        reason = b.get(waiter, ("", [""]))[1]
        check(reason and "traced by process %d" % h.pid in reason[0], "traced thread: the reason names its tracer (%s)" % reason)
        check(index_of(b.get(names.get("spinner"), ("", []))[1], "^spin_forever") >= 0, "the other threads are still dumped")
        check(threads(p.pid)[waiter][2] == h.pid, "the other tracer still holds the thread")
        unharmed(p, "dump beside another tracer", tracer_ok=(waiter,))
    finally:
        pputil.kill(h)
    unharmed(p, "after the other tracer left")
finally:
    pputil.kill(p)

# 50 threads: every one appears, quickly
p = start(47)
try:
    th = threads(p.pid)
    check(len(th) == 50, "50 threads (%d)" % len(th))
    t0 = time.time()
    r = cmdutil.polyprof("dump", str(p.pid), "--json", "-v")
    took = time.time() - t0
    d = json.loads(r.stdout)
    by_tid = {st["tid"]: st for st in d["stacks"]}
    check(set(by_tid) == set(th), "50 threads: every thread has a stack (%d)" % len(by_tid))
    idle = [st for st in d["stacks"] if st["thread"].startswith("idle-")]
    check(len(idle) == 47 and all(any(f["name"] == "wait_for_work" for f in st["frames"]) for st in idle),
          "50 threads: the idle ones are all in wait_for_work")
    n, us, ms = dump_stats(r.stderr)
    print("dump of %d threads: read in %d ms, each stopped at most %d us; the command took %.2f s (agent start included)" % (n, ms, us, took))
    check(n == 50 and 0 <= us < 250000, "50 threads: each stopped at most %d us" % us)
    check(0 <= ms < 1000, "50 threads: all read in %d ms, under a second" % ms)
    check(took < 5, "50 threads: the command took %.2f s" % took)
    unharmed(p, "50 threads after dump")
finally:
    pputil.kill(p)

pputil.finish()
