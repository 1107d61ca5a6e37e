"""perf plugin, real perf_event sampling: the symbol tables of files that no
live process maps any more are dropped at the next snapshot, and memory
goes back to the system; a file still mapped keeps its table (no re-read).

200 short-lived processes, each running its own copy of a binary with a
realistic symbol table (PAD_FUNCS extra functions, ~50 KiB of table each),
burn a little CPU and exit during the first sessions; one long-lived copy
(the keeper) runs through every session. The plugin's debug lines name
every table it loads and drops, so the checks are per file:

  - every copy whose table was loaded has its table dropped by the end;
  - the keeper's table is loaded once and never dropped;
  - the symbol_tables_dropped counter adds up to the copies dropped;
  - the harness's RSS after the last snapshot is below its peak by at
    least half the copies' tables of the busiest session (the memory went
    back to the system, not only to the heap).
"""
import os
import re
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perfutil  # noqa: E402
import pputil  # noqa: E402
from pputil import check  # noqa: E402

perfutil.require_perf()
N = 200
WAVE = 20
BURN_MS = "20"
SESSION_S = 4
SESSIONS = 6
PAD_FUNCS = 3000  # 16 bytes per symbol in the plugin: ~48 KiB of table per copy
PAD_NAME = "pad_symbol_%04d_standing_for_a_real_program_s_code"

tmp = pputil.tempdir("ppperf-exited-")
pad_src = os.path.join(tmp, "pad.c")
with open(pad_src, "w") as f:
    for i in range(PAD_FUNCS):  # global: the compiler keeps them
        f.write("int %s(int x) { return x + %d; }\n" % (PAD_NAME % i, i))
brief = perfutil.build_c("brief", tmp, "-O1", "-fno-omit-frame-pointer", pad_src)
copies = []
for i in range(N):
    b = os.path.join(tmp, "copy%03d" % i)
    shutil.copy(brief, b)  # a distinct inode each: 200 objects
    copies.append(b)
keeper_bin = os.path.join(tmp, "keeper")
shutil.copy(brief, keeper_bin)

state = {"keeper": None, "churn_end": None, "start": None, "exited": 0}


def churn():
    state["start"] = time.monotonic()
    # 3 ms of CPU every 50 ms: sampled in every session, cheap
    state["keeper"] = subprocess.Popen([keeper_bin, "3", str(SESSION_S * SESSIONS + 30)])
    for w in range(0, N, WAVE):
        procs = [subprocess.Popen([b, BURN_MS]) for b in copies[w:w + WAVE]]
        for p in procs:
            p.wait()
            state["exited"] += 1
    state["churn_end"] = time.monotonic()


threads = []


def on_start():
    t = threading.Thread(target=churn)
    t.start()
    threads.append(t)


try:
    prof = perfutil.profile(SESSION_S, freq=199, mode="fp", sessions=SESSIONS, on_start=on_start,
                            verbose=True, timeout=300)
    end = time.monotonic()
finally:
    for t in threads:
        t.join()
    if state["keeper"]:
        pputil.kill(state["keeper"])

loaded, dropped = {}, {}  # path -> [session index...]
peak_session_kb = 0
session, session_kb = 0, 0
for line in prof.stderr.splitlines():
    m = re.search(r"symbol table of (\S+) loaded: \d+ symbols, (\d+) KiB", line)
    if m:
        loaded.setdefault(m.group(1), []).append(session)
        if m.group(1).startswith(os.path.join(tmp, "copy")):
            session_kb += int(m.group(2))
        continue
    m = re.search(r"tables of (\S+) dropped", line)
    if m:
        dropped.setdefault(m.group(1), []).append(session)
        continue
    if line.startswith("[debug] perf: session: "):  # one per snapshot
        peak_session_kb = max(peak_session_kb, session_kb)
        session, session_kb = session + 1, 0

copies_loaded = [c for c in copies if c in loaded]
copies_dropped = [c for c in copies_loaded if c in dropped]
print("%d sessions of %d s; churn of %d copies ended %.1f s after sampling started, %.1f s before "
      "the end" % (session, SESSION_S, state["exited"], state["churn_end"] - state["start"],
                   end - state["churn_end"]))
print("copies: %d tables loaded, %d dropped; keeper loaded in sessions %s, dropped in %s"
      % (len(copies_loaded), len(copies_dropped), loaded.get(keeper_bin), dropped.get(keeper_bin)))
print("per session:", [{k: c.get(k) for k in ("symbol_loads", "symbol_tables_dropped", "symbol_tables",
                                               "symbol_table_kb")} for c in prof.session_counters])
rss = prof.header.get("rss_kb", [])
print("RSS after each snapshot (KiB): %s, peak %d KiB; copies' tables of the busiest session %d KiB"
      % (rss, prof.header.get("max_rss_kb", 0), peak_session_kb))

check(state["exited"] == N, "all %d short-lived copies ran and exited (%d)" % (N, state["exited"]))
check(end - state["churn_end"] > SESSION_S + 1,
      "precondition: the last session had no churn (%.1f s between its end and the last exit)"
      % (end - state["churn_end"]))
check(len(copies_loaded) >= N // 2, "most copies were sampled and their tables loaded (%d of %d)"
      % (len(copies_loaded), N))
check(len(copies_dropped) == len(copies_loaded),
      "every loaded copy's table was dropped once its process exited (%d of %d)"
      % (len(copies_dropped), len(copies_loaded)))
check(all(len(v) == 1 for k, v in loaded.items() if k in copies_loaded),
      "each copy's table was read once")
check(len(loaded.get(keeper_bin, [])) == 1,
      "the keeper's table was read once (sessions %s)" % loaded.get(keeper_bin))
check(keeper_bin not in dropped, "the keeper's table, still mapped, was never dropped")
total_dropped = sum(c.get("symbol_tables_dropped", 0) for c in prof.session_counters)
check(total_dropped >= len(copies_dropped),
      "symbol_tables_dropped counts them (%d >= %d)" % (total_dropped, len(copies_dropped)))
check(len(rss) == SESSIONS and peak_session_kb > 2048,
      "precondition: RSS after each snapshot reported, the copies' tables are large (%d KiB)"
      % peak_session_kb)
if rss:
    check(rss[-1] <= prof.header["max_rss_kb"] - peak_session_kb // 2,
          "memory went back: RSS after the last snapshot %d KiB <= peak %d - %d KiB"
          % (rss[-1], prof.header["max_rss_kb"], peak_session_kb // 2))
shutil.rmtree(tmp, ignore_errors=True)
pputil.finish()
