"""Which variables of a submitter's environment a job may inherit, and which Slurm sets itself.

A shell inside an allocation (or a job that submits jobs) carries the variables Slurm set for
*that* job: ``SLURM_JOB_ID``, ``SLURM_RESTART_COUNT``, ``SLURM_NTASKS``... sbatch passes the
submitter's environment on, and Slurm sets a variable in the new job only when it has a value
for it: ``SLURM_RESTART_COUNT`` is left out until the first requeue. An inherited
``SLURM_RESTART_COUNT=7`` would then give the first run epoch N*1000000+7 and the requeued run
N*1000000+1, an epoch that goes backwards. So the environment dispatch keeps for a job, and the
one it runs sbatch with, never holds a variable Slurm sets per job.

The list follows Slurm's man pages: every ``SLURM_``/``SLURMD_`` variable is one Slurm sets
for a job or a step (sbatch(1), salloc(1) and srun(1), "OUTPUT ENVIRONMENT VARIABLES"), except
the few that those pages document only as inputs, which are kept; of the ``SBATCH_`` and
``SRUN_`` ones, which are inputs, those listed as outputs are dropped.
"""

from __future__ import annotations

from collections.abc import Mapping

# Documented as input variables only (sbatch(1)/srun(1)/squeue(1) "INPUT ENVIRONMENT
# VARIABLES"), never set by Slurm in a job: a user sets them to choose how Slurm behaves.
SLURM_INPUTS = frozenset(
    {
        "SLURM_CLUSTERS",
        "SLURM_CONF",
        "SLURM_DEBUG_FLAGS",
        "SLURM_EXIT_ERROR",
        "SLURM_EXIT_IMMEDIATE",
        "SLURM_MPI_TYPE",
        "SLURM_STEP_KILLED_MSG_NODE_ID",
        "SLURM_TIME_FORMAT",
        "SLURM_UMASK",
    }
)

# Input prefixes of which Slurm also sets some names in a job (sbatch(1) and salloc(1),
# "OUTPUT ENVIRONMENT VARIABLES").
SET_BY_SLURM = frozenset(
    {
        "SBATCH_MEM_BIND_LIST",
        "SBATCH_MEM_BIND_PREFER",
        "SBATCH_MEM_BIND_TYPE",
        "SBATCH_MEM_BIND_VERBOSE",
        "SRUN_CPUS_PER_TASK",
    }
)


def set_per_job(name: str) -> bool:
    """Whether Slurm sets ``name`` for a job or a step, so no job may inherit it."""
    if name in SET_BY_SLURM:
        return True
    return name.startswith(("SLURM_", "SLURMD_")) and name not in SLURM_INPUTS


def inheritable(environment: Mapping[str, str]) -> dict[str, str]:
    """``environment`` without the variables Slurm sets per job."""
    return {k: v for k, v in environment.items() if not set_per_job(k)}
