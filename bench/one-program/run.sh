#!/bin/bash
# Start-up latency of `polyprof run -- CMD` (see run.py).
exec python3 "$(dirname "$0")/run.py" "$@"
