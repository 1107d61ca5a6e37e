"""Kubernetes metadata of containerd/CRI-O containers, end to end: a busy
process is put in a cgroup named by a 64-hex container id (as the kubelet's
runtimes do), and a host root laid out like /run holds that container's OCI
bundle config.json as containerd's CRI plugin writes it (a recorded file;
enrichment.k8s_runtime_root points the agent at it instead of /proc/1/root).

- the .col container field is gProfiler's CRI name
  k8s_<container>_<pod>_<namespace>_<pod-uid>_<restarts>, and the header's
  containers list has it;
- the OTLP export has a resource for it with container.name, k8s.pod.name
  and k8s.namespace.name, holding that process's samples;
- a CRI-O bundle (labels as embedded JSON) names a second container;
- --containers pod=GLOB keeps only the selected pod's processes.
"""
import glob
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k8sutil  # noqa: E402
import pputil  # noqa: E402
from pputil import check  # noqa: E402

k8sutil.cgroup_root()
if not shutil.which("protoc"):
    pputil.skip("protoc not installed (Debian package protobuf-compiler)")
import otlp_receiver  # noqa: E402

ID1 = "5a" * 32
ID2 = "c3" * 32
work = pputil.tempdir("ppk8s-")
root = os.path.join(work, "host")
k8sutil.containerd_bundle(root, ID1, {
    "io.kubernetes.cri.container-name": "api",
    "io.kubernetes.cri.container-type": "container",
    "io.kubernetes.cri.sandbox-id": "9" * 64,
    "io.kubernetes.cri.sandbox-name": "web-7d9f8c-x2x4q",
    "io.kubernetes.cri.sandbox-namespace": "prod",
    "io.kubernetes.cri.sandbox-uid": "5f0c1c6e-1b2a-4c3d-9e8f-0a1b2c3d4e5f"},
    ociVersion="1.1.0", process={"args": ["sh"]})
k8sutil.crio_bundle(root, ID2, {
    "io.kubernetes.cri-o.Labels": json.dumps({
        "io.kubernetes.container.name": "redis", "io.kubernetes.pod.name": "cache-0",
        "io.kubernetes.pod.namespace": "data", "io.kubernetes.pod.uid": "u-1"}),
    "io.kubernetes.cri-o.Annotations": json.dumps({"io.kubernetes.container.restartCount": "3"})})
NAME1 = "k8s_api_web-7d9f8c-x2x4q_prod_5f0c1c6e-1b2a-4c3d-9e8f-0a1b2c3d4e5f_0"
NAME2 = "k8s_redis_cache-0_data_u-1_3"

containers = k8sutil.Containers("polyprof-test")
try:
    procs = [containers.start(cid, ["sh", "-c", "while :; do :; done"]) for cid in (ID1, ID2)]
    with open("/proc/%d/cgroup" % procs[0].pid) as f:
        check(ID1 in f.read(), "the busy process is in the container's cgroup")
    yaml = os.path.join(work, "k8s.yaml")
    with open(yaml, "w") as f:
        f.write("enrichment:\n  k8s_runtime_root: %s\n" % root)
    rx = otlp_receiver.Receiver()
    out = pputil.tempdir()
    cmd = pputil.agent_cmd(out, pputil.PLUGIN_DIR, "--config", yaml, "--otlp-endpoint", rx.url,
                           "--spool-dir", os.path.join(work, "spool"), "--no-example",
                           "--pids", "%d,%d" % (procs[0].pid, procs[1].pid), duration=2)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    check(p.returncode == 0, "agent ran%s" % ("" if p.returncode == 0 else ": " + p.stderr[-300:]))
    cols = glob.glob(os.path.join(out, "profile_*.col"))
    header, stacks = pputil.parse_col(cols[0]) if cols else ({}, [])
    conts = {fr[1] for fr, _ in stacks if len(fr) > 2 and fr[2] == "sh"}
    check(NAME1 in conts and NAME2 in conts,
          "the .col container field is the CRI name for both runtimes (%s)" % sorted(conts))
    check(NAME1 in header.get("containers", []) and NAME2 in header.get("containers", []),
          "the header's containers list has them (%s)" % header.get("containers"))
    res = k8sutil.otlp_resources(rx)
    a1, n1 = res.get("web-7d9f8c-x2x4q", ({}, 0))
    a2, n2 = res.get("cache-0", ({}, 0))
    check(a1.get("container.name") == "api" and a1.get("k8s.namespace.name") == "prod" and n1 > 0,
          "OTLP resource of the containerd pod: container.name, k8s.namespace.name, samples (%s, %d)" % (a1, n1))
    check(a2.get("container.name") == "redis" and a2.get("k8s.namespace.name") == "data" and n2 > 0,
          "OTLP resource of the CRI-O pod (%s, %d)" % (a2, n2))
    # ---- --containers: only one pod --------------------------------------
    out = pputil.tempdir()
    cmd = pputil.agent_cmd(out, pputil.PLUGIN_DIR, "--config", yaml, "--no-example",
                           "--containers", "pod=cache-*", "--pids",
                           "%d,%d" % (procs[0].pid, procs[1].pid), duration=1)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    cols = glob.glob(os.path.join(out, "profile_*.col"))
    header, stacks = pputil.parse_col(cols[0]) if cols else ({}, [])
    conts = {fr[1] for fr, _ in stacks}
    check(p.returncode == 0 and conts == {NAME2} and header.get("containers") == [NAME2],
          "--containers pod=cache-*: only that pod in the .col and header (%s, %s)"
          % (sorted(conts), header.get("containers")))
    rx.stop()
finally:
    containers.stop()
pputil.finish()
