#!/bin/sh
# Epilog of the local test cluster. slurm_helpers/localcluster copies it into the state
# folder (etc/epilog.sh), filling in the @...@ path. slurmd runs it as root on every node of
# an allocation when the job's run there ends, and Slurm shows the job COMPLETING until it
# has finished on every node.
#
# It waits while the file @HOLD@/<Slurm job id> exists (at most 300 s), and does nothing
# else. A test that must look at a job inside that window (a run ending, or a requeued job
# whose restart count Slurm has already raised) makes the file first and removes it once it
# has looked: the window then lasts exactly as long as the test needs, however slow the
# machine. The folder is root's: only root can hold a job so.
hold=@HOLD@/${SLURM_JOB_ID:-none}
waited=0
while [ -e "$hold" ] && [ "$waited" -lt 3000 ]; do
    sleep 0.1
    waited=$((waited + 1))
done
exit 0
