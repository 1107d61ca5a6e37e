#!/bin/bash
# bench/run entry: agent cost against the number of target processes (see run.py).
exec python3 "$(dirname "$0")/run.py" --build "${PP_BUILD_DIR:-$(dirname "$0")/../../build}" "$@"
