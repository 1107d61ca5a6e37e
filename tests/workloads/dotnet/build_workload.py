"""Builds the .NET test workload once per build tree (standard library only).

Used by tests/integration/test_dotnet_*.py and bench/dotnet. The project is
copied to a scratch directory and built with the local SDK: nuget.config
clears every package source and the project references no package, so the
build never touches the network. The result is cached under
$PP_BUILD_DIR/dotnet-workload/<hash of the sources>/.
"""
import hashlib
import os
import shutil
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = ["PolyprofWorkload.csproj", "Program.cs", "nuget.config"]


def dotnet_env():
    env = dict(os.environ)
    env.update({"DOTNET_CLI_TELEMETRY_OPTOUT": "1", "DOTNET_NOLOGO": "1",
                "DOTNET_SKIP_FIRST_TIME_EXPERIENCE": "1", "DOTNET_CLI_UI_LANGUAGE": "en",
                "MSBUILDDISABLENODEREUSE": "1", "DOTNET_CLI_USE_MSBUILD_SERVER": "0"})
    return env


def build(build_dir):
    """Returns the output directory holding PolyprofWorkload(.dll), or raises
    RuntimeError with the SDK's output."""
    if not shutil.which("dotnet"):
        raise FileNotFoundError("dotnet SDK not on PATH")
    h = hashlib.sha256()
    for name in SOURCES:
        with open(os.path.join(HERE, name), "rb") as f:
            h.update(f.read())
    out = os.path.join(build_dir, "dotnet-workload", h.hexdigest()[:16])
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
