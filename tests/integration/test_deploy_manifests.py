"""The deployment manifests under deploy/ (docs/deployment.md), rendered,
parsed and run.

Helm cannot be installed here, so the chart is rendered with Go's
text/template, Helm's own template engine (tests/packaging/helm_render), for
several sets of values. No Kubernetes schema can be fetched either: each
manifest is parsed and the fields the agent depends on are checked:
- host pid namespace, not privileged, every capability dropped but exactly
  the set of the systemd unit (which the packaging test ties to the
  plugins' declarations), unconfined seccomp;
- the token comes from a Secret (Kubernetes, Helm), a secret of the
  orchestrator (ECS, compose), never from a literal in the manifest;
- resources: the requests hold the measured footprint, the limits leave room;
- Kubernetes metadata: the pod runs as a service account that may only get
  and list pods (ClusterRole and binding), and NODE_NAME comes from the
  downward API (spec.nodeName), which the pod-label lookup needs.
Then the agent's arguments of each route (Kubernetes, Helm, ECS, compose)
run for real: the same flags, with only the studio address (a loopback
fake), the token file and the output directory pointed at this test's, one
continuous session stopped by SIGTERM; the studio receives the profile under
the manifest's service name.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import pputil as u  # noqa: E402
import studio_server  # noqa: E402

DEPLOY = os.path.join(u.SRC, "deploy")
CHART = os.path.join(DEPLOY, "helm", "polyprof")
UNIT = os.path.join(u.SRC, "packaging", "systemd", "polyprof.service")
PERF = os.path.join(u.PLUGIN_DIR, "perf.so")

try:
    import yaml
except ImportError:
    u.skip("python3-yaml is missing: run scripts/install-deps.sh test")
if not shutil.which("go"):
    u.skip("go is missing (golang-go): run scripts/install-deps.sh test")
if not os.path.exists(PERF):
    u.skip("plugin not built: " + PERF)
if os.geteuid() != 0:
    u.skip("the agent's run samples the whole system: needs root")

with open(UNIT) as f:
    UNIT_CAPS = {c[len("CAP_"):] for line in f if line.startswith("CapabilityBoundingSet=")
                 for c in line.split("=", 1)[1].split()}
u.check(len(UNIT_CAPS) > 5, "the unit's capability set: %s" % sorted(UNIT_CAPS))
MIB = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "M": 1 / 1.048576, "G": 1000 / 1.048576}


def mib(q):
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi|M|G)?", str(q))
    return int(m.group(1)) * MIB.get(m.group(2) or "Mi", 1) if m else None


def check_k8s_pod(where, docs):
    ds = [d for d in docs if d and d.get("kind") == "DaemonSet"]
    u.check(len(ds) == 1 and ds[0]["apiVersion"] == "apps/v1", "%s: one apps/v1 DaemonSet" % where)
    pod = ds[0]["spec"]["template"]["spec"]
    sel = ds[0]["spec"]["selector"]["matchLabels"]
    labels = ds[0]["spec"]["template"]["metadata"]["labels"]
    u.check(all(labels.get(k) == v for k, v in sel.items()), "%s: the selector matches the pod's labels" % where)
    u.check(pod.get("hostPID") is True, "%s: hostPID" % where)
    ctr = pod["containers"][0]
    sc = ctr["securityContext"]
    if sc.get("privileged"):
        return ds[0], pod, ctr
    u.check(sc.get("privileged") is False and sc["capabilities"]["drop"] == ["ALL"]
            and set(sc["capabilities"]["add"]) == UNIT_CAPS,
            "%s: not privileged; every capability dropped but the unit's set" % where)
    u.check(sc.get("seccompProfile", {}).get("type") == "Unconfined", "%s: unconfined seccomp" % where)
    u.check(sc.get("runAsUser") == 0, "%s: runs as root (uid 0)" % where)
    res = ctr["resources"]
    u.check(mib(res["requests"]["memory"]) >= 28 and mib(res["limits"]["memory"]) >= 256,
            "%s: memory request %s holds the measured 28 MiB, limit %s leaves room for a worker's 256 MiB cap"
            % (where, res["requests"]["memory"], res["limits"]["memory"]))
    vols = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["name"]: m for m in ctr["volumeMounts"]}
    u.check(set(mounts) <= set(vols), "%s: every mount has its volume" % where)
    args = ctr["args"]
    if "--upload-results" in args:
        tf = [a.split("=", 1)[1] for a in args if a.startswith("--token-file=")]
        secret = vols.get("token", {}).get("secret", {})
        u.check(tf and tf[0].startswith(mounts["token"]["mountPath"] + "/") and secret.get("secretName")
                and secret.get("defaultMode") == 0o400,
                "%s: the token file is a Secret's key, mounted read-only to root alone" % where)
    env = {e["name"]: e for e in ctr.get("env", [])}
    u.check(env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName",
            "%s: NODE_NAME from the downward API (spec.nodeName)" % where)
    return ds[0], pod, ctr


def check_pod_reader(where, docs, namespace):
    """The pod's service account may get and list pods, nothing more."""
    pod = [d for d in docs if d.get("kind") == "DaemonSet"][0]["spec"]["template"]["spec"]
    sa = [d for d in docs if d.get("kind") == "ServiceAccount"]
    roles = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "ClusterRole"}
    binds = [d for d in docs if d.get("kind") == "ClusterRoleBinding"]
    ok = len(sa) == 1 and pod.get("serviceAccountName") == sa[0]["metadata"]["name"] and len(binds) == 1
    if ok:
        b = binds[0]
        role = roles.get(b["roleRef"]["name"], {})
        ok = (b["roleRef"]["kind"] == "ClusterRole" and
              b["subjects"] == [{"kind": "ServiceAccount", "name": sa[0]["metadata"]["name"], "namespace": namespace}]
              and role.get("rules") == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}])
    u.check(ok, "%s: the pod's service account may get/list pods and nothing else (ClusterRole, binding)" % where)


def env_values(ctr):
    """A container's plain env values (downward API entries have none)."""
    return {e["name"]: e["value"] for e in ctr["env"] if "value" in e}


def render(values, name="pp", namespace="polyprof"):
    with open(os.path.join(CHART, "values.yaml")) as f:
        v = yaml.safe_load(f)
    v.update(values)
    with open(os.path.join(CHART, "Chart.yaml")) as f:
        c = yaml.safe_load(f)
    chart = {"Name": c["name"], "Version": c["version"], "AppVersion": c["appVersion"]}
    env = dict(os.environ, GOCACHE=os.path.join(gowork, "cache"), GOPATH=os.path.join(gowork, "path"),
               GO111MODULE="off", GOFLAGS="")
    p = subprocess.run(["go", "run", os.path.join(u.SRC, "tests", "packaging", "helm_render", "main.go"), CHART,
                        json.dumps(v), name, namespace, json.dumps(chart)], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


gowork = u.tempdir("ppgo-")

# --- Kubernetes -------------------------------------------------------------
with open(os.path.join(DEPLOY, "kubernetes", "polyprof-daemonset.yaml")) as f:
    k8s_docs = list(yaml.safe_load_all(f))
_, _, k8s_ctr = check_k8s_pod("kubernetes", k8s_docs)
with open(os.path.join(DEPLOY, "kubernetes", "polyprof-rbac.yaml")) as f:
    check_pod_reader("kubernetes", k8s_docs + list(yaml.safe_load_all(f)), "polyprof")

# --- Helm -------------------------------------------------------------------
rc, out, err = render({"token": "tok-helm"})
u.check(rc == 0, "helm: the chart renders with a token (%s)" % err.strip())
docs = [d for d in yaml.safe_load_all(out) if d]
kinds = sorted(d["kind"] for d in docs)
u.check(kinds == ["ClusterRole", "ClusterRoleBinding", "DaemonSet", "Secret", "ServiceAccount"],
        "helm: ClusterRole, ClusterRoleBinding, DaemonSet, Secret, ServiceAccount: %s" % kinds)
ds, pod, helm_ctr = check_k8s_pod("helm", docs)
check_pod_reader("helm", docs, "polyprof")
u.check(not [a for a in helm_ctr["args"] if a.startswith("--k8s-labels")], "helm: no pod labels by default")
secret = [d for d in docs if d["kind"] == "Secret"][0]
u.check(secret["data"]["token"] == "dG9rLWhlbG0=" and
        pod["volumes"][-1]["secret"]["secretName"] == secret["metadata"]["name"],
        "helm: the token is base64 in the chart's Secret, which the pod mounts")
u.check(pod["serviceAccountName"] == [d for d in docs if d["kind"] == "ServiceAccount"][0]["metadata"]["name"],
        "helm: the pod runs as the chart's service account")
rc, out, err = render({"token": "t", "k8sLabels": "app,app.kubernetes.io/version", "podReader": False})
docs = [d for d in yaml.safe_load_all(out) if d]
_, _, ctr = check_k8s_pod("helm k8sLabels", docs)
u.check(rc == 0 and "--k8s-labels=app,app.kubernetes.io/version" in ctr["args"] and
        not [d for d in docs if d["kind"] in ("ClusterRole", "ClusterRoleBinding")],
        "helm: k8sLabels becomes --k8s-labels; podReader: false makes no RBAC")

rc, out, err = render({"existingSecret": "my-token"})
docs = [d for d in yaml.safe_load_all(out) if d]
u.check(rc == 0 and "Secret" not in [d["kind"] for d in docs] and
        check_k8s_pod("helm existingSecret", docs)[1]["volumes"][-1]["secret"]["secretName"] == "my-token",
        "helm: existingSecret: no Secret made, the pod mounts the named one")
rc, out, err = render({"upload": False, "extraArgs": ["--no-java"]})
docs = [d for d in yaml.safe_load_all(out) if d]
_, pod, ctr = check_k8s_pod("helm upload off", docs)
u.check(rc == 0 and "--upload-results" not in ctr["args"] and "--no-java" in ctr["args"]
        and "token" not in [v["name"] for v in pod["volumes"]],
        "helm: upload off: no upload flags, no token volume; extraArgs passed on")
rc, out, err = render({"token": "t", "privileged": True})
_, _, ctr = check_k8s_pod("helm privileged", [d for d in yaml.safe_load_all(out) if d])
u.check(ctr["securityContext"].get("privileged") is True and "capabilities" not in ctr["securityContext"],
        "helm: privileged: true replaces the capability list")
rc, out, err = render({"token": "t", "openshift": {"scc": True}})
scc = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "SecurityContextConstraints"]
u.check(len(scc) == 1 and set(scc[0]["allowedCapabilities"]) == UNIT_CAPS and scc[0]["allowHostPID"] is True
        and scc[0]["users"] == ["system:serviceaccount:polyprof:pp"],
        "helm: openshift.scc makes an SCC with the unit's capabilities for the chart's service account")
rc, out, err = render({})
u.check(rc != 0 and "set token" in err, "helm: upload without a token fails to render and says so")

# --- OpenShift SCC ----------------------------------------------------------
with open(os.path.join(DEPLOY, "openshift", "polyprof-scc.yaml")) as f:
    scc = yaml.safe_load(f)
u.check(scc["kind"] == "SecurityContextConstraints" and scc["apiVersion"] == "security.openshift.io/v1"
        and scc["allowHostPID"] is True and scc["allowPrivilegedContainer"] is False
        and set(scc["allowedCapabilities"]) == UNIT_CAPS and "unconfined" in scc["seccompProfiles"]
        and scc["runAsUser"]["type"] == "RunAsAny" and "hostPath" in scc["volumes"] and "secret" in scc["volumes"],
        "openshift: the SCC allows hostPID, root, the unit's capabilities, unconfined seccomp, hostPath and secrets")
sa = k8s_docs[0]["spec"]["template"]["spec"].get("serviceAccountName", "default")
u.check(scc["users"] == ["system:serviceaccount:polyprof:%s" % sa],
        "openshift: granted to the DaemonSet's service account in namespace polyprof")

# --- ECS ----------------------------------------------------------------------
with open(os.path.join(DEPLOY, "ecs", "polyprof-task-definition.json")) as f:
    ecs = json.load(f)
ecd = ecs["containerDefinitions"][0]
u.check(ecs["pidMode"] == "host" and ecs["requiresCompatibilities"] == ["EC2"],
        "ecs: the daemon task shares the host's pid namespace (EC2 launch type)")
u.check(ecd["linuxParameters"]["capabilities"]["drop"] == ["ALL"]
        and set(ecd["linuxParameters"]["capabilities"]["add"]) == UNIT_CAPS
        and "seccomp=unconfined" in ecd["dockerSecurityOptions"] and not ecd.get("privileged"),
        "ecs: not privileged; the unit's capabilities; unconfined seccomp")
u.check([s["name"] for s in ecd["secrets"]] == ["POLYPROF_TOKEN"], "ecs: the token from a secret (POLYPROF_TOKEN)")
u.check(ecd["memory"] >= 256 and ecd["memoryReservation"] >= 28, "ecs: memory hard limit and reservation")
vols = {v["name"] for v in ecs["volumes"]}
u.check(all(m["sourceVolume"] in vols for m in ecd["mountPoints"]), "ecs: every mount point has its volume")
with open(os.path.join(DEPLOY, "ecs", "polyprof-fargate-sidecar.json")) as f:
    far = json.load(f)
fd = [c for c in far["containerDefinitions"] if c["name"] == "polyprof"][0]
u.check(far["pidMode"] == "task" and far["requiresCompatibilities"] == ["FARGATE"]
        and fd["linuxParameters"]["capabilities"]["add"] == ["SYS_PTRACE"] and fd["essential"] is False,
        "ecs fargate: a non-essential sidecar in the task's pid namespace with SYS_PTRACE (all Fargate allows)")

# --- docker compose -----------------------------------------------------------
with open(os.path.join(DEPLOY, "compose", "docker-compose.yml")) as f:
    compose = yaml.safe_load(f)
svc = compose["services"]["polyprof"]
u.check(svc["pid"] == "host" and svc["cap_drop"] == ["ALL"] and set(svc["cap_add"]) == UNIT_CAPS
        and "seccomp=unconfined" in svc["security_opt"] and not svc.get("privileged"),
        "compose: host pid namespace, the unit's capabilities, unconfined seccomp, not privileged")
u.check("polyprof-token" in svc["secrets"] and "--token-file=/run/secrets/polyprof-token" in svc["command"],
        "compose: the token from a compose secret, read with --token-file")

# --- the routes' arguments, run by the real agent --------------------------
perf_only = u.plugin_dir_with(PERF)
sleeper = u.spawn(["sleep", "120"])
studio_dir = u.tempdir("ppstudio-")
studio = None
routes = [("kubernetes", k8s_ctr["args"], env_values(k8s_ctr)),
          ("helm", helm_ctr["args"], env_values(helm_ctr)),
          ("ecs", ecd["command"], {e["name"]: e["value"] for e in ecd["environment"]}),
          ("compose", svc["command"], svc["environment"])]
try:
    for where, args, env in routes:
        service = [a.split("=", 1)[1] for a in args if a.startswith("--service-name=")]
        service = [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], s) for s in service]
        if studio is None:
            studio = studio_server.Studio(studio_dir, token="tok-route", service=service[0])
        studio.service = service[0]
        before = len(studio.ids())
        out = u.tempdir()
        run_dir = u.tempdir("pprun-")
        token = os.path.join(run_dir, "token")
        with open(token, "w") as f:
            f.write("tok-route\n")
        os.chmod(token, 0o600)
        env = dict(env, POLYPROF_SERVER_HOST=studio.url)
        mine = []
        for a in args:
            a = re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], a)
            if a.startswith("--server-host="):
                a = "--server-host=" + studio.url
            elif a.startswith("--token-file="):
                a = "--token-file=" + token
            elif a.startswith("--output-dir="):
                a = "--output-dir=" + out
            mine.append(a)
        if not any(a.startswith("--token-file=") for a in mine):
            env["POLYPROF_TOKEN"] = "tok-route"  # ECS: the secret arrives as this variable
        cmd = [u.AGENT] + mine + ["--server-ca=" + studio.cert, "--api-server=" + studio.url,
                                  "--profiling-duration=2", "--plugin-dir", perf_only, "--pids", str(sleeper.pid),
                                  "--pid-file", os.path.join(run_dir, "pid"),
                                  "--config", os.path.join(u.SRC, "tests", "integration", "empty.yaml")]
        agent = subprocess.Popen(cmd, env=dict(os.environ, **env), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
        ok = studio.wait(lambda: len(studio.committed) > before, 60)
        agent.send_signal(signal.SIGTERM)
        try:
            _, errout = agent.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            agent.kill()
            _, errout = agent.communicate()
        u.check(agent.returncode == 0, "%s: the agent takes the manifest's arguments and exits 0 on SIGTERM%s"
                % (where, "" if agent.returncode == 0 else " (%s: %s)" % (agent.returncode, errout[-500:])))
        got = (studio.committed[-1]["query"].get("service") or [None])[0] if studio.committed else None
        u.check(ok and got == service[0], "%s: the studio receives the session under service %s (%s)"
                % (where, service[0], got if ok else errout[-800:]))
        u.check(os.path.exists(os.path.join(out, "last_profile.col")), "%s: the profile is in --output-dir" % where)
    u.check(not studio.errors, "the studio saw no protocol error: %s" % studio.errors[:3])
finally:
    u.kill(sleeper)
    if studio:
        studio.stop()
u.finish()
