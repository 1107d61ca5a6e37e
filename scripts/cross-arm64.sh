#!/bin/bash
# Cross-builds polyprof for arm64 with Debian's cross toolchain and runs the
# unit tests and parser fuzz replays under qemu-user.
#
#   scripts/cross-arm64.sh [BUILD_DIR]     (default build-arm64)
#
# The arm64 libraries are not installed: their packages are downloaded
# (apt-get download, which needs the arm64 architecture in dpkg's list) and
# unpacked into a sysroot, PP_ARM64_SYSROOT (default
# /opt/polyprof-cross/arm64), that cmake/toolchain-aarch64.cmake points the
# compiler, pkg-config and qemu at. libcurl is loaded at run time, so only
# its headers are needed.
#
# Under qemu-user a test process is the emulator to the host kernel: its
# /proc entries (comm, exe, state, auxv) are qemu's, other processes'
# memory is not at the guest addresses it knows, and ptrace, seccomp and
# perf_event_open are not emulated. The unit tests that rest on those are
# left out here (PP_ARM64_SKIP_RE below); docs/deployment.md lists what that
# means for arm64.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
src="$(dirname "$here")"
build="${1:-build-arm64}"
sysroot="${PP_ARM64_SYSROOT:-/opt/polyprof-cross/arm64}"
jobs="${PP_JOBS:-2}"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi

host_pkgs=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static)
missing=()
for p in "${host_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# the -dev packages the build needs and the runtime libraries behind them
arm64_pkgs=(libyaml-dev libyaml-0-2 libjansson-dev libjansson4 libelf-dev libelf1 libzstd1
            libunwind-dev libunwind8 liblzma5 liblzma-dev zlib1g zlib1g-dev
            libprotobuf-c-dev libprotobuf-c1 libiberty-dev libcurl4-openssl-dev)
stamp="$sysroot/.polyprof-sysroot"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "${arm64_pkgs[*]}" ]; then
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $SUDO dpkg --add-architecture arm64
    $SUDO apt-get update -qq
  fi
  dl="$(mktemp -d)"
  trap 'rm -rf "$dl"' EXIT
  chmod 755 "$dl" # apt's download user writes here
  (cd "$dl" && apt-get download -qq "${arm64_pkgs[@]/%/:arm64}" 2>/dev/null) || {
    $SUDO apt-get update -qq
    (cd "$dl" && apt-get download -qq "${arm64_pkgs[@]/%/:arm64}")
  }
  $SUDO mkdir -p "$sysroot"
  for d in "$dl"/*.deb; do $SUDO dpkg -x "$d" "$sysroot"; done
  echo "${arm64_pkgs[*]}" | $SUDO tee "$stamp" >/dev/null
fi

cmake -S "$src" -B "$build" -DCMAKE_TOOLCHAIN_FILE="$src/cmake/toolchain-aarch64.cmake" \
  -DPP_ARM64_SYSROOT="$sysroot" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPOLYPROF_WERROR=ON >/dev/null
cmake --build "$build" -j"$jobs"

# What qemu-user cannot run (see above), by test:
#   test_enrich, test_profile, test_thread_cpu, test_targets, test_target_table,
#   test_target_files: /proc of the test process is qemu's (comm, exe, state, auxv)
#   test_remote, test_python_remote, test_python_synthetic,
#   test_python_object_reader, test_php_walk, test_ruby_objects,
#   test_perf_support, test_nodejs_v8_native: read a process's memory or
#   mappings
#   at guest addresses through the host kernel
#   test_worker, test_worker_sandbox: seccomp filters and privilege drops
#   test_thread_snapshot: ptrace (a thread held and its registers read)
#   test_http: loads the arm64 libcurl, which the sysroot does not carry
PP_ARM64_SKIP_RE='^unit\.test_(enrich|profile|thread_cpu|targets|target_table|target_files|remote|python_remote|python_synthetic|python_object_reader|thread_snapshot|php_walk|ruby_objects|perf_support|nodejs_v8_native|worker|worker_sandbox|http)$'
# a retry for the socket tests' timeouts, which emulation on a loaded host can reach
ctest --test-dir "$build" -L unit -E "$PP_ARM64_SKIP_RE" -j"$jobs" --output-on-failure \
  --repeat until-pass:2
