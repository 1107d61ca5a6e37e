#!/bin/bash
# bench/run entry: one hour soak under process churn (SOAK_MINUTES to shorten).
exec python3 "$(dirname "$0")/soak.py" --minutes "${SOAK_MINUTES:-60}" \
  --build "${PP_BUILD_DIR:-$(dirname "$0")/../../build}" "$@"
