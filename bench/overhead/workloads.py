"""One CPU-bound workload per runtime, for bench/overhead and bench/soak.

Reuses the test workloads of tests/workloads/ and starts them the way the
integration tests do. Every workload runs at nice 19 so the machine's other
users keep their CPU; the agent is not niced, so it is never starved by
them. A runtime that is not installed is reported and left out (the caller
prints what ran).
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
W = os.path.join(SRC, "tests", "workloads")
sys.path.insert(0, os.path.join(W, "dotnet"))
sys.path.insert(0, os.path.join(W, "java"))

SECONDS = 100000  # the workloads run until killed


def _nice():
    os.nice(19)


def _popen(cmd, **kw):
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_nice,
                            **kw)


def build_native(work):
    """hot.c with frame pointers (the native C workload); returns its path."""
    exe = os.path.join(work, "hot")
    subprocess.run(["gcc", "-O2", "-g", "-fno-omit-frame-pointer", "-o", exe,
                    os.path.join(W, "perf", "hot.c")], check=True)
    return exe


def build_go(work):
    go = shutil.which("go")
    if not go:
        return None
    exe = os.path.join(work, "gohot")
    env = dict(os.environ, GOFLAGS="-mod=mod", GO111MODULE="off", GOTOOLCHAIN="local")
    env.setdefault("GOCACHE", os.path.join(tempfile.gettempdir(), "polyprof-bench-gocache"))
    subprocess.run([go, "build", "-o", exe, os.path.join(W, "perf", "gohot.go")], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    return exe



def real_python(exe):
    """The interpreter itself, not a pyenv shim: a shim for a version that is
    installed but not selected (pyenv global) exits with status 127."""
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/%s*/bin/%s" % (exe[len("python"):], exe))))
    if exe != "python3" and found:
        return found[-1]
    return shutil.which(exe)

class Workloads:
    """Builds then starts the workloads; stop() kills every one of them."""

    def __init__(self, build_dir):
        self.build_dir = build_dir
        self.work = tempfile.mkdtemp(prefix="ppbench-wl-")
        self.procs = {}  # name -> Popen
        self.missing = {}  # name -> why

    def _start(self, name, cmd, **kw):
        try:
            self.procs[name] = _popen(cmd, **kw)
        except OSError as e:
            self.missing[name] = str(e)

    def start(self):
        self._start("native-c", [build_native(self.work), str(SECONDS)])
        try:
            go = build_go(self.work)
        except subprocess.CalledProcessError as e:
            go, self.missing["go"] = None, "go build failed: %s" % e
        if go:
            self._start("go", [go, str(SECONDS)])
        elif "go" not in self.missing:
            self.missing["go"] = "golang-go not installed"
        py = os.path.join(W, "python", "workload.py")
        for name, exe in (("python2.7", "python2.7"), ("python3", "python3")):
            path = real_python(exe)
            if path:
                self._start(name, [path, py, "nested", str(SECONDS)])
            else:
                self.missing[name] = exe + " not on PATH"
        if shutil.which("javac"):
            import javawork
            classes = javawork.compile_workloads(os.path.join(self.work, "java"))
            self._start("java", ["java", "-XX:CompileCommand=quiet", "-cp", classes, "HotCold", str(SECONDS), "1"])
        else:
            self.missing["java"] = "no JDK"
        node = shutil.which("node") or shutil.which("nodejs")
        if node:
            self._start("nodejs", [node, os.path.join(W, "nodejs", "split.js")])
        else:
            self.missing["nodejs"] = "node not installed"
        if shutil.which("php"):
            self._start("php", ["php", os.path.join(W, "php", "busy.php"), str(SECONDS)])
        else:
            self.missing["php"] = "php not installed"
        if shutil.which("ruby"):
            self._start("ruby", ["ruby", os.path.join(W, "ruby", "known.rb")])
        else:
            self.missing["ruby"] = "ruby not installed"
        if shutil.which("dotnet"):
            import build_workload
            try:
                out = build_workload.build(self.build_dir)
                self._start("dotnet", [os.path.join(out, "PolyprofWorkload"), str(SECONDS), "split"],
                            env=build_workload.dotnet_env())
            except (RuntimeError, OSError) as e:
                self.missing["dotnet"] = "workload build failed: %s" % e
        else:
            self.missing["dotnet"] = "dotnet SDK not installed"
        time.sleep(3)  # interpreters and JITs past their start-up
        for name, p in list(self.procs.items()):
            if p.poll() is not None:
                self.missing[name] = "exited at start with status %s" % p.returncode
                del self.procs[name]
        return self

    def pids(self):
        return {n: p.pid for n, p in self.procs.items()}

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
        for p in self.procs.values():
            p.wait()
        shutil.rmtree(self.work, ignore_errors=True)
