#!/bin/bash
# bench/run entry: the ruby plugin against stackprof (bench/ruby/run.py).
# Needs Debian ruby + ruby-stackprof and root; extra arguments go to run.py.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec python3 "$here/run.py" "$@"
