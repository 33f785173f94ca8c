#!/bin/sh
# Prolog of the local test cluster. slurm_helpers/localcluster copies it into
# the state folder (etc/prolog.sh), filling in the two @...@ paths. slurmd runs
# it as root on every allocated node when a job is allocated (PrologFlags=Alloc).
#
# It fails on purpose for a job whose comment or name contains
# "dispatch-fail-prolog", which gives a real launch failure: Slurm drains the
# node (reason "Prolog error") and requeues the job held (reason "launch failed
# requeued held"). Every other job passes.
#
# Slurm 22.05 gives the prolog SLURM_JOB_COMMENT but not the job name, so the
# name is read back from the controller.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
SLURM_CONF=@SLURM_CONF@
export PATH SLURM_CONF
MARK=dispatch-fail-prolog

fail() {
    echo "$(date -u +%FT%TZ) job ${SLURM_JOB_ID:-?} on ${SLURMD_NODENAME:-?}: failing on purpose ($1 contains $MARK)" \
        >> @LOGDIR@/prolog.log
    exit 1
}

case "${SLURM_JOB_COMMENT:-}" in
    *"$MARK"*) fail comment ;;
esac
name=${SLURM_JOB_NAME:-}
if [ -z "$name" ] && [ -n "${SLURM_JOB_ID:-}" ]; then
    name=$(scontrol show job -o "$SLURM_JOB_ID" 2>/dev/null | sed -n 's/.* JobName=\([^ ]*\).*/\1/p')
fi
case "$name" in
    *"$MARK"*) fail name ;;
esac
exit 0
