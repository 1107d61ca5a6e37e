#!/bin/bash
# Installs what building, running and testing polyprof needs, from Debian
# packages only. Idempotent and quick when everything is already there:
# apt-get runs only for missing packages.
set -euo pipefail

what="${1:-test}" # build | test | deb (build + scripts/deps/packaging.txt)

build_pkgs=(build-essential cmake pkg-config libyaml-dev libjansson-dev libcurl4-openssl-dev
            libelf-dev libunwind-dev libiberty-dev zlib1g-dev python3
            protobuf-c-compiler libprotobuf-c-dev) # pprof writer (core/output/profile.proto)
# Runtimes and tools the test suite drives for real: every plugin lists its
# own in scripts/deps/<plugin>.txt, one package per line.
here="$(cd "$(dirname "$0")" && pwd)"
test_pkgs=()
for f in "$here"/deps/*.txt; do
  while read -r line; do
    line="${line%%#*}"
    line="${line//[[:space:]]/}"
    [ -n "$line" ] && test_pkgs+=("$line")
  done < "$f"
done

pkgs=("${build_pkgs[@]}")
if [ "$what" = test ]; then pkgs+=("${test_pkgs[@]}"); fi
if [ "$what" = deb ]; then
  while read -r line; do
    line="${line%%#*}"
    line="${line//[[:space:]]/}"
    [ -n "$line" ] && pkgs+=("$line")
  done < "$here/deps/packaging.txt"
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
