"""The container image, built from the Debian packages and run as the
Kubernetes DaemonSet runs it (docs/deployment.md).

- `scripts/build-deb.sh` builds the packages; deploy/container/build-rootfs.sh
  makes the image's root file system from them without a registry (the
  debootstrap base of scripts/install-deps.sh) and imports it into podman.
- The image runs under podman with what deploy/kubernetes/polyprof-daemonset.yaml
  gives the pod: the host's pid namespace, root with exactly the manifest's
  capabilities (all others dropped), unconfined seccomp, the manifest's
  arguments and environment ($(VAR) substituted as the kubelet does), the
  token from a 0400 file mounted where the Secret is, the profiles directory
  mounted from the host. Only the studio address (a loopback fake), its CA,
  and a 3 s session are added after the manifest's flags.
- A Python program outside the container, run as nobody, has its Python
  frames in the profile the studio receives and in the mounted directory;
  the agent in the container holds the manifest's capabilities and its
  workers run with no_new_privs and a seccomp filter.
- `podman stop` (SIGTERM) ends the agent with status 0.
- The same image without the host's pid namespace refuses to run and says
  why (--pid=host / hostPID).
- deploy/container/Dockerfile builds (podman build, the debootstrap base
  standing in for debian:bookworm-slim, which no registry serves here) and
  its image lists the plugins through its entrypoint.
Needs root, podman, runc and the base root file system
(scripts/install-deps.sh test).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import pputil as u  # noqa: E402
import studio_server  # noqa: E402

SRC = u.SRC
BASE = "/opt/polyprof-test/rootfs-bookworm"
MANIFEST = os.path.join(SRC, "deploy", "kubernetes", "polyprof-daemonset.yaml")
IMAGE = "localhost/polyprof-test:%d" % os.getpid()
# This kind of machine has hybrid cgroups, which crun refuses (runc takes
# them), and no CAP_SYS_RESOURCE, so a container may not get rlimits above
# ours: podman's defaults (1048576 files) are lowered to what we have.
PODMAN = ["podman", "--runtime", "runc", "--cgroup-manager", "cgroupfs"]

if os.geteuid() != 0:
    u.skip("builds a root file system and runs containers: must run as root")
for tool in ("podman", "runc", "dpkg-buildpackage", "openssl", "setpriv"):
    if not shutil.which(tool):
        u.skip("%s is missing: run scripts/install-deps.sh test" % tool)
if not os.path.isdir(BASE):
    u.skip("no base root file system in %s: run scripts/install-deps.sh test" % BASE)
import yaml  # noqa: E402  (python3-yaml, scripts/deps/deploy.txt)


def run(cmd, timeout=600, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout, **kw)
    return p.returncode, p.stdout


def limits():
    import resource
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    n = min(nofile, 65536)
    out = ["--ulimit", "nofile=%d:%d" % (n, n)]
    if nproc != resource.RLIM_INFINITY:
        p = min(nproc, 4096)
        out += ["--ulimit", "nproc=%d:%d" % (p, p)]
    return out


WORKLOAD = """
import time
def polyprof_image_outside_loop():
    end = time.time() + 240
    while time.time() < end:
        sum(range(3000))
polyprof_image_outside_loop()
"""

work = u.tempdir("ppimage-")
procs = []
containers = []
images = []  # more images to remove
image_made = False
try:
    # --- the image ----------------------------------------------------------
    dist = os.path.join(work, "dist")
    t0 = time.time()
    rc, out = run([os.path.join(SRC, "scripts", "build-deb.sh"), dist], timeout=3000)
    print("build-deb.sh: %.0f s" % (time.time() - t0))
    if not u.check(rc == 0, "scripts/build-deb.sh builds the packages"):
        print(out[-3000:])
        raise SystemExit
    rootfs = os.path.join(work, "rootfs")
    t0 = time.time()
    rc, out = run([os.path.join(SRC, "deploy", "container", "build-rootfs.sh"), "--base", BASE,
                   "--import", IMAGE, dist, rootfs], timeout=900)
    image_made = rc == 0
    print("build-rootfs.sh: %.0f s" % (time.time() - t0))
    if not u.check(rc == 0, "build-rootfs.sh makes the root file system and imports the image"):
        print(out[-3000:])
        raise SystemExit
    shutil.rmtree(rootfs, ignore_errors=True)
    rc, out = run(PODMAN + ["image", "inspect", IMAGE, "--format", "{{json .Config.Entrypoint}}"])
    u.check(rc == 0 and json.loads(out) == ["/usr/local/bin/polyprof-entrypoint"],
            "the image's entrypoint is the agent's wrapper: %s" % out.strip())

    # --- the DaemonSet's pod, as podman flags -------------------------------
    with open(MANIFEST) as f:
        ds = yaml.safe_load(f)
    pod = ds["spec"]["template"]["spec"]
    ctr = pod["containers"][0]
    sc = ctr["securityContext"]
    u.check(pod.get("hostPID") is True and sc.get("privileged") is False,
            "the manifest asks for hostPID, not privileged")
    # downward API entries (NODE_NAME) have no value: the kubelet fills them
    env = {e["name"]: e["value"] for e in ctr.get("env", []) if "value" in e}
    studio_dir = os.path.join(work, "studio")
    os.makedirs(studio_dir)
    studio = studio_server.Studio(studio_dir, token="tok-image", service=env["POLYPROF_SERVICE_NAME"])
    env["POLYPROF_SERVER_HOST"] = studio.url
    args = [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], a) for a in ctr["args"]]
    args += ["--server-ca=/etc/polyprof/ca/cert.pem", "--api-server=" + studio.url,
             "--profiling-duration=3"]
    mounts = {m["name"]: m for m in ctr["volumeMounts"]}
    token_dir = os.path.join(work, "token")
    os.makedirs(token_dir, mode=0o700)
    with open(os.path.join(token_dir, "token"), "w") as f:
        f.write("tok-image\n")
    os.chmod(os.path.join(token_dir, "token"), 0o400)
    profiles = os.path.join(work, "profiles")
    os.makedirs(profiles, mode=0o755)
    caps = sc["capabilities"]["add"]
    pod_flags = ["--pid=host", "--network=host", "--user=0", "--cap-drop=ALL"]
    pod_flags += ["--cap-add=" + c for c in caps]
    pod_flags += ["--security-opt", "seccomp=unconfined"] + limits()
    pod_flags += ["-v", "%s:%s" % (profiles, mounts["profiles"]["mountPath"]),
                  "-v", "%s:%s:ro" % (token_dir, mounts["token"]["mountPath"]),
                  "-v", "%s:/etc/polyprof/ca:ro" % studio_dir]
    for k, v in env.items():
        pod_flags += ["-e", "%s=%s" % (k, v)]

    nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    py = subprocess.Popen(nobody + ["/usr/bin/python3", "-c", WORKLOAD])
    procs.append(py)

    name = "polyprof-test-%d" % os.getpid()
    rc, out = run(PODMAN + ["run", "-d", "--name", name] + pod_flags + [IMAGE] + args, timeout=120)
    if rc == 0:
        containers.append(name)
    if not u.check(rc == 0, "podman runs the image with the DaemonSet's flags"):
        print(out[-2000:])
        raise SystemExit

    def delivered():
        return any("polyprof_image_outside_loop" in l and "_[p]" in l
                   for c in studio.committed for l in c["body"]["profile"].split("\n"))

    ok = studio.wait(delivered, 90)
    if not ok:
        print(run(PODMAN + ["logs", name])[1][-3000:])
    u.check(ok, "the studio receives a profile with the outside process's Python frames")
    u.check(not studio.errors, "the studio saw no protocol error: %s" % studio.errors[:3])
    col = os.path.join(profiles, "last_profile.col")
    u.check(os.path.exists(col) and "polyprof_image_outside_loop" in open(col, errors="replace").read(),
            "the profile is also in the host directory mounted at /var/lib/polyprof")
    with open(col) as f:
        head = json.loads(f.readline()[2:])
    u.check(head.get("metadata", {}).get("run_mode") == "k8s",
            "POLYPROF_IN_K8S from the manifest: run_mode k8s (%s)" % head.get("metadata", {}).get("run_mode"))

    rc, out = run(PODMAN + ["inspect", name, "--format", "{{.State.Pid}}"])
    agent = int(out.strip()) if rc == 0 and out.strip().isdigit() else 0
    with open("/proc/%d/status" % agent) as f:
        st = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
    cap_names = {}
    rc, out = run(["capsh", "--decode=" + st["CapEff"].strip()]) if shutil.which("capsh") else (1, "")
    if rc == 0:
        held = {c.upper()[len("CAP_"):] for c in out.strip().split("=", 1)[1].split(",")}
        u.check(held == set(caps), "the agent holds exactly the manifest's capabilities: %s" % sorted(held))
    else:
        u.check(int(st["CapEff"], 16) != 0 and int(st["CapBnd"], 16) == int(st["CapEff"], 16),
                "the agent holds its capability set (CapEff %s)" % st["CapEff"].strip())
    workers = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/status" % d) as f:
                ws = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
        except OSError:
            continue
        if ws.get("PPid", "").strip() == str(agent) and ws.get("Name", "").strip().startswith("pp-"):
            workers.append(ws)
    u.check(workers and all(w["NoNewPrivs"].strip() == "1" and w["Seccomp"].strip() == "2" for w in workers),
            "the agent's %d plugin workers run with no_new_privs and a seccomp filter" % len(workers))

    rc, out = run(PODMAN + ["stop", "-t", "60", name], timeout=120)
    rc2, code = run(PODMAN + ["inspect", name, "--format", "{{.State.ExitCode}}"])
    u.check(rc == 0 and code.strip() == "0", "podman stop: the agent exits 0 on SIGTERM (%s)" % code.strip())

    # --- no host pid namespace: refused ------------------------------------
    rc, out = run(PODMAN + ["run", "--rm", "--pid=private", "--network=none", "--user=0", "--cap-drop=ALL"]
                  + ["--cap-add=" + c for c in caps] + limits() + [IMAGE, "-o", "/var/lib/polyprof", "-d", "1",
                                                                    "--log-file="], timeout=120)
    u.check(rc == 1 and "init pid namespace" in out and "--pid=host" in out,
            "without the host's pid namespace the image refuses to run and says why (rc %d)" % rc)

    # --- the Dockerfile, on the same base -----------------------------------
    # No registry gives debian:bookworm-slim here: the debootstrap base
    # stands in for it (--from); the Dockerfile's own steps run as written,
    # apt-get included.
    ctx = os.path.join(work, "context")
    os.makedirs(os.path.join(ctx, "deploy", "container"))
    shutil.copytree(dist, os.path.join(ctx, "dist"))
    shutil.copy(os.path.join(SRC, "deploy", "container", "entrypoint.sh"),
                os.path.join(ctx, "deploy", "container"))
    base_image = IMAGE + "-base"
    rc, out = run(["sh", "-c", "tar -C %s -c . | %s import - %s" % (BASE, " ".join(PODMAN), base_image)], timeout=600)
    built = IMAGE + "-dockerfile"
    t0 = time.time()
    rc, out = run(PODMAN + ["build", "--network=host", "--from", base_image, "-t", built, "-f",
                            os.path.join(SRC, "deploy", "container", "Dockerfile")] + limits() + [ctx], timeout=1200)
    print("podman build (Dockerfile): %.0f s" % (time.time() - t0))
    images.extend([base_image, built])
    if u.check(rc == 0, "the Dockerfile builds on the Debian base (podman build --from)"):
        rc, out = run(PODMAN + ["run", "--rm", "--network=none"] + limits() + [built, "plugins"], timeout=120)
        listed = {l.split()[0] for l in out.split("\n")[2:] if l and not l.startswith(" ")}
        u.check(rc == 0 and {"perf", "python", "java", "ruby", "nodejs"} <= listed,
                "the Dockerfile's image: its entrypoint takes the agent's arguments (plugins): %s" % sorted(listed))
    else:
        print(out[-3000:])
except SystemExit:
    pass
finally:
    for p in procs:
        u.kill(p)
    for c in containers:
        run(PODMAN + ["rm", "-f", c], timeout=120)
    for i in ([IMAGE] if image_made else []) + images:
        run(PODMAN + ["rmi", "-f", i], timeout=120)
u.finish()
