"""What a TrainJob, its Workload and its pods mean: state and cause, line by line of the tables
(objects shaped as the API server returns them; no cluster)."""

from __future__ import annotations

from typing import Any

import pytest

from dispatch.adapters.kubeflow import parse
from dispatch.adapters.kubeflow.meaning import ENDINGS, STATES, observe
from dispatch.model.enums import CauseKind, ObjectState

GATE = "dispatch.dev/start"


def trainjob(
    *,
    gates: str = "",
    suspend: bool = False,
    conditions: Any = (),
    user: str = "ada",
    numbers: tuple[str, str] = ("1", "1"),
    failed: int = 0,
) -> dict[str, Any]:
    notes = {"dispatch.dev/job": "j", "dispatch.dev/user": user}
    if gates:
        notes["kueue.x-k8s.io/admission-gated-by"] = gates
    return {
        "metadata": {
            "name": "dj-j-1-1",
            "namespace": "ada",
            "uid": "u1",
            "labels": {
                "dispatch.dev/job": "j",
                "dispatch.dev/submission": numbers[0],
                "dispatch.dev/attempt": numbers[1],
            },
            "annotations": notes,
        },
        "spec": {"suspend": suspend},
        "status": {
            "conditions": [dict(c) for c in conditions],
            "jobsStatus": [{"name": "node", "failed": failed}],
        },
    }


def workload(*conditions: dict[str, str], active: bool = True, evictions: int = 0) -> Any:
    return {
        "metadata": {"name": "w", "ownerReferences": [{"kind": "TrainJob", "uid": "u1"}]},
        "spec": {"active": active},
        "status": {
            "conditions": list(conditions),
            "schedulingStats": {"evictions": [{"reason": "Preempted", "count": evictions}]},
        },
    }


def pod(
    phase: str = "Running", code: int | None = None, reason: str = "", disruption: str = ""
) -> Any:
    state = {"terminated": {"exitCode": code, "reason": reason}} if code is not None else {}
    conds = (
        [{"type": "DisruptionTarget", "status": "True", "reason": disruption}] if disruption else []
    )
    return {
        "metadata": {
            "name": "p",
            "namespace": "ada",
            "labels": {"jobset.sigs.k8s.io/jobset-name": "dj-j-1-1"},
        },
        "spec": {"nodeName": "n1"},
        "status": {"phase": phase, "conditions": conds, "containerStatuses": [{"state": state}]},
    }


def c(kind: str, reason: str = "", message: str = "") -> dict[str, str]:
    return {"type": kind, "status": "True", "reason": reason, "message": message}


def seen(tj: Any, wl: Any = None, pods: Any = (), user: str = "ada") -> Any:
    facts = parse.trainjob_facts(
        tj, parse.workloads_by_owner([wl] if wl else []), parse.pods_by_trainjob(pods)
    )
    return observe(facts, GATE, user, "dj-j")


def test_dispatchs_gate_alone_is_gated_with_another_it_is_held_by_someone_else() -> None:
    assert seen(trainjob(gates=GATE)).state is ObjectState.GATED
    held = seen(trainjob(gates=f"{GATE},example.com/admin-held"))
    assert (held.state, held.held_by_other) == (ObjectState.HELD, True)
    other = seen(trainjob(gates="example.com/admin-held"))
    assert (other.state, other.cause.kind) == (ObjectState.HELD, CauseKind.HELD)


def test_admitted_with_a_pod_running_is_running_and_names_its_node() -> None:
    o = seen(trainjob(), workload(c("Admitted")), [pod()])
    assert (o.state, o.nodes) == (ObjectState.RUNNING, ("n1",))


@pytest.mark.parametrize(
    ("conds", "pods", "failed", "kind", "code"),
    [
        ([c("Complete")], [pod("Succeeded", 0)], 0, CauseKind.NONE, 0),
        ([c("Failed")], [pod("Failed", 3, "Error")], 1, CauseKind.NON_ZERO_EXIT, 3),
        ([c("Failed")], [pod("Failed", 137, "OOMKilled")], 1, CauseKind.OUT_OF_MEMORY, 137),
        (
            [c("Failed")],
            [pod("Failed", disruption="DeletionByPodGC")],
            1,
            CauseKind.NODE_LOST,
            None,
        ),
        ([c("Failed")], [], 1, CauseKind.NODE_LOST, None),
        ([c("Failed")], [], 0, CauseKind.LAUNCH_FAILED, None),
        ([c("Failed", "DeadlineExceeded")], [pod("Failed", 143)], 1, CauseKind.TIME_LIMIT, 143),
        (
            [c("Failed")],
            [pod("Failed", disruption="PreemptionByScheduler")],
            1,
            CauseKind.PREEMPTED,
            None,
        ),
    ],
)
def test_how_a_trainjob_ended_is_read_from_its_pods(
    conds: Any, pods: Any, failed: int, kind: CauseKind, code: int | None
) -> None:
    o = seen(trainjob(conditions=conds, failed=failed), workload(c("Finished")), pods)
    assert (o.state, o.cause.kind, o.cause.exit_code) == (ObjectState.ENDED, kind, code)


def test_kueue_eviction_for_a_higher_priority_workload_is_preemption() -> None:
    wl = workload(c("Evicted", "Preempted", "Preempted to accommodate a workload"), evictions=1)
    o = seen(trainjob(suspend=True), wl)
    assert (o.state, o.cause.kind, o.restarts) == (ObjectState.ENDED, CauseKind.PREEMPTED, 0)
    # Kueue admits it again: an execution dispatch did not ask for, a restart past the first.
    again = seen(trainjob(), workload(c("Admitted"), evictions=1), [pod()])
    assert (again.state, again.restarts) == (ObjectState.RUNNING, 1)


def test_a_deactivated_workload_is_a_stop_with_its_reason() -> None:
    tj = trainjob(suspend=True)
    tj["metadata"]["annotations"]["dispatch.dev/stop-reason"] = "cancelled by ada"
    o = seen(tj, workload(c("Evicted", "Deactivated"), active=False))
    assert (o.state, o.cause.kind, o.cause.detail) == (
        ObjectState.ENDED,
        CauseKind.CANCELLED,
        "cancelled by ada",
    )


def test_a_workload_that_never_fits_its_queue_is_no_capacity() -> None:
    never = {
        "type": "QuotaReserved",
        "status": "False",
        "reason": "Pending",
        "message": "couldn't assign flavors to pod set node: insufficient quota for cpu "
        "in flavor default, request > maximum capacity (24 > 16)",
    }
    o = seen(trainjob(), workload(never))
    assert (o.state, o.cause.kind) == (ObjectState.PENDING, CauseKind.NO_CAPACITY)


@pytest.mark.parametrize(
    ("numbers", "user"), [(("x", "1"), "ada"), (("1", "01"), "ada"), (("1", "1"), "bob")]
)
def test_unreadable_numbers_or_another_users_object_are_foreign(
    numbers: tuple[str, str], user: str
) -> None:
    assert seen(trainjob(numbers=numbers, user=user)).foreign


def test_every_line_of_the_tables_is_named_once() -> None:
    for table in (STATES, ENDINGS):
        names = [line.when for line in table]
        assert len(names) == len(set(names))


def test_an_evicted_trainjob_whose_pods_still_go_is_still_its_first_execution() -> None:
    wl = workload(c("Evicted", "Preempted"), evictions=1)
    o = seen(trainjob(suspend=True), wl, [pod()])
    assert (o.state, o.restarts) == (ObjectState.RUNNING, 0)
    gone = seen(trainjob(suspend=True), wl)
    assert (gone.state, gone.cause.kind, gone.restarts) == (
        ObjectState.ENDED,
        CauseKind.PREEMPTED,
        0,
    )
