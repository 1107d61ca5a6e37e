#!/bin/sh
# The image's entrypoint: the agent with exactly the arguments the container
# was given (polyprof's flags and gProfiler's), after making the
# directories a container runtime does not (systemd makes them for the
# service: /run/polyprof for the pid file, the state and log directories).
set -e
mkdir -p /run/polyprof /var/lib/polyprof /var/log/polyprof
exec /usr/sbin/polyprof "$@"
