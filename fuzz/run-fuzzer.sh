#!/bin/bash
# Runs one libFuzzer target for a bounded time on a corpus seeded from real
# files (ctest fuzz.<target>, bench/fuzz):
#   run-fuzzer.sh FUZZER TARGET SECONDS WORKDIR [SEED_CODEC_TOOL]
# The corpus grows in WORKDIR/corpus/<target> across runs. A crash, leak,
# UB report or timeout fails the run; the input is kept in
# WORKDIR/artifacts/<target>/ and goes into fuzz/regressions/<target>/
# once fixed (docs/fuzzing.md).
set -euo pipefail
fuzzer="$1" t="$2" secs="$3" work="$4" codec_tool="${5:-}"
here="$(cd "$(dirname "$0")" && pwd)"
corpus="$work/corpus/$t" artifacts="$work/artifacts/$t"
mkdir -p "$corpus" "$artifacts"
"$here/make-seeds.sh" "$t" "$corpus" "$codec_tool"
# ELF inputs are whole files; text formats stay small
maxlen=65536
[ "$t" = elf ] && maxlen=1048576
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
echo "fuzz.$t: $secs s on $(ls "$corpus" | wc -l) inputs ($(cat /proc/loadavg | cut -d' ' -f1-3) load)"
exec "$fuzzer" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len="$maxlen" \
  -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus"
