"""Kubernetes objects in: what dispatch reads of a TrainJob, its Kueue Workload and its pods.
Pure functions over the API's JSON, no I/O.

``facts`` gathers, for each TrainJob of dispatch's, what ``meaning`` needs to say its state
and cause: the numbers written into it, its admission gates, whether it is suspended, its
conditions, its Workload's admission and evictions, and each pod's phase, node, exit codes and
disruption. A number that cannot be read is None (the object is then foreign).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dispatch.adapters.kubeflow.render import (
    ANNOTATION_JOB,
    ANNOTATION_STOP,
    ANNOTATION_USER,
    GATES,
    LABEL_ATTEMPT,
    LABEL_JOB,
    LABEL_SUBMISSION,
)

JSON = Mapping[str, Any]
# JobSet labels every pod of a JobSet with its name, which is the TrainJob's.
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"


@dataclass(frozen=True)
class Condition:
    """One status condition: its status, reason and message."""

    status: bool
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class PodFacts:
    """What a pod of the TrainJob shows: phase, node, how its containers ended, and the reason
    of its ``DisruptionTarget`` condition (why Kubernetes is taking it down), if any."""

    name: str
    phase: str
    node: str
    exit_codes: tuple[int, ...] = ()
    reasons: tuple[str, ...] = ()
    disruption: str = ""
    deleting: bool = False


@dataclass(frozen=True)
class WorkloadFacts:
    """What Kueue's Workload for the TrainJob shows."""

    name: str
    admitted: bool
    active: bool
    conditions: Mapping[str, Condition]
    evictions: int
    # Evictions for a workload of higher priority (Kueue's reason "Preempted").
    preemptions: int = 0


@dataclass(frozen=True)
class TrainJobFacts:
    """Everything dispatch reads of one TrainJob and what belongs to it."""

    namespace: str
    name: str
    job: str
    label: str
    user: str
    submission: int | None
    attempt: int | None
    gates: tuple[str, ...]
    suspended: bool
    deleting: bool
    stop_reason: str
    conditions: Mapping[str, Condition]
    workload: WorkloadFacts | None
    pods: tuple[PodFacts, ...]
    # Pods the TrainJob's Jobs counted failed (status.jobsStatus), whether or not they remain.
    failed_pods: int = 0

    @property
    def id(self) -> str:
        """The object's id: ``<namespace>/<name>``."""
        return f"{self.namespace}/{self.name}"


def number(value: Any) -> int | None:
    """A positive decimal number written by dispatch, or None."""
    if isinstance(value, str) and value.isdigit() and not value.startswith("0"):
        return int(value)
    return None


def conditions(obj: JSON) -> dict[str, Condition]:
    """The status conditions of an object, by type."""
    out = {}
    for c in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(c, Mapping) and isinstance(c.get("type"), str):
            out[c["type"]] = Condition(
                status=c.get("status") == "True",
                reason=str(c.get("reason") or ""),
                message=str(c.get("message") or ""),
            )
    return out


def pod_facts(pod: JSON) -> PodFacts:
    """What one pod shows."""
    status = pod.get("status") or {}
    codes, reasons = _exits(status)
    disruption = conditions(pod).get("DisruptionTarget")
    meta = pod.get("metadata") or {}
    return PodFacts(
        name=str(meta.get("name", "")),
        phase=str(status.get("phase") or "Pending"),
        node=str((pod.get("spec") or {}).get("nodeName") or ""),
        exit_codes=tuple(codes),
        reasons=tuple(reasons),
        disruption=disruption.reason if disruption and disruption.status else "",
        deleting=bool(meta.get("deletionTimestamp")),
    )


def _exits(status: JSON) -> tuple[list[int], list[str]]:
    """The exit codes of a pod's containers, this run's and the last, and their reasons."""
    codes, reasons = [], []
    for cs in status.get("containerStatuses") or []:
        term = ((cs or {}).get("state") or {}).get("terminated") or {}
        last = ((cs or {}).get("lastState") or {}).get("terminated") or {}
        for t in (term, last):
            if isinstance(t.get("exitCode"), int):
                codes.append(t["exitCode"])
                reasons.append(str(t.get("reason") or ""))
    return codes, reasons


def workload_facts(workload: JSON) -> WorkloadFacts:
    """What one Kueue Workload shows."""
    conds = conditions(workload)
    stats = ((workload.get("status") or {}).get("schedulingStats") or {}).get("evictions") or []
    counts = [e for e in stats if isinstance(e, Mapping)]
    evictions = sum(int(e.get("count") or 0) for e in counts)
    preemptions = sum(int(e.get("count") or 0) for e in counts if e.get("reason") == "Preempted")
    admitted = conds.get("Admitted", Condition(False)).status
    return WorkloadFacts(
        name=str((workload.get("metadata") or {}).get("name", "")),
        preemptions=preemptions,
        admitted=admitted,
        active=(workload.get("spec") or {}).get("active", True) is not False,
        conditions=conds,
        evictions=evictions,
    )


def workloads_by_owner(workloads: Iterable[JSON]) -> dict[str, JSON]:
    """Kueue's Workloads by the uid of the TrainJob that owns each."""
    out: dict[str, JSON] = {}
    for wl in workloads:
        for owner in (wl.get("metadata") or {}).get("ownerReferences") or []:
            if owner.get("kind") == "TrainJob" and owner.get("uid"):
                out[str(owner["uid"])] = wl
    return out


def pods_by_trainjob(pods: Iterable[JSON]) -> dict[tuple[str, str], list[PodFacts]]:
    """Pods by (namespace, TrainJob name), read from JobSet's label."""
    out: dict[tuple[str, str], list[PodFacts]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        owner = (meta.get("labels") or {}).get(JOBSET_NAME)
        if owner:
            out.setdefault((str(meta.get("namespace", "")), str(owner)), []).append(pod_facts(pod))
    return out


def trainjob_facts(
    tj: JSON, workloads: Mapping[str, JSON], pods: Mapping[tuple[str, str], list[PodFacts]]
) -> TrainJobFacts:
    """Everything about one TrainJob, with its Workload and pods found by owner and name."""
    meta = tj.get("metadata") or {}
    labels = meta.get("labels") or {}
    notes = meta.get("annotations") or {}
    namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    wl = workloads.get(str(meta.get("uid", "")))
    gates = tuple(g.strip() for g in str(notes.get(GATES, "")).split(",") if g.strip())
    return TrainJobFacts(
        namespace=namespace,
        name=name,
        job=str(notes.get(ANNOTATION_JOB, "")),
        label=str(labels.get(LABEL_JOB, "")),
        user=str(notes.get(ANNOTATION_USER, "")),
        submission=number(labels.get(LABEL_SUBMISSION)),
        attempt=number(labels.get(LABEL_ATTEMPT)),
        gates=gates,
        suspended=(tj.get("spec") or {}).get("suspend") is True,
        deleting=bool(meta.get("deletionTimestamp")),
        stop_reason=str(notes.get(ANNOTATION_STOP, "")),
        conditions=conditions(tj),
        workload=workload_facts(wl) if wl is not None else None,
        pods=tuple(pods.get((namespace, name), ())),
        failed_pods=sum(
            int(j.get("failed") or 0)
            for j in (tj.get("status") or {}).get("jobsStatus") or []
            if isinstance(j, Mapping)
        ),
    )


def _index(notes: JSON, key: str) -> int:
    value = notes.get(key)
    return int(value) if isinstance(value, str) and value.isdigit() else 1 << 30


def pod_order(pod: JSON) -> tuple[int, int, str]:
    """Where a pod stands among its TrainJob's: by its Job's place in the JobSet, then its
    index in that Job (the first node's pod first), then its name."""
    meta = pod.get("metadata") or {}
    notes = meta.get("annotations") or {}
    return (
        _index(notes, "jobset.sigs.k8s.io/job-global-index"),
        _index(notes, "batch.kubernetes.io/job-completion-index"),
        str(meta.get("name", "")),
    )
