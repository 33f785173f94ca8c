#!/bin/sh
# Start the cluster, then stay in the foreground until stopped; on SIGTERM
# (docker stop) stop the daemons cleanly so the state folder stays consistent.
set -e
LC=/opt/dispatch/slurm_helpers/localcluster
"$LC" up
stop() { "$LC" down; exit 0; }
trap stop TERM INT
if [ "$#" -gt 0 ]; then
    "$@"
    exit $?
fi
while :; do
    sleep 3600 &
    wait $! || true
done
