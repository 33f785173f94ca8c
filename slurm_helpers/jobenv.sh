# Job-side environment and signal helper for dispatch jobs. Source it from a batch script:
#
#     source "$DISPATCH_HELPERS/jobenv.sh"
#     dispatch_run python train.py ...
#
# It exports DISPATCH_JOB, DISPATCH_SUBMISSION and DISPATCH_EPOCH. The epoch is computed here,
# at run time, as DISPATCH_SUBMISSION * 1000000 + SLURM_RESTART_COUNT, because a requeued Slurm
# job keeps the environment it was submitted with: only SLURM_RESTART_COUNT tells restarts apart.
#
# dispatch_run starts the training command and forwards the pre-termination signal (USR1, as
# sent by `#SBATCH --signal=B:USR1@SECONDS`) and TERM (preemption, scancel) to it, so training
# can save before the scheduler kills it. It returns the training command's exit status.

dispatch_fail() {
    echo "jobenv: $*" >&2
    return 2
}

dispatch_env() {
    local restart="${SLURM_RESTART_COUNT:-0}"
    if [[ -z "${DISPATCH_SUBMISSION:-}" ]]; then
        dispatch_fail "DISPATCH_SUBMISSION is not set; submit this job through dispatch" || return
    fi
    # Both parts must be plain decimal numbers below 1,000,000 (10# avoids octal on leading 0).
    if ! [[ "$DISPATCH_SUBMISSION" =~ ^[0-9]{1,6}$ && "$restart" =~ ^[0-9]{1,6}$ ]]; then
        dispatch_fail "DISPATCH_SUBMISSION=$DISPATCH_SUBMISSION or SLURM_RESTART_COUNT=$restart is not a number below 1000000" || return
    fi
    export DISPATCH_SUBMISSION=$((10#$DISPATCH_SUBMISSION))
    export DISPATCH_EPOCH=$((DISPATCH_SUBMISSION * 1000000 + 10#$restart))
    export DISPATCH_JOB="${DISPATCH_JOB:-${SLURM_JOB_NAME:-}}"
}

dispatch_run() {
    "$@" &
    DISPATCH_CHILD=$!
    trap 'kill -USR1 "$DISPATCH_CHILD" 2>/dev/null || true' USR1
    trap 'kill -TERM "$DISPATCH_CHILD" 2>/dev/null || true' TERM
    local status=0 again=0
    while true; do
        wait "$DISPATCH_CHILD" && status=0 || status=$?
        # A trapped signal interrupts `wait` with status > 128 while the child still runs.
        if kill -0 "$DISPATCH_CHILD" 2>/dev/null; then
            continue
        fi
        # If that wait was interrupted just as the child ended, one more wait yields its
        # real status; after a normal wait it answers 127 (no such child) and is ignored.
        wait "$DISPATCH_CHILD" 2>/dev/null && again=0 || again=$?
        [[ $again -ne 127 ]] && status=$again
        break
    done
    trap - USR1 TERM
    return "$status"
}

dispatch_env
