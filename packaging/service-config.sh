#!/bin/sh
# Writes the packaged /etc/polyprof/polyprof.yaml: config/polyprof.yaml with
# the service's settings (continuous sessions, output in /var/lib/polyprof,
# only the latest profile kept, pid file in the RuntimeDirectory). Every edit
# must apply exactly once: if config/polyprof.yaml changes shape, the package
# build stops here instead of shipping a config that silently differs.
# Usage: service-config.sh config/polyprof.yaml OUT
set -eu

src=$1
out=$2
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

edit() { # edit 'exact line' 'replacement line'
    n=$(grep -cxF -- "$1" "$tmp" || true)
    if [ "$n" != 1 ]; then
        echo "service-config.sh: expected exactly one line '$1' in $src, found $n" >&2
        exit 1
    fi
    awk -v old="$1" -v new="$2" '$0 == old { print new; next } { print }' "$tmp" > "$tmp.new"
    mv "$tmp.new" "$tmp"
}

{
    echo "# polyprof service configuration (package polyprof)."
    echo "#"
    echo "# This is config/polyprof.yaml with the service's settings: continuous"
    echo "# sessions, profiles in /var/lib/polyprof (latest one kept, see"
    echo "# output.rotating), pid file in /run/polyprof. After editing:"
    echo "#   polyprof check --config /etc/polyprof/polyprof.yaml"
    echo "#   systemctl reload polyprof   (applied at the next session boundary)"
    echo "# Flags in POLYPROF_OPTS (/etc/default/polyprof) override this file."
    echo "#"
    cat "$src"
} > "$tmp"

edit "  continuous: false" "  continuous: true"
edit "  # dir: /var/lib/polyprof" "  dir: /var/lib/polyprof"
# a profile a minute would fill the disk of a long-running host: keep the
# latest; upload (or output.rotating: false with your own cleanup) keeps history
edit "  rotating: false" "  rotating: true"
edit "  pid_file: /run/polyprof.pid" "  pid_file: /run/polyprof/polyprof.pid"

install -D -m 0644 "$tmp" "$out"
