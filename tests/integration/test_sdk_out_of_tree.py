"""A plugin built out of tree from an installed SDK alone.

`cmake --install` of the build tree into a fresh prefix, then the example
plugin's sources compiled with nothing but what that prefix holds
(`pkg-config --cflags --libs polyprof-plugin`: the public headers and the
runtime-plugin kit, no -I into the source tree), both with the plain
compiler line and with the SDK's own Makefile. The agent loads the result
with --example-mode states and its frames reach the profile. The installed
pkg-config file carries the header's ABI version, and every installed
header compiles on its own under strict C11.

The tutorial of docs/plugin-sdk.md is built from the page's own listing the
same way, and its frames are checked as the page shows them.
"""
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402

for tool in ("cc", "pkg-config", "make"):
    if not shutil.which(tool):
        u.skip(tool + " not installed")

prefix = u.tempdir("ppsdk-prefix-")
r = subprocess.run(["cmake", "--install", u.BUILD, "--prefix", prefix], capture_output=True, text=True)
u.check(r.returncode == 0, "cmake --install --prefix works: %s" % r.stderr[-500:])
pc = os.path.join(prefix, "lib", "pkgconfig", "polyprof-plugin.pc")
u.check(os.path.exists(pc), "the prefix has lib/pkgconfig/polyprof-plugin.pc")
for rel in ("include/polyprof/plugin.h", "include/polyprof/kit.h", "include/polyprof/kit/target_table.h",
            "include/polyprof/kit/stack_table.h", "include/polyprof/kit/target_files.h", "lib/libpolyprof-kit.a"):
    u.check(os.path.exists(os.path.join(prefix, rel)), "the prefix has " + rel)

env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
flags = subprocess.run(["pkg-config", "--cflags", "--libs", "polyprof-plugin"], env=env, capture_output=True,
                       text=True)
u.check(flags.returncode == 0, "pkg-config finds polyprof-plugin in the prefix")
words = flags.stdout.split()
u.check(not any(w.startswith("-I") and os.path.realpath(w[2:]).startswith(u.SRC) for w in words),
        "no -I into the source tree: %s" % flags.stdout.strip())

# the ABI version in the .pc file is the header's
with open(os.path.join(u.SRC, "include", "polyprof", "plugin.h")) as f:
    header = f.read()
for part in ("major", "minor"):
    want = re.search(r"#define PP_ABI_%s (\d+)" % part.upper(), header).group(1)
    got = subprocess.run(["pkg-config", "--variable=abi_" + part, "polyprof-plugin"], env=env,
                         capture_output=True, text=True).stdout.strip()
    u.check(got == want, "pkg-config abi_%s %s == plugin.h's %s" % (part, got, want))

# every installed header stands alone, without feature macros
for root, _, files in os.walk(os.path.join(prefix, "include", "polyprof")):
    for h in sorted(files):
        rel = os.path.relpath(os.path.join(root, h), os.path.join(prefix, "include"))
        probe = os.path.join(u.tempdir("ppsdk-hdr-"), "probe.c")
        with open(probe, "w") as f:
            f.write('#include "%s"\nint pp_probe_unused;\n' % rel)
        r = subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-pedantic", "-Werror", "-c", probe, "-o",
                            probe + ".o"] + [w for w in words if w.startswith("-I")], capture_output=True, text=True)
        u.check(r.returncode == 0, "%s compiles alone under -std=c11 -pedantic: %s" % (rel, r.stderr[-500:]))

# 1. the plain compiler line, from a directory outside the tree
work = u.tempdir("ppsdk-build-")
srcs = [os.path.join(u.SRC, "plugins", "example", f) for f in sorted(os.listdir(os.path.join(u.SRC, "plugins", "example")))
        if f.endswith(".c")]
so = os.path.join(work, "example.so")
r = subprocess.run(["cc", "-shared", "-fPIC", "-o", so] + srcs + words, cwd=work, capture_output=True, text=True)
u.check(r.returncode == 0 and os.path.exists(so), "cc -shared -fPIC example/*.c $(pkg-config ...) builds: %s"
        % r.stderr[-1500:])

# 2. the SDK's Makefile (what polyprof-dev ships next to the example)
mk = os.path.join(u.tempdir("ppsdk-make-"), "ex")
os.makedirs(mk)
shutil.copy(os.path.join(u.SRC, "packaging", "sdk", "Makefile"), mk)
for s in srcs:
    shutil.copy(s, mk)
r = subprocess.run(["make", "-C", mk, "NAME=example"], env=env, capture_output=True, text=True)
u.check(r.returncode == 0 and os.path.exists(os.path.join(mk, "example.so")),
        "the SDK Makefile builds it too: %s" % (r.stdout + r.stderr)[-1500:])

# the agent loads the out-of-tree build, and its frames reach the profile
plugins = u.plugin_dir_with(so)
out = u.tempdir("ppsdk-out-")
sleeper = u.spawn(["sleep", "300"])
try:
    time.sleep(0.2)
    r = u.run_agent(out, plugins, "--example-mode", "states", "--pids", str(sleeper.pid), "-f", "20", duration=2)
    u.check(r.returncode == 0, "agent exits 0 (stderr: %s)" % r.stderr[-1500:])
    _, stacks = u.parse_col(os.path.join(out, "last_profile.col"))
    mine = [(f, c) for f, c in stacks if len(f) >= 3 and f[2] == "sleep"]
    u.check(any("[thread-state S]" in f for f, _ in mine),
            "the out-of-tree plugin's frames are in the profile: %s" % mine[:3])
finally:
    u.kill(sleeper)

# the tutorial, from the page's own listing
with open(os.path.join(u.SRC, "docs", "plugin-sdk.md"), encoding="utf-8") as f:
    page = f.read()
m = re.search(r"<!-- tutorial: threads.c -->\n```c\n(.*?)```", page, re.S)
u.check(m is not None, "docs/plugin-sdk.md has the tutorial listing")
tut = u.tempdir("ppsdk-tutorial-")
with open(os.path.join(tut, "threads.c"), "w") as f:
    f.write(m.group(1) if m else "")
r = subprocess.run(["cc", "-std=c11", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-Wall", "-Wextra",
                    "-Wno-unused-parameter", "-Werror", "-Wl,--no-undefined", "-o", "threads.so", "threads.c"] + words,
                   cwd=tut, capture_output=True, text=True)
u.check(r.returncode == 0, "the tutorial builds with the page's command: %s" % r.stderr[-1500:])
busy = u.spawn([sys.executable, "-c", "while True: pass"])
idle = u.spawn(["sleep", "300"])
try:
    time.sleep(0.3)
    out = u.tempdir("ppsdk-tutorial-out-")
    r = u.run_agent(out, u.plugin_dir_with(os.path.join(tut, "threads.so")), "--threads-mode", "cpu", "--pids",
                    "%d,%d" % (busy.pid, idle.pid), "-f", "20", duration=3)
    u.check(r.returncode == 0, "agent with the tutorial plugin exits 0: %s" % r.stderr[-800:])
    _, stacks = u.parse_col(os.path.join(out, "last_profile.col"))
    def count(comm, leaf):
        return sum(c for f, c in stacks if f[2] == comm and f[-1] == leaf)
    busy_comm = open("/proc/%d/comm" % busy.pid).read().strip()
    on, off = count(busy_comm, "[on cpu]"), count(busy_comm, "[off cpu]")
    u.check(on >= 20 and on > 3 * off, "the busy process is mostly [on cpu] (%d on, %d off)" % (on, off))
    u.check(count("sleep", "[off cpu]") >= 20 and count("sleep", "[on cpu]") == 0,
            "the sleeper is [off cpu] only: %s" % [(f, c) for f, c in stacks if f[2] == "sleep"])
finally:
    u.kill(busy)
    u.kill(idle)
u.finish()
