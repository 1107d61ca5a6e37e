#!/bin/bash
# Builds the Debian packages (docs/packaging.md):
#   scripts/build-deb.sh [OUT_DIR]        (make deb; default OUT_DIR: dist/)
# The tree is copied (tracked and untracked-but-not-ignored files, so local
# edits are included and build/ is not) to a temporary directory with
# packaging/debian staged as ./debian, and built there with
# `dpkg-buildpackage -us -uc -b`, DEB_JOBS (default 2) compiler jobs. The
# .deb/.changes/.buildinfo files land in OUT_DIR, the -dbgsym packages in
# OUT_DIR/debug; the copy is removed.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
# resolved now: the build below runs in its own copy of the tree
out="$(realpath -m "${1:-$here/dist}")"
jobs="${DEB_JOBS:-2}"

for tool in dpkg-buildpackage dh fakeroot; do
  if ! command -v "$tool" >/dev/null; then
    echo "build-deb: $tool is missing: run scripts/install-deps.sh test (dpkg-dev, debhelper, fakeroot)" >&2
    exit 1
  fi
done

work="$(mktemp -d /tmp/polyprof-deb.XXXXXX)"
trap 'rm -rf "$work"' EXIT
src="$work/polyprof"
mkdir -p "$src"
cd "$here"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # files deleted in the work tree but still in the index are skipped
  git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
    tar --null -T - -cf - | tar -xf - -C "$src"
else
  tar --exclude='./build*' --exclude=./out --exclude=./dist --exclude=./.git -cf - . | tar -xf - -C "$src"
fi
rm -rf "$src/debian"
cp -rL packaging/debian "$src/debian" # -L: the unit is a symlink to packaging/systemd/

cd "$src"
DEB_BUILD_OPTIONS="parallel=$jobs ${DEB_BUILD_OPTIONS:-}" dpkg-buildpackage -us -uc -b
mkdir -p "$out/debug"
# debug symbols apart, so `apt install ./dist/polyprof-plugin-*.deb` (README)
# installs the plugins and not their -dbgsym packages
for f in "$work"/*-dbgsym_*.deb; do
  [ -e "$f" ] && mv -f "$f" "$out/debug/"
done
for f in "$work"/*.deb "$work"/*.changes "$work"/*.buildinfo; do
  [ -e "$f" ] && mv -f "$f" "$out/"
done
echo "build-deb: packages in $out:"
ls -1 "$out"/*.deb
