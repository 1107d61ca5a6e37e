#!/bin/bash
# bench/run entry: exec-to-plugin latency of short-lived runtimes and the cost of
# looking at young processes (see run.py).
exec python3 "$(dirname "$0")/run.py" --build "${PP_BUILD_DIR:-$(dirname "$0")/../../build}" "$@"
