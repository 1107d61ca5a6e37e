"""The system test's workloads: one per runtime, built and started for real
(standard library only).

Every workload (tests/system/workloads/) burns CPU in one known function
for BUSY_MS of every PERIOD_MS, so a dozen of them leave the agent room on
a 2-core machine, and exits by itself after LIFETIME_S should the test be
killed before it can clean up. Some run inside a private mount + pid
namespace with their own /tmp (unshare), standing in for containers.

Every process is started in its own process group with PR_SET_PDEATHSIG,
and Workloads.stop() kills the groups: nothing outlives the test.
"""
import ctypes
import glob
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
W = os.path.join(HERE, "workloads")
sys.path.insert(0, os.path.join(SRC, "tests", "workloads", "dotnet"))
import build_workload as dotnet_build  # noqa: E402  (dotnet_env: offline, quiet SDK)

BUSY_MS, PERIOD_MS = 10, 100  # ~10 % of a core each
LIFETIME_S = 420              # the test takes < 6 min; orphans end by themselves

_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1


def _child_setup():
    # die with the test even if it is SIGKILLed (ctest timeout); kept across
    # a plain execve, so it also covers the exec target's new image
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class Missing(Exception):
    """A runtime or tool this machine lacks (the test reports it as a skip)."""


def _run(cmd, what, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError("%s failed (%s):\n%s" % (what, " ".join(cmd), r.stdout[-3000:]))


def which(name, hint):
    p = shutil.which(name)
    if not p:
        raise Missing("%s not installed (%s)" % (name, hint))
    return p


def pyenv(version_prefix):
    """Newest pyenv CPython whose version starts with version_prefix."""
    found = []
    for d in glob.glob("/root/.pyenv/versions/%s*" % version_prefix):
        ver = os.path.basename(d)
        if not re.match(r"^\d+\.\d+\.\d+$", ver):
            continue
        exe = os.path.join(d, "bin", "python" + ".".join(ver.split(".")[:2]))
        if os.access(exe, os.X_OK):
            found.append(([int(x) for x in ver.split(".")], exe))
    if not found:
        raise Missing("no pyenv CPython %s* under /root/.pyenv/versions" % version_prefix)
    return max(found)[1]


def build_all(tmp, build_dir):
    """Compiles what needs compiling; returns {name: path}."""
    b = {}
    cc = which("gcc", "Debian build-essential")
    b["c"] = os.path.join(tmp, "pp_sys_c")
    _run([cc, "-O1", "-g", "-fno-omit-frame-pointer", "-o", b["c"], os.path.join(W, "sys_work.c")], "cc")
    # the exec target is the same program under another name (its own comm)
    b["exec"] = os.path.join(tmp, "pp_sys_exec")
    shutil.copy(b["c"], b["exec"])

    go = which("go", "Debian golang-go")
    env = dict(os.environ, GOCACHE=os.path.join(build_dir, "system-go-cache"),
               GOPATH=os.path.join(tmp, "gopath"), GO111MODULE="off", GOFLAGS="-buildvcs=false",
               CGO_ENABLED="0")
    b["go"] = os.path.join(tmp, "pp_sys_go")
    _run([go, "build", "-o", b["go"], os.path.join(W, "sys_work.go")], "go build", env=env)

    javac = which("javac", "Debian openjdk-17-jdk-headless")
    b["java_cp"] = os.path.join(tmp, "java")
    _run([javac, "-d", b["java_cp"], os.path.join(W, "SysWork.java")], "javac")

    b["dotnet"] = build_dotnet(build_dir)
    return b


def build_dotnet(build_dir):
    """SysWork built once per build tree and source hash (offline, as
    tests/workloads/dotnet/build_workload.py does for the plugin tests)."""
    dn = which("dotnet", ".NET SDK; not a Debian package")
    srcdir = os.path.join(W, "dotnet")
    names = sorted(os.listdir(srcdir))
    h = hashlib.sha256()
    for n in names:
        with open(os.path.join(srcdir, n), "rb") as f:
            h.update(n.encode() + b"\0" + f.read())
    out = os.path.join(build_dir, "system-dotnet", h.hexdigest()[:16])
    exe = os.path.join(out, "SysWork")
    if os.path.exists(exe) and os.path.exists(exe + ".dll"):
        return exe
    work = os.path.join(build_dir, "system-dotnet", "src-" + str(os.getpid()))
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(srcdir, work)
    try:
        tmp_out = out + ".tmp%d" % os.getpid()
        _run([dn, "build", "-c", "Release", "-o", tmp_out, "-nodeReuse:false",
              os.path.join(work, "SysWork.csproj")], "dotnet build", env=dotnet_build.dotnet_env(),
             cwd=work, timeout=600)
        shutil.rmtree(out, ignore_errors=True)
        os.rename(tmp_out, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return exe


class Workload:
    """One running workload and what its profile must show.

    comm     the process name the .col shows for its runtime stacks (None:
             any, the appid tells)
    appid    the exact "appid: ..." text expected, or None (no rule)
    func     regex a frame of its own code must match, suffix included
    kind     short runtime name for messages
    ns       True when it runs in a private mount + pid namespace
    pid      host pid (what the agent must attribute it to)
    ns_pid   the pid it sees itself (1 in its namespace)
    """

    def __init__(self, name, kind, cmd, comm, func, appid=None, ns=False, env=None, cwd=None):
        self.name, self.kind, self.cmd, self.comm, self.func = name, kind, cmd, comm, func
        self.appid, self.ns, self.env, self.cwd = appid, ns, env, cwd
        self.proc = None
        self.pid = self.ns_pid = None
        self.stdout_path = None


def ns_wrap(script, shell_cmd):
    """`shell_cmd` as pid 1 of a new pid namespace with a private mount
    namespace and its own tmpfs on /tmp (what a container gives its
    entrypoint). `script` is opened before the tmpfs hides
    the host /tmp and copied in through fd 3. --kill-child: the namespace dies with the unshare process."""
    return ["unshare", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc", "--propagation",
            "private", "sh", "-c", "exec 3<\"$0\" && mount -t tmpfs -o size=16m pp-sys-tmp /tmp && " + shell_cmd,
            script]


def define(tmp, b):
    """The workloads, with their expectations. Paths in appids are as the
    process sees them: /tmp/... of a namespaced one is its private tmpfs."""
    args = [str(BUSY_MS), str(PERIOD_MS), str(LIFETIME_S)]
    py2 = pyenv("2.7")
    py3_ns = pyenv("3.1")  # newest 3.1x
    py3_deb = which("python3", "Debian python3")
    java = which("java", "Debian openjdk-17-jdk-headless")
    node = shutil.which("node") or which("nodejs", "NodeSource or Debian nodejs")
    php = shutil.which("php8.2") or which("php", "Debian php-cli")
    ruby = which("ruby", "Debian ruby")
    which("unshare", "Debian util-linux")

    # private copies: the scripts are the test's own, paths are unique
    scripts = os.path.join(tmp, "scripts")
    os.makedirs(scripts, exist_ok=True)
    for f in ("sys_work.py", "sys_work.js", "sys_work.php", "sys_work.rb"):
        shutil.copy(os.path.join(W, f), scripts)
    # a unique comm for PHP, which has no appid rule: a symlink named php-*
    # (the php plugin's default filter is php*; /proc/PID/exe stays php8.2)
    php_link = os.path.join(tmp, "php-ppsys")
    os.symlink(os.path.realpath(php), php_link)
    s = lambda f: os.path.join(scripts, f)  # noqa: E731
    q = lambda x: "'" + x.replace("'", "'\\''") + "'"  # noqa: E731
    ns_args = " ".join(args)

    py3_ver = os.path.basename(py3_ns)  # python3.13
    return [
        Workload("c", "native", [b["c"]] + args, "pp_sys_c", r"^sys_c_hot$"),
        Workload("go", "go", [b["go"]] + args, "pp_sys_go", r"^main\.sysGoHot$"),
        Workload("python2", "python", [py2, s("sys_work.py")] + args, "python2.7",
                 r"^sys_py_hot \(.*sys_work\.py:\d+\)_\[p\]$",
                 appid="python: %s (%s)" % (s("sys_work.py"), s("sys_work.py"))),
        Workload("python3-ns", "python",
                 ns_wrap(s("sys_work.py"), "cat <&3 >/tmp/sys_work.py && exec 3<&- %s /tmp/sys_work.py %s"
                         % (q(py3_ns), ns_args)),
                 py3_ver, r"^sys_py_hot \(/tmp/sys_work\.py:\d+\)_\[p\]$",
                 appid="python: /tmp/sys_work.py (/tmp/sys_work.py)", ns=True),
        Workload("java", "java", [java, "-XX:+UseSerialGC", "-Xmx64m", "-cp", b["java_cp"], "SysWork"] + args,
                 "java", r"^SysWork\.sysJavaHot\(J\)J_\[[ji01]\]$", appid="java: SysWork"),
        # --no-turbo-inlining: TurboFan would inline sysNodeHot into its
        # caller once both are hot, and the known frame would vanish
        Workload("node-ns", "nodejs",
                 ns_wrap(s("sys_work.js"), "cat <&3 >/tmp/sys_work.js && exec 3<&- %s --no-turbo-inlining "
                         "/tmp/sys_work.js %s" % (q(node), ns_args)),
                 "node", r"^(sysNodeHot|tick) \((file://)?/tmp/sys_work\.js:\d+\)$",
                 appid="nodejs: /tmp/sys_work.js (/tmp/sys_work.js)", ns=True),
        Workload("php", "php", [php_link, s("sys_work.php")] + args, "php-ppsys",
                 r"^sys_php_hot .*sys_work\.php:\d+_\[php\]$"),
        Workload("ruby-ns", "ruby",
                 ns_wrap(s("sys_work.rb"), "cat <&3 >/tmp/sys_work.rb && exec 3<&- %s /tmp/sys_work.rb %s"
                         % (q(ruby), ns_args)),
                 "ruby", r"^sys_rb_hot - /tmp/sys_work\.rb:\d+_\[rb\]$",
                 appid="ruby: /tmp/sys_work.rb (/tmp/sys_work.rb)", ns=True),
        # comm None: the dotnet plugin names each stack after its thread
        # (docs/dotnet.md), so its lines are found by their appid
        Workload("dotnet", "dotnet", [b["dotnet"]] + args, None,
                 r"^Polyprof\.SysWork\.Hot\.SysDotnetHot.*_\[net\]$",
                 appid="dotnet: SysWork (%s)" % b["dotnet"],
                 env=dict(dotnet_build.dotnet_env(), DOTNET_TieredCompilation="1")),
        # native until SIGUSR1, then execs Debian's python3 in place
        Workload("exec", "native->python",
                 [b["exec"]] + args + [py3_deb, s("sys_work.py")] + args + ["exec"], "pp_sys_exec",
                 r"^sys_exec_native_hot$"),
    ]


class Workloads:
    def __init__(self, tmp, workloads):
        self.tmp, self.all = tmp, workloads

    def start(self):
        for w in self.all:
            w.stdout_path = os.path.join(self.tmp, "%s.out" % w.name)
            with open(w.stdout_path, "w") as out:
                w.proc = subprocess.Popen(w.cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          env=w.env, cwd=w.cwd or self.tmp, start_new_session=True,
                                          preexec_fn=_child_setup)

    def wait_ready(self, timeout=90):
        """Until every workload printed "ready <pid-it-sees>"; sets pid and
        ns_pid (host pid of a namespaced one: the unshare child)."""
        deadline = time.time() + timeout
        pending = list(self.all)
        while pending and time.time() < deadline:
            for w in list(pending):
                if w.proc.poll() is not None:
                    raise RuntimeError("workload %s exited early (%s): %s"
                                       % (w.name, w.proc.returncode, self.output(w)))
                txt = self.output(w)
                if "ready " not in txt:
                    continue
                w.ns_pid = int(txt.split("ready ", 1)[1].split()[0])
                w.pid = _ns_child(w.proc.pid) if w.ns else w.proc.pid
                if w.pid:
                    pending.remove(w)
            time.sleep(0.2)
        if pending:
            raise RuntimeError("workloads not ready after %d s: %s" % (
                timeout, ", ".join("%s (%s)" % (w.name, self.output(w)[-300:]) for w in pending)))

    def output(self, w):
        try:
            with open(w.stdout_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def stop(self):
        for w in self.all:
            if w.proc is None:
                continue
            try:
                os.killpg(w.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if w.pid and w.pid != w.proc.pid:  # the namespace's init, if it left the group
                try:
                    os.kill(w.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                w.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


def _ns_child(unshare_pid):
    """Host pid of the namespace's init: the only child of `unshare --fork`."""
    try:
        with open("/proc/%d/task/%d/children" % (unshare_pid, unshare_pid)) as f:
            kids = f.read().split()
    except OSError:
        return None
    return int(kids[0]) if len(kids) == 1 else None
