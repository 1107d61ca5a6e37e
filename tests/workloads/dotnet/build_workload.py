"""Builds the .NET test workload once per build tree (standard library only).

Used by tests/integration/test_dotnet_*.py and bench/dotnet. The project is
copied to a scratch directory and built with the local SDK: nuget.config
clears every package source and the project references no package, so the
build never touches the network. The result is cached under
$PP_BUILD_DIR/dotnet-workload/<hash of the sources>/.

`build_workload.py publish DEST MAJOR...` (run by scripts/install-deps.sh
test) publishes the same program self-contained for each .NET major, with
its own code precompiled (ReadyToRun), into DEST/dotnet-<major>/: the
runtime, reference and crossgen packs of that major come from the NuGet
source the machine's NuGet configuration names (the workload's own
nuget.config, which has none, is left out). A directory whose stamp holds
the sources' hash is kept, so a second run does nothing.
"""
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = ["PolyprofWorkload.csproj", "Program.cs", "nuget.config"]


def dotnet_env():
    env = dict(os.environ)
    env.update({"DOTNET_CLI_TELEMETRY_OPTOUT": "1", "DOTNET_NOLOGO": "1",
                "DOTNET_SKIP_FIRST_TIME_EXPERIENCE": "1", "DOTNET_CLI_UI_LANGUAGE": "en",
                "MSBUILDDISABLENODEREUSE": "1", "DOTNET_CLI_USE_MSBUILD_SERVER": "0"})
    return env


def sources_hash():
    h = hashlib.sha256()
    for name in SOURCES:
        with open(os.path.join(HERE, name), "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


def published(dest_root, major):
    """The self-contained executable for .NET `major` published by
    `publish`, or None if it is missing or out of date."""
    out = os.path.join(dest_root, "dotnet-%s" % major)
    try:
        with open(os.path.join(out, "polyprof-stamp")) as f:
            if f.read().strip() != sources_hash():
                return None
    except OSError:
        return None
    exe = os.path.join(out, "PolyprofWorkload")
    return exe if os.access(exe, os.X_OK) else None


def publish(dest_root, major):
    if published(dest_root, major):
        return
    out = os.path.join(dest_root, "dotnet-%s" % major)
    work = tempfile.mkdtemp(prefix="ppdotnet-publish-")
    try:
        for name in SOURCES:
            if name != "nuget.config":
                shutil.copy(os.path.join(HERE, name), work)
        tmp_out = out + ".tmp"
        shutil.rmtree(tmp_out, ignore_errors=True)
        p = subprocess.run(["dotnet", "publish", "-c", "Release", "-r", "linux-x64",
                            "--self-contained", "-p:PolyprofTargetFramework=net%s.0" % major,
                            "-p:PublishReadyToRun=true", "-o", tmp_out, "-nodeReuse:false",
                            os.path.join(work, "PolyprofWorkload.csproj")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=dotnet_env(), timeout=900, cwd=work)
        if p.returncode != 0:
            raise RuntimeError("dotnet publish net%s.0 failed:\n%s" % (major, p.stdout[-4000:]))
        with open(os.path.join(tmp_out, "polyprof-stamp"), "w") as f:
            f.write(sources_hash() + "\n")
        shutil.rmtree(out, ignore_errors=True)
        os.rename(tmp_out, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def build(build_dir):
    """Returns the output directory holding PolyprofWorkload(.dll), or raises
    RuntimeError with the SDK's output."""
    if not shutil.which("dotnet"):
        raise FileNotFoundError("dotnet SDK not on PATH")
    out = os.path.join(build_dir, "dotnet-workload", sources_hash())
    exe = os.path.join(out, "PolyprofWorkload")
    if os.path.exists(exe) and os.path.exists(exe + ".dll"):
        return out
    work = tempfile.mkdtemp(prefix="ppdotnet-build-")
    try:
        for name in SOURCES:
            shutil.copy(os.path.join(HERE, name), work)
        tmp_out = out + ".tmp"
        shutil.rmtree(tmp_out, ignore_errors=True)
        p = subprocess.run(["dotnet", "build", "-c", "Release", "-o", tmp_out, "-nodeReuse:false",
                            os.path.join(work, "PolyprofWorkload.csproj")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=dotnet_env(), timeout=600, cwd=work)
        if p.returncode != 0:
            raise RuntimeError("dotnet build failed:\n" + p.stdout[-4000:])
        shutil.rmtree(out, ignore_errors=True)
        os.rename(tmp_out, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[1] != "publish":
        sys.exit("usage: build_workload.py publish DEST MAJOR...")
    for major in sys.argv[3:]:
        if not published(sys.argv[2], major):
            print("build_workload: publishing the .NET %s workload into %s/dotnet-%s"
                  % (major, sys.argv[2], major))
            publish(sys.argv[2], major)
