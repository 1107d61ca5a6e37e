"""Selected pod labels and --containers selection, end to end.

A Kubernetes API server stands in on loopback, over TLS with its own CA
(the agent reads the service-account token and ca.crt from a directory laid
out as a pod's, enrichment.k8s_serviceaccount_dir, and finds the server
through KUBERNETES_SERVICE_HOST/PORT and its node through NODE_NAME, as the
DaemonSet sets them). Busy processes sit in cgroups named by container ids
whose OCI bundles are laid out under a fake host root (containerd's for
one pod, CRI-O's with its sandbox for another).

- containerd pod: its labels come from the API's pod list of this node
  (the request carries the bearer token and the node's field selector);
  CRI-O pod: from its sandbox's config.json;
- both appear as k8s.pod.label.<key> OTLP resource attributes (with
  k8s.pod.name, k8s.namespace.name, k8s.container.name) and pprof sample
  labels, decoded with protoc from the official .proto files, and as
  pod_label_<key> Pyroscope tags; a label not selected does not appear; the
  .col container field stays the CRI name;
- an API server that does not answer, or refuses (403), costs a session at
  most the request's timeout, and the log says why in one line;
- a label key Kubernetes would refuse is refused at start, naming the flag;
- --containers pod=cache-*: a Python process in the other pod is never
  handed to the Python plugin (no samples, no attach) and perf's samples of
  it are dropped, while the Python process in the selected pod is profiled
  with its Python frames.
"""
import glob
import gzip
import json
import os
import shutil
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k8sutil  # noqa: E402
import pputil  # noqa: E402
from pputil import check  # noqa: E402

k8sutil.cgroup_root()
for tool, pkg in (("protoc", "protobuf-compiler"), ("openssl", "openssl"), ("python3", "python3")):
    if not shutil.which(tool):
        pputil.skip("%s not installed (Debian package %s)" % (tool, pkg))
import otlp_receiver  # noqa: E402

ID1 = "5b" * 32  # containerd: pod web in prod
ID2 = "c4" * 32  # CRI-O: pod cache-0 in data
SANDBOX = "e7" * 32
TOKEN = "eyJhbGciOiJSUzI1NiJ9.test-token.sig"
work = pputil.tempdir("ppk8slab-")
root = os.path.join(work, "host")
k8sutil.containerd_bundle(root, ID1, {
    "io.kubernetes.cri.container-name": "api", "io.kubernetes.cri.container-type": "container",
    "io.kubernetes.cri.sandbox-id": "9" * 64, "io.kubernetes.cri.sandbox-name": "web-7d9f8c-x2x4q",
    "io.kubernetes.cri.sandbox-namespace": "prod", "io.kubernetes.cri.sandbox-uid": "uid-web"})
crio_labels = {"io.kubernetes.container.name": "redis", "io.kubernetes.pod.name": "cache-0",
               "io.kubernetes.pod.namespace": "data", "io.kubernetes.pod.uid": "uid-cache"}
k8sutil.crio_bundle(root, ID2, {"io.kubernetes.cri-o.SandboxID": SANDBOX,
                                "io.kubernetes.cri-o.Labels": json.dumps(crio_labels)})
k8sutil.crio_bundle(root, SANDBOX, {"io.kubernetes.cri-o.Labels": json.dumps(
    {"app": "redis", "team": "storage", "io.kubernetes.pod.name": "cache-0",
     "io.kubernetes.pod.namespace": "data"})})
NAME1 = "k8s_api_web-7d9f8c-x2x4q_prod_uid-web_0"
NAME2 = "k8s_redis_cache-0_data_uid-cache_0"

# ---- the API server: TLS with a CA of its own ----------------------------
sa = os.path.join(work, "serviceaccount")
os.makedirs(sa)
subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                "-keyout", os.path.join(work, "api.key"), "-out", os.path.join(sa, "ca.crt"),
                "-subj", "/CN=kubernetes", "-addext", "subjectAltName=IP:127.0.0.1"],
               check=True, capture_output=True, timeout=60)
with open(os.path.join(sa, "token"), "w") as f:
    f.write(TOKEN + "\n")
PODS = {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "42"}, "items": [
    {"metadata": {"name": "web-7d9f8c-x2x4q", "namespace": "prod", "uid": "uid-web",
                  "labels": {"app": "web", "team": "checkout", "secret-ish": "no"},
                  "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}]},
     "spec": {"nodeName": "node-1"}, "status": {"phase": "Running"}},
    {"metadata": {"name": "bad;pod", "namespace": "prod", "labels": {"app": "evil"}}}]}
api_requests = []
api_mode = ["ok"]


class Api(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        api_requests.append((self.path, self.headers.get("Authorization")))
        if api_mode[0] == "hang":
            time.sleep(20)
        forbidden = api_mode[0] == "forbidden"
        body = json.dumps({"kind": "Status", "code": 403} if forbidden else PODS).encode()
        self.send_response(403 if forbidden else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


httpd = ThreadingHTTPServer(("127.0.0.1", 0), Api)
httpd.handle_error = lambda *a: None  # the agent hangs up on the server that hangs
httpd.daemon_threads = True
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(os.path.join(sa, "ca.crt"), os.path.join(work, "api.key"))
httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
threading.Thread(target=httpd.serve_forever, daemon=True).start()
pyro_names = []


class Pyroscope(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        q = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
        pyro_names.extend(q.get("name", []))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


pyro = ThreadingHTTPServer(("127.0.0.1", 0), Pyroscope)
threading.Thread(target=pyro.serve_forever, daemon=True).start()
env = dict(os.environ, KUBERNETES_SERVICE_HOST="127.0.0.1",
           KUBERNETES_SERVICE_PORT=str(httpd.server_address[1]), NODE_NAME="node-1")
yaml = os.path.join(work, "k8s.yaml")
with open(yaml, "w") as f:
    f.write("enrichment:\n  k8s_runtime_root: %s\n  k8s_serviceaccount_dir: %s\n" % (root, sa))

PROFILE_PROTO = os.path.join(pputil.SRC, "core", "output", "profile.proto")


def pprof_labels(path):
    """{(key, value)} of the samples whose comm label is comm, via protoc."""
    with open(path, "rb") as f:
        raw = gzip.decompress(f.read())
    p = subprocess.run(["protoc", "-I", os.path.dirname(PROFILE_PROTO), "--decode",
                        "perftools.profiles.Profile", PROFILE_PROTO], input=raw,
                       capture_output=True, timeout=60)
    check(p.returncode == 0, "protoc decodes the pprof file (%s)" % p.stderr[:200])
    msg = otlp_receiver.parse_text(p.stdout.decode())
    strs = msg.get("string_table", [])
    out = {}
    for s in msg.get("sample", []):
        labels = {strs[lab["key"][0]]: strs[lab["str"][0]] for lab in s.get("label", [])
                  if "str" in lab}
        out.setdefault(labels.get("container"), set()).update(labels.items())
    return out


BUSY_PY = """
import sys
def k8s_busy_%s():
    x = 0
    while True:
        x += 1
print("ready", flush=True)
k8s_busy_%s()
"""

cmd = pputil.agent_cmd(pputil.tempdir(), pputil.PLUGIN_DIR, "--k8s-labels", "app,bad key", duration=1)
p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
check(p.returncode == 2 and "--k8s-labels: 'bad key' is not a Kubernetes label key" in p.stderr,
      "a bad label key is refused at start (%d, %s)" % (p.returncode, p.stderr.strip()[-200:]))

containers = k8sutil.Containers("polyprof-test-labels")
try:
    def in_container(cid, argv):
        return containers.start(cid, argv, stdout=subprocess.PIPE, text=True)

    sh1 = in_container(ID1, ["sh", "-c", "while :; do :; done"])
    sh2 = in_container(ID2, ["sh", "-c", "while :; do :; done"])
    rx = otlp_receiver.Receiver()
    out = pputil.tempdir()
    cmd = pputil.agent_cmd(out, pputil.PLUGIN_DIR, "--config", yaml, "--otlp-endpoint", rx.url,
                           "--spool-dir", os.path.join(work, "spool"), "--no-example",
                           "--pyroscope-url", "http://127.0.0.1:%d" % pyro.server_address[1],
                           "--k8s-labels", "app,team", "--output-format", "col,pprof", "-f", "49",
                           "--pids", "%d,%d" % (sh1.pid, sh2.pid), duration=2)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=90, env=env)
    check(p.returncode == 0, "agent ran%s" % ("" if p.returncode == 0 else ": " + p.stderr[-300:]))
    check(len(api_requests) == 1 and api_requests[0][1] == "Bearer " + TOKEN and
          api_requests[0][0] == "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1",
          "one pod listing of this node with the service-account token (%s)" % api_requests)
    cols = glob.glob(os.path.join(out, "profile_*.col"))
    header, stacks = pputil.parse_col(cols[0]) if cols else ({}, [])
    conts = {fr[1] for fr, _ in stacks if len(fr) > 2 and fr[2] == "sh"}
    check(conts == {NAME1, NAME2}, "the .col container field is still the CRI name (%s)" % sorted(conts))
    res = k8sutil.otlp_resources(rx)
    a1, a2 = res.get("web-7d9f8c-x2x4q", ({}, 0))[0], res.get("cache-0", ({}, 0))[0]
    check(a1.get("k8s.pod.label.app") == "web" and a1.get("k8s.pod.label.team") == "checkout" and
          a1.get("k8s.container.name") == "api" and a1.get("k8s.namespace.name") == "prod" and
          "k8s.pod.label.secret-ish" not in a1,
          "OTLP resource of the containerd pod: labels from the API, only the selected (%s)" % a1)
    check(a2.get("k8s.pod.label.app") == "redis" and a2.get("k8s.pod.label.team") == "storage" and
          a2.get("k8s.container.name") == "redis",
          "OTLP resource of the CRI-O pod: labels from its sandbox bundle (%s)" % a2)
    pbs = glob.glob(os.path.join(out, "profile_*.pb.gz"))
    check(len(pbs) == 1, "a pprof file was written")
    if pbs:
        lab = pprof_labels(pbs[0])
        l1, l2 = lab.get(NAME1, set()), lab.get(NAME2, set())
        check({("k8s.pod.label.app", "web"), ("k8s.pod.label.team", "checkout"),
               ("pod", "web-7d9f8c-x2x4q"), ("namespace", "prod")} <= l1,
              "pprof samples of the containerd pod carry its labels (%s)" % sorted(l1))
        check(("k8s.pod.label.app", "redis") in l2, "pprof samples of the CRI-O pod (%s)" % sorted(l2))
    web = [n for n in pyro_names if ",pod=web-7d9f8c-x2x4q," in n]
    cache = [n for n in pyro_names if ",pod=cache-0," in n]
    check(web and all(",pod_label_app=web,pod_label_team=checkout" in n for n in web) and
          cache and all(",pod_label_app=redis,pod_label_team=storage" in n for n in cache) and
          not [n for n in pyro_names if "secret" in n],
          "Pyroscope tags pod_label_<key> per pod (%s)" % pyro_names[:2])
    rx.stop()

    # ---- an API that hangs or refuses --------------------------------------
    for mode, says in (("hang", "timed out"), ("forbidden", "ClusterRole")):
        api_mode[0] = mode
        out = pputil.tempdir()
        cmd = pputil.agent_cmd(out, pputil.PLUGIN_DIR, "--config", yaml, "--no-example",
                               "--k8s-labels", "app", "-f", "49", "--pids", str(sh1.pid),
                               duration=1)
        t0 = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=90, env=env)
        took = time.monotonic() - t0
        log = open(cmd[cmd.index("--log-file") + 1], errors="replace").read()
        line = [x for x in log.splitlines() if "pod labels from the Kubernetes API" in x]
        check(p.returncode == 0 and glob.glob(os.path.join(out, "profile_*.col")) and
              len(line) == 1 and says in line[0] and (mode != "hang" or took < 12),
              "API %s: the session is written in %.1f s, one log line (%s)" % (mode, took, line))
    api_mode[0] = "ok"

    # ---- --containers: a runtime plugin never hears of the others --------
    py = shutil.which("python3")
    scripts = {}
    for tag in ("inside", "outside"):
        s = os.path.join(work, "busy_%s.py" % tag)
        with open(s, "w") as f:
            f.write(BUSY_PY % (tag, tag))
        scripts[tag] = s
    py_in = in_container(ID2, [py, scripts["inside"]])
    py_out = in_container(ID1, [py, scripts["outside"]])
    for q in (py_in, py_out):
        q.stdout.readline()
    out = pputil.tempdir()
    cmd = pputil.agent_cmd(out, pputil.PLUGIN_DIR, "--config", yaml, "--no-example",
                           "--containers", "pod=cache-*", "--debug-plugin-totals", "-f", "49",
                           "--pids", "%d,%d,%d,%d" % (sh1.pid, sh2.pid, py_in.pid, py_out.pid),
                           duration=2)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=90, env=env)
    check(p.returncode == 0, "agent with --containers ran%s" % ("" if p.returncode == 0 else ": " + p.stderr[-300:]))
    cols = glob.glob(os.path.join(out, "profile_*.col"))
    header, stacks = pputil.parse_col(cols[0]) if cols else ({}, [])
    inside = sum(c for fr, c in stacks if any("k8s_busy_inside" in x and x.endswith("_[p]") for x in fr))
    outside = sum(c for fr, c in stacks if any("busy_outside" in x for x in fr))
    check(inside > 0, "the Python process in the selected pod is profiled with Python frames (%d)" % inside)
    check(outside == 0 and {fr[1] for fr, _ in stacks} == {NAME2},
          "nothing of the other pod's processes is written (%d, %s)" % (outside, sorted({fr[1] for fr, _ in stacks})))
    totals = {}
    tp = os.path.join(out, "last_plugins.json")
    if os.path.exists(tp):
        with open(tp) as f:
            totals = json.load(f).get("plugins", {})
    pypids = set(totals.get("python", {}).get("pids", {}))
    check(str(py_in.pid) in pypids and str(py_out.pid) not in pypids,
          "the Python plugin was handed the selected process only (%s)" % sorted(pypids))
    perfpids = set(totals.get("perf", {}).get("pids", {}))
    check(perfpids and str(py_out.pid) not in perfpids and str(sh1.pid) not in perfpids,
          "perf's samples of the other pod are dropped before the merge (%s)" % sorted(perfpids))
finally:
    httpd.shutdown()
    pyro.shutdown()
    containers.stop()
pputil.finish()
