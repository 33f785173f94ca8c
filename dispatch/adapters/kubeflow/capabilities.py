"""What a Kubernetes cluster with Kubeflow Trainer and Kueue can do for dispatch: probed from
the cluster where it can tell, declared otherwise, each answer with its source."""

from __future__ import annotations

from collections.abc import Mapping

from dispatch.model.enums import Action, Capability, Source, Tristate
from dispatch.model.values import Rule, RuleSupport, Support

_YES, _NO, _UNKNOWN = Tristate.YES, Tristate.NO, Tristate.UNKNOWN
# A malformed admission gate: Kueue refuses it only while its AdmissionGatedBy feature is on.
BAD_GATE = "not a domain-prefixed gate"


def _declared(state: Tristate, detail: str) -> Support:
    return Support(state=state, source=Source.DECLARED, detail=detail)


def _probed(state: Tristate, detail: str) -> Support:
    return Support(state=state, source=Source.PROBED, detail=detail)


def gate_support(refusal: str | None) -> Support:
    """Whether Kueue honours ``kueue.x-k8s.io/admission-gated-by``, from how the API answered
    a server-side dry run of a TrainJob carrying ``BAD_GATE``: refused naming the annotation
    (the feature is on), accepted (off: a gate would be ignored and the job run at once), or
    refused for another reason (not known)."""
    if refusal is None:
        return _probed(_NO, "Kueue accepted a malformed admission gate: AdmissionGatedBy is off")
    if "admission-gated-by" in refusal:
        return _probed(_YES, "Kueue validates kueue.x-k8s.io/admission-gated-by (dry run)")
    return _probed(_UNKNOWN, f"dry run of a gated TrainJob: {refusal[:200]}")


def capabilities(gate: Support) -> dict[Capability, Support]:
    """Every capability: the gate probed, the rest declared."""
    return {
        Capability.CONTAINER_IMAGE: _declared(_YES, "trainer.image"),
        Capability.NATIVE_REQUEUE: _declared(_NO, "a TrainJob is never run again in place"),
        Capability.NATIVE_RESTART: _declared(_NO, "a TrainJob is never run again in place"),
        Capability.HOLD: _declared(_NO, "Kueue's admission gates cannot be added after creation"),
        Capability.PRE_TERMINATION_SIGNAL: _declared(
            _NO, "pods get SIGTERM at deletion; no signal ahead of a time limit"
        ),
        Capability.ACCOUNTING_HISTORY: _declared(_NO, "a deleted TrainJob leaves no record"),
        Capability.ATTEMPT_INJECTION: _declared(
            _YES, "labels dispatch.dev/submission and dispatch.dev/attempt"
        ),
        Capability.READMISSION_GATE: gate,
        Capability.WORKING_DIRECTORY: _declared(_NO, "a TrainJob names no working directory"),
        Capability.PROCS_PER_NODE: _declared(_YES, "trainer.numProcPerNode"),
        Capability.OUTPUT_PATH: _declared(_NO, "output goes to the pods' logs"),
        Capability.OUTPUT_READ: _declared(_YES, "the first pod's log, through the API server"),
        Capability.OUTPUT_FOLLOW: _declared(_YES, "the first pod's log, read again while it runs"),
        Capability.OUTPUT_RETAINED: _declared(_NO, "pod logs go with their pods"),
        Capability.CESSATION_SIGNAL: _declared(_NO, "no node-side evidence"),
    }


def rule_support(rule: Rule, caps: Mapping[Capability, Support]) -> RuleSupport:
    """Whether the supervisor can perform ``rule`` here; Kubeflow never enforces one natively."""
    native = _declared(_NO, "Kueue and Trainer recover nothing for dispatch; the supervisor does")
    if rule.action in (Action.REQUEUE, Action.RESTART):
        return RuleSupport(
            perform=_declared(_NO, f"{rule.action}: a TrainJob is never run again in place"),
            native=native,
        )
    gate = caps[Capability.READMISSION_GATE]
    if rule.action is Action.RESUBMIT:
        return RuleSupport(perform=gate, native=native)
    return RuleSupport(perform=_declared(_YES, f"{rule.action} by the supervisor"), native=native)
