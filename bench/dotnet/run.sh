#!/bin/bash
# .NET target slowdown: baseline vs polyprof (dotnet-trace mode, 100 Hz) vs
# Microsoft's dotnet-trace when installable. See bench/dotnet/RESULTS.md.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
command -v dotnet >/dev/null || { echo "dotnet: SKIPPED (no .NET SDK on PATH)"; exit 0; }
exec python3 "$here/bench_dotnet.py"
