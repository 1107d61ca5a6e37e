"""Kubernetes containers on this host, as the k8s tests fake them: cgroups
named by container ids (as the kubelet's runtimes name them), OCI bundles
laid out under a fake host root as containerd's CRI plugin and CRI-O write
them, and the OTLP resources the agent exported per pod."""
import json
import os
import subprocess
import time

import pputil

CONTAINERD = "run/containerd/io.containerd.runtime.v2.task/k8s.io"
CRIO = "run/containers/storage/overlay-containers"


def cgroup_root():
    """Where the tests make their cgroups; skips the test without root."""
    if os.geteuid() != 0:
        pputil.skip("needs root (creates cgroups)")
    cg = "/sys/fs/cgroup/pids"
    if not os.path.isdir(cg) or not os.access(cg, os.W_OK):
        # cgroup v2 only: any controller-less directory works the same
        cg = "/sys/fs/cgroup/unified" if os.path.isdir("/sys/fs/cgroup/unified") else "/sys/fs/cgroup"
    return cg


def _bundle(path, config):
    os.makedirs(path)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f)


def containerd_bundle(root, cid, annotations, **config):
    """containerd's bundle of container cid: config.json with these annotations."""
    _bundle(os.path.join(root, CONTAINERD, cid), dict(config, annotations=annotations))


def crio_bundle(root, cid, annotations):
    """CRI-O's bundle of container (or sandbox) cid."""
    _bundle(os.path.join(root, CRIO, cid, "userdata"), {"annotations": annotations})


class Containers:
    """Processes in the cgroups of container ids, under one parent cgroup;
    stop() ends them and removes the cgroups."""

    def __init__(self, parent):
        self.parent = os.path.join(cgroup_root(), parent)
        self.cgroups, self.procs = [], []

    def start(self, cid, argv, **popen):
        d = os.path.join(self.parent, cid)
        os.makedirs(d, exist_ok=True)
        if d not in self.cgroups:
            self.cgroups.append(d)
        p = subprocess.Popen(argv, **popen)
        self.procs.append(p)
        with open(os.path.join(d, "cgroup.procs"), "w") as f:
            f.write(str(p.pid))
        return p

    def stop(self):
        for p in self.procs:
            pputil.kill(p)
        time.sleep(0.1)
        for d in self.cgroups + [self.parent]:
            try:
                os.rmdir(d)
            except OSError:
                pass


def otlp_resources(rx):
    """{pod name: (resource attributes, samples)} of the receiver's first request."""
    import otlp_receiver  # needs protoc: imported by the tests after their checks
    res = {}
    if not rx.requests:
        return res
    req = otlp_receiver.decode(rx.requests[0][2])
    for rp in req.get("resource_profiles", []):
        attrs = {a["key"][0]: a["value"][0].get("string_value", [None])[0]
                 for a in rp["resource"][0].get("attributes", [])}
        nsamples = sum(len(pr.get("samples", [])) for sp in rp.get("scope_profiles", [])
                       for pr in sp.get("profiles", []))
        res[attrs.get("k8s.pod.name")] = (attrs, nsamples)
    return res
