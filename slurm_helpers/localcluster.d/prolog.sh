#!/bin/sh
# Prolog of the local test cluster (slurm_helpers/localcluster copies it into
# the state folder, filling in the two paths). slurmd runs it as root on each
# allocated node when a job is allocated (PrologFlags=Alloc).
#
# It fails on purpose for a job whose name or comment contains
# "dispatch-fail-prolog", which gives a real launch failure: Slurm drains the
# node ("Prolog error") and requeues the job held ("launch failed requeued held").
# Every other job passes.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
SLURM_CONF=@SLURM_CONF@
export PATH SLURM_CONF
MARK=dispatch-fail-prolog

name=${SLURM_JOB_NAME:-}
comment=${SLURM_JOB_COMMENT:-}
if [ -z "$name$comment" ] && [ -n "${SLURM_JOB_ID:-}" ]; then
    # Older releases do not pass the name/comment to the prolog: ask the controller.
    info=$(scontrol show job -o "$SLURM_JOB_ID" 2>/dev/null)
    case "$info" in
        *"$MARK"*) name=$MARK ;;
    esac
fi

case "$name $comment" in
    *"$MARK"*)
        echo "$(date -u +%FT%TZ) job ${SLURM_JOB_ID:-?} on ${SLURMD_NODENAME:-?}: failing on purpose ($MARK)" \
            >> @LOGDIR@/prolog.log
        exit 1
        ;;
esac
exit 0
