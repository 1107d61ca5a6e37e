#!/bin/bash
# python plugin benchmark (see run.py): polyprof's sampler vs austin, same
# target and rate; highest rate on one target; agent CPU over 20 processes.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec python3 "$here/run.py" --build "${PP_BUILD_DIR:-$here/../../build}" "$@"
