#!/bin/sh
# Build and run the fold+merge benchmark (bench/fold_merge.c) against
# `LC_ALL=C sort | uniq -c` in the same run. Arguments go to fold_merge:
#   bench/run_fold_merge.sh [--lines N] [--stacks D] [--runs R] [--dir DIR] [--keep]
# The input file is about 0.8 GB at the default size; --dir picks where it
# goes (default $TMPDIR or /tmp), it is removed afterwards unless --keep.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${PP_BENCH_BUILD:-"$src/build-bench"}
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
make -C "$build" -j2 fold_merge >/dev/null
echo "host: $(nproc) CPUs, $(uname -r), $(sort --version | head -n1)"
exec "$build/bench/fold_merge" "$@"
