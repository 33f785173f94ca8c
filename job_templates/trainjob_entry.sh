#!/bin/bash
# One node of a TrainJob (job_templates/trainjob_ddp.yaml): resume from the newest checkpoint
# this execution may use, train under torchrun, publish every save with epoch fencing.
#
#     bash trainjob_entry.sh TRAIN_SCRIPT [ITS ARGUMENTS...]
#
# torchrun takes the node count, this node's rank and the rendezvous address from the PET_*
# variables Kubeflow Trainer's torch runtime sets. The training script must accept --saves DIR
# (one rank writes each save as DIR/step-N/ and finishes it with a .complete marker) and
# --resume DIR (the checkpoint to continue from; left out when there is none yet).
set -uo pipefail

: "${DISPATCH_EPOCH:?submit the TrainJob with dispatch trainjob, which sets DISPATCH_EPOCH}"
: "${PUBLISH_STORE:?set PUBLISH_STORE (the Secret publish) to the checkpoint store}"
if [[ $# -eq 0 ]]; then
    echo "give the training script: bash $0 train.py ..." >&2
    exit 2
fi

# This execution's folder: new, with a random name, only this user may enter (mode 0700).
WORK=$(mktemp -d "${TMPDIR:-/tmp}/dispatch-trainjob-$DISPATCH_EPOCH.XXXXXXXXXX") || exit 1
SAVES="$WORK/saves"
mkdir "$SAVES" || exit 1

resume_args=()
publish resolve --into "$WORK/checkpoint"
case $? in
    0) resume_args=(--resume "$WORK/checkpoint") ;;
    3) echo "no checkpoint to resume from; starting fresh" ;;
    *) echo "publish resolve failed; not starting" >&2; exit 1 ;;
esac

publish watch "$SAVES" &
WATCH=$!

# The kubelet stops a pod with TERM: torchrun passes it to the ranks, which save and stop.
torchrun "$@" --saves "$SAVES" "${resume_args[@]}" &
TRAIN=$!
trap 'kill -TERM "$TRAIN" 2>/dev/null' TERM
while true; do
    wait "$TRAIN" && status=0 || status=$?
    # A trapped signal interrupts `wait` (status > 128) while training still runs.
    kill -0 "$TRAIN" 2>/dev/null || break
done
wait "$TRAIN" 2>/dev/null && again=0 || again=$?
[[ $again -ne 127 ]] && status=$again
trap - TERM

# Let the watch finish its upload, then publish whatever the last save left behind.
kill -TERM "$WATCH" 2>/dev/null
wait "$WATCH"
watch_status=$?
[[ $watch_status -eq 143 ]] && watch_status=0
publish watch --once "$SAVES" || watch_status=$?
if [[ $status -eq 0 && $watch_status -ne 0 ]]; then
    status=$watch_status
fi
[[ $watch_status -eq 0 ]] && rm -rf -- "$WORK"
exit "$status"
