"""A plugin built out of tree from an installed SDK alone.

`cmake --install` of the build tree into a fresh prefix, then the example
plugin's sources compiled with nothing but what that prefix holds
(`pkg-config --cflags --libs polyprof-plugin`: the public headers and the
runtime-plugin kit, no -I into the source tree), both with the plain
compiler line and with the SDK's own Makefile. The agent loads the result
with --example-mode states and its frames reach the profile. The installed
pkg-config file carries the header's ABI version.
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
u.finish()
