"""Helpers for the java plugin's integration tests and benchmark (stdlib only).

Compiles the Java workloads of this folder with the JDK's javac and starts
them; skips (exit 77) when no JDK is installed.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def find_jdk():
    """(java, javac, jcmd) or None."""
    java = shutil.which("java")
    javac = shutil.which("javac")
    jcmd = shutil.which("jcmd")
    if not (java and javac):
        return None
    return java, javac, jcmd


def compile_workloads(dest=None):
    """Compiles every .java here into dest (a new directory if None)."""
    dest = dest or tempfile.mkdtemp(prefix="ppjava-")
    srcs = [os.path.join(HERE, f) for f in sorted(os.listdir(HERE)) if f.endswith(".java")]
    subprocess.run([shutil.which("javac"), "-d", dest] + srcs, check=True)
    os.chmod(dest, 0o755)
    return dest


def java_version():
    p = subprocess.run(["java", "-version"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    return p.stderr


def start(classes, main, *args, jvm_args=(), cwd=None, stdout=None, stderr=None, prefix=()):
    cmd = list(prefix) + ["java", "-XX:CompileCommand=quiet", "-XX:CompileCommand=exclude,HotCold.interpWork"]
    cmd += list(jvm_args) + ["-cp", classes, main] + [str(a) for a in args]
    return subprocess.Popen(cmd, stdout=stdout or subprocess.DEVNULL, stderr=stderr or subprocess.DEVNULL, cwd=cwd)


def wait_for_line(path, text, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        try:
            with open(path) as f:
                if text in f.read():
                    return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


def maps_of(pid):
    try:
        with open("/proc/%d/maps" % pid) as f:
            return f.read()
    except OSError:
        return ""
