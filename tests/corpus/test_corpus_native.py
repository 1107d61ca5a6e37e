"""Corpus: native programs from Debian, perf stacks only: xz compresses
generated text at -9, gcc compiles a generated C file at -O2 (cc1 and as
are short-lived children), under the agent as shipped.

A user looks for: every sample under the program's name (xz, cc1, as, gcc;
no appid, native programs have none) and never `:<pid>`, even for the
children that exit long before the session is written; liblzma's and
cc1's known functions in the stacks.
"""
import os
import random
import shutil
import sys

sys.path.insert(0, os.path.dirname(__file__))
import corpusutil as cu  # noqa: E402
from corpusutil import u  # noqa: E402

XZ = shutil.which("xz") or "/usr/bin/xz"
GCC = shutil.which("gcc") or "/usr/bin/gcc"
cu.need(XZ, "xz (xz-utils)")
cu.need(GCC, "gcc")

with cu.Run("native") as run:
    data = os.path.join(run.tmp, "data.txt")
    rnd = random.Random(7)
    words = ["%s%d" % (w, rnd.randrange(50)) for w in ("alpha", "beta", "gamma", "delta", "eps") for _ in range(200)]
    with open(data, "w") as f:
        for _ in range(80000):
            f.write(" ".join(rnd.choice(words) for _ in range(6)) + "\n")
    rc = run.run([XZ, "-9", "-k", "-f", "-T1", data])
    u.check(rc == 0, "xz compressed %d MB (exit %d)" % (os.path.getsize(data) >> 20, rc))
    src = os.path.join(run.tmp, "gen.c")
    with open(src, "w") as f:
        for i in range(600):
            f.write("static int f%d(int *a, int n) { int s = 0; for (int i = 0; i < n; i++) "
                    "{ s += a[i] * %d; if (s > %d) s ^= a[(i * 7) %% n]; } return s; }\n" % (i, i, i * 13))
        f.write("int main(void) { int a[64] = {1}; int s = 0;\n")
        for i in range(600):
            f.write("  s += f%d(a, 64);\n" % i)
        f.write("  return s & 1; }\n")
    rc = run.run([GCC, "-O2", "-c", "-o", os.path.join(run.tmp, "gen.o"), src])
    u.check(rc == 0, "gcc -O2 compiled gen.c (exit %d)" % rc)
lines = run.lines()
xz = [ln for ln in lines if ln.comm == "xz"]
cc = [ln for ln in lines if ln.comm in ("cc1", "as", "gcc")]
cu.dump_top(xz, 3)
cu.dump_top(cc, 3)
u.check(any(ln.has("liblzma.so") or ln.has("lzma_") for ln in xz), "xz: liblzma's code in the stacks")
# Debian's cc1 keeps its dynamic symbols (for GCC plugins): many of its
# functions are named even without debug symbols
named = [f for ln in cc for f in ln.frames if not f.startswith(("[", "(", "__")) and not f.endswith("_[k]")]
u.check(named, "gcc: cc1's own functions named (%d frames, e.g. %s)" % (len(named), sorted(set(named))[:3]))
u.check(all(ln.appid is None for ln in xz + cc), "native programs carry no appid")
cu.check_attribution(run, xz, "xz", cpu_s=run.cpus[0])
cu.check_no_pid_comm(lines, lambda f: "liblzma" in f or f.startswith("lzma_") or "/cc1)" in f, "xz and gcc")
print("FIGURE corpus.native: xz %d samples, cc1/as/gcc %d samples (other builds on the machine count too)"
      % (cu.total(xz), cu.total(cc)))
u.finish()
