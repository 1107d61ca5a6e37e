#!/bin/bash
# php plugin vs excimer, same run (see bench.py). Arguments go to bench.py.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec python3 "$here/bench.py" "$@"
