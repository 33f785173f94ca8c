"""What a Slurm cluster can do, probed from its configuration where Slurm can tell."""

from __future__ import annotations

from collections.abc import Mapping

from dispatch.model.enums import Action, Capability, Source, Tristate
from dispatch.model.values import Rule, RuleSupport, Support

_YES, _NO, _UNKNOWN = Tristate.YES, Tristate.NO, Tristate.UNKNOWN


def _declared(state: Tristate, detail: str) -> Support:
    return Support(state=state, source=Source.DECLARED, detail=detail)


def _probed(state: Tristate, detail: str) -> Support:
    return Support(state=state, source=Source.PROBED, detail=detail)


def probe_capabilities(
    config: Mapping[str, str], sbatch_help: str, container_setting: str
) -> dict[Capability, Support]:
    """Capabilities from ``scontrol show config`` and ``sbatch --help``."""
    storage = config.get("AccountingStorageType", "")
    # Slurm 24.11 prints "(null)" where 22.05 printed "accounting_storage/none".
    disabled = storage in ("", "(null)", "none") or storage.endswith("/none")
    accounting = _probed(
        _NO if disabled else _YES,
        f"AccountingStorageType = {storage or '(unset)'}",
    )
    requeue_value = config.get("JobRequeue", "")
    requeue = _probed(
        _NO if requeue_value == "0" else _YES if requeue_value == "1" else _UNKNOWN,
        f"JobRequeue = {requeue_value or '(unset)'}",
    )
    if container_setting == "probe":
        pyxis = "--container-image" in sbatch_help
        images = _probed(_YES if pyxis else _NO, "pyxis option in sbatch --help")
    else:
        images = _declared(_YES if container_setting == "yes" else _NO, "settings")
    return {
        Capability.CONTAINER_IMAGE: images,
        Capability.NATIVE_REQUEUE: requeue,
        Capability.NATIVE_RESTART: requeue,
        Capability.HOLD: _declared(_YES, "start time ten years ahead (scontrol update)"),
        Capability.PRE_TERMINATION_SIGNAL: _declared(_YES, "sbatch --signal=B:SIG@SECONDS"),
        Capability.ACCOUNTING_HISTORY: accounting,
        Capability.ATTEMPT_INJECTION: _declared(_YES, "--comment=dispatch:<N>/<a>"),
        Capability.READMISSION_GATE: _declared(_YES, "sbatch --hold, scontrol release"),
        Capability.WORKING_DIRECTORY: _declared(_YES, "sbatch --chdir"),
        Capability.PROCS_PER_NODE: _declared(_YES, "sbatch --ntasks-per-node"),
        Capability.OUTPUT_PATH: _declared(_YES, "sbatch --output"),
        Capability.OUTPUT_READ: _declared(
            _YES,
            "the StdOut/StdErr file scontrol names, while Slurm remembers the job, "
            "from a host that shares its filesystem",
        ),
        Capability.OUTPUT_FOLLOW: _declared(
            _NO, "the file is read as it is; `dispatch logs --follow` reads it again"
        ),
        Capability.OUTPUT_RETAINED: _declared(_UNKNOWN, "depends on the output path's filesystem"),
    }


def rule_support(rule: Rule, caps: Mapping[Capability, Support]) -> RuleSupport:
    """Whether the supervisor can perform ``rule`` here; Slurm never enforces one natively."""
    native = _declared(_NO, "dispatch submits with --no-requeue; the supervisor recovers")
    if rule.action in (Action.REQUEUE, Action.RESTART):
        requeue = caps[Capability.NATIVE_REQUEUE]
        return RuleSupport(perform=requeue, native=native)
    perform = _declared(_YES, f"{rule.action} through sbatch/scontrol")
    return RuleSupport(perform=perform, native=native)
