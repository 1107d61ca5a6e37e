#!/bin/bash
# Builds polyprof's container image without a registry: the root file
# system of deploy/container/Dockerfile, made with debootstrap from a Debian
# mirror instead of pulled as debian:bookworm-slim (docs/deployment.md).
#
#   deploy/container/build-rootfs.sh [--base DIR] [--import NAME:TAG] DIST_DIR ROOTFS_DIR
#
# DIST_DIR holds the packages of `make deb`. ROOTFS_DIR is created (it must
# not exist). --base DIR copies a root file system made earlier by
#   debootstrap --variant=minbase --include="$(deploy/container/build-rootfs.sh --packages)" bookworm DIR
# instead of running debootstrap (no network needed then). --import puts
# the result into podman's image store with the Dockerfile's entrypoint.
# Environment: MIRROR (default: debootstrap's own), SUITE (default
# bookworm). Needs root (debootstrap, chroot).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# what the packages depend on, plus CA certificates for HTTPS uploads
packages="ca-certificates,libelf1,libjansson4,libprotobuf-c1,libyaml-0-2,zlib1g,libcurl4,libunwind8"
base=""
import=""
while [ $# -gt 0 ]; do
  case "$1" in
    --packages) echo "$packages"; exit 0 ;;
    --base) base="$2"; shift 2 ;;
    --import) import="$2"; shift 2 ;;
    -*) echo "build-rootfs: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ $# -ne 2 ]; then
  echo "usage: $0 [--base DIR] [--import NAME:TAG] DIST_DIR ROOTFS_DIR" >&2
  exit 2
fi
dist="$(realpath "$1")"
root="$(realpath -m "$2")"
[ -e "$root" ] && { echo "build-rootfs: $root exists" >&2; exit 1; }
mapfile -t debs < <(ls "$dist"/polyprof_*.deb "$dist"/polyprof-plugin-*.deb 2>/dev/null | grep -v -e -dbgsym_)
if [ ${#debs[@]} -eq 0 ]; then
  echo "build-rootfs: no polyprof packages in $dist (run make deb)" >&2
  exit 1
fi

if [ -n "$base" ]; then
  cp -a "$base" "$root"
else
  debootstrap --variant=minbase --include="$packages" "${SUITE:-bookworm}" "$root" ${MIRROR:+"$MIRROR"}
fi

mkdir -p "$root/tmp/polyprof-debs"
cp "${debs[@]}" "$root/tmp/polyprof-debs/"
# the packages' scripts must not try to start a service in the image
printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
chroot "$root" sh -c 'dpkg -i /tmp/polyprof-debs/*.deb'
rm -rf "$root/tmp/polyprof-debs" "$root/usr/sbin/policy-rc.d" "$root"/var/cache/apt/archives/*.deb \
  "$root"/var/lib/apt/lists/*
install -m 755 "$here/entrypoint.sh" "$root/usr/local/bin/polyprof-entrypoint"
echo "build-rootfs: root file system in $root"

if [ -n "$import" ]; then
  tar -C "$root" -c . | podman import \
    --change 'ENTRYPOINT ["/usr/local/bin/polyprof-entrypoint"]' \
    --change 'ENV POLYPROF_IN_CONTAINER=1' \
    --change 'VOLUME ["/var/lib/polyprof"]' - "$import"
  echo "build-rootfs: image $import"
fi
