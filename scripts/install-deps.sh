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

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The Node.js majors the nodejs tests cover, as official builds: the npm
# registry's node-linux-<arch> package carries bin/node. Each goes to
# /opt/polyprof-test/node-<major>/bin/node; one already there (of that
# major) is kept, so a second run does nothing.
install_node_major() {
  local major="$1" dest="/opt/polyprof-test/node-$1" arch tmp
  if [ -x "$dest/bin/node" ] && "$dest/bin/node" --version 2>/dev/null | grep -q "^v$major\."; then
    return 0
  fi
  case "$(uname -m)" in
    x86_64) arch=x64 ;;
    aarch64) arch=arm64 ;;
    *) echo "install-deps: no official Node.js build for $(uname -m)" >&2; return 0 ;;
  esac
  echo "install-deps: installing Node.js $major into $dest"
  tmp="$(mktemp -d)"
  npm install --prefix "$tmp" --ignore-scripts --no-audit --no-fund --silent \
    "node-linux-$arch@$major" >/dev/null
  $SUDO mkdir -p /opt/polyprof-test
  $SUDO rm -rf "$dest.new"
  $SUDO mv "$tmp/node_modules/node-linux-$arch" "$dest.new"
  $SUDO rm -rf "$dest"
  $SUDO mv "$dest.new" "$dest"
  rm -rf "$tmp"
}
if [ "$what" = test ]; then
  # Debian's nodejs comes without npm (NodeSource's carries its own)
  if ! command -v npm >/dev/null; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends npm >/dev/null
  fi
  for major in 18 20 22 24; do install_node_major "$major"; done
fi

# The .NET majors the dotnet tests cover: the test workload published
# self-contained (runtime packs from NuGet) into
# /opt/polyprof-test/dotnet-<major>/; an up-to-date one is kept.
if [ "$what" = test ] && command -v dotnet >/dev/null; then
  $SUDO mkdir -p /opt/polyprof-test
  $SUDO python3 "$here/../tests/workloads/dotnet/build_workload.py" publish /opt/polyprof-test 8 9 10
fi

# The real-software corpus (tests/corpus/README.md): TypeScript's compiler
# from the npm registry into /opt/polyprof-test/corpus/typescript; a copy of
# that version already there is kept.
install_typescript() {
  local version=5.9.3 dest=/opt/polyprof-test/corpus/typescript
  if [ -f "$dest/node_modules/typescript/package.json" ] &&
     grep -q "\"version\": \"$version\"" "$dest/node_modules/typescript/package.json"; then
    return 0
  fi
  echo "install-deps: installing TypeScript $version into $dest"
  $SUDO mkdir -p "$dest"
  $SUDO npm install --prefix "$dest" --ignore-scripts --no-audit --no-fund --silent "typescript@$version" >/dev/null
}
if [ "$what" = test ]; then install_typescript; fi

# The Firefox Profiler's command-line front end (its import and call-tree
# code, bundled; Node.js 24, installed above): test_gecko_firefox_profiler
# loads polyprof's gecko files in it. A copy of that version is kept.
install_profiler_cli() {
  local version=0.10.0 dest=/opt/polyprof-test/firefox-profiler-cli
  local pkg="$dest/node_modules/@firefox-devtools/profiler-cli/package.json"
  if [ -f "$pkg" ] && grep -q "\"version\": \"$version\"" "$pkg"; then
    return 0
  fi
  echo "install-deps: installing the Firefox Profiler CLI $version into $dest"
  $SUDO mkdir -p "$dest"
  $SUDO npm install --prefix "$dest" --ignore-scripts --no-audit --no-fund --silent \
    "@firefox-devtools/profiler-cli@$version" >/dev/null
}
if [ "$what" = test ]; then install_profiler_cli; fi

# The container image's base (deploy/container/build-rootfs.sh --base):
# a minimal Debian root file system with what the packages depend on, made
# once with debootstrap into /opt/polyprof-test/rootfs-bookworm; kept while
# the package list it was made with is the same.
install_rootfs_base() {
  local dest=/opt/polyprof-test/rootfs-bookworm want
  want="$("$here/../deploy/container/build-rootfs.sh" --packages)"
  if [ -d "$dest" ] && [ "$(cat "$dest.packages" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  echo "install-deps: making the container base root file system in $dest (debootstrap)"
  $SUDO mkdir -p /opt/polyprof-test
  $SUDO rm -rf "$dest.new"
  $SUDO debootstrap --variant=minbase --include="$want" bookworm "$dest.new" >/dev/null
  $SUDO rm -rf "$dest"
  $SUDO mv "$dest.new" "$dest"
  echo "$want" | $SUDO tee "$dest.packages" >/dev/null
}
if [ "$what" = test ]; then install_rootfs_base; fi
