"""dispatch end to end on the local Kubernetes plane, with a file ledger: the tutorial's job as
a TrainJob under Kueue, preempted by a workload of higher priority, resubmitted by the
supervisor, and succeeded; the record is then held against what the API server shows.

Nothing is stood in but the containers: a real API server, Kueue, JobSet and Trainer
controllers, kwok's nodes; kwok ends a pod when the test annotates it (``live_kube.end_pod``).
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from live_cluster import WAIT, wait_for
from live_kube import Plane, end_pod, plane_env, running, trainjob, trainjob_pods

import dispatch
from dispatch.adapters.kubeflow import KubeflowBackend
from dispatch.adapters.kubeflow.settings import load_settings
from dispatch.model.enums import CauseKind, State
from dispatch.model.status import Escalation
from dispatch.records.file import FileRecords
from dispatch.supervise import Supervisor

pytestmark = pytest.mark.kube
ADA = dispatch.Actor(kind=dispatch.ActorKind.HUMAN, id="ada")


@pytest.fixture(scope="module")
def plane() -> Plane:
    return Plane(plane_env())


class World:
    """The kubeflow adapter as user ada (namespace ada), a file ledger, a supervisor thread."""

    def __init__(self, plane: Plane, root: Path) -> None:
        self.plane = plane
        # Four nodes of four CPUs each: a job of four nodes takes the whole ClusterQueue.
        settings = load_settings(
            {
                "kubeconfig": plane.kubeconfig("ada"),
                "namespace": "ada",
                "queue": "main",
                "priority_class": "low",
                "runtime": "dispatch-torch",
                "resources_per_node": {"cpu": "4", "memory": "1Gi"},
            }
        )
        self.backend = KubeflowBackend(settings)
        self.store = FileRecords(root / "ledger")
        self.cluster = dispatch.compose(self.backend, dispatch.Config(store=self.store))
        self.delivered: list[str] = []
        self.sup = Supervisor(
            self.backend, self.store, deliver=self._deliver, poll=timedelta(milliseconds=500)
        )
        self.failure: list[BaseException] = []
        self.thread: threading.Thread | None = None
        self.others: list[str] = []

    def _deliver(self, job: str, e: Escalation) -> None:
        self.delivered.append(e.id)

    def supervise(self, job: str) -> None:
        def run() -> None:
            try:
                self.sup.run(job)
            except BaseException as err:  # reported by join()
                self.failure.append(err)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def until(self, job: str, what: str, ok: Callable[[dispatch.Status], bool]) -> dispatch.Status:
        def probe() -> dispatch.Status:
            if self.failure:
                raise self.failure[0]
            return self.cluster.observer.get(job)

        return wait_for(what, probe, ok)

    def join(self) -> None:
        assert self.thread is not None
        self.thread.join(WAIT)
        if self.failure:
            raise self.failure[0]
        assert not self.thread.is_alive(), "the supervisor did not settle the job in time"


@pytest.fixture
def world(plane: Plane, tmp_path: Path) -> Iterator[World]:
    w = World(plane, tmp_path)
    jobs: list[str] = []
    w.jobs = jobs  # type: ignore[attr-defined]
    yield w
    for job in jobs:
        w.backend.stop_job(job, "live test clean-up")
    for name in w.others:
        plane.kubectl("delete", "trainjob", name, "-n", "bob", "--ignore-not-found")
    w.backend.close()


def pod_env(pod: dict[str, Any]) -> dict[str, str]:
    """The environment of a pod's first container, as its spec gives it."""
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0].get("env", [])}


def test_the_tutorial_on_kubeflow_preempted_through_kueue_recovered_succeeded(
    plane: Plane, world: World
) -> None:
    rule = dispatch.Rule(on=["preempted"], action="resubmit", budget=2)
    spec = dispatch.JobSpec(
        name="finetune",
        command=("torchrun", "train.py"),
        nodes=4,
        recovery=dispatch.RecoveryPolicy(rules=[rule]),
    )
    job = world.cluster.operator.submit(spec, ADA, supervised=True).job
    world.jobs.append(job)  # type: ignore[attr-defined]
    world.supervise(job)
    st = world.until(job, "running as submission 1", lambda s: s.state is State.RUNNING)
    first = st.submissions[0].canonical
    assert first is not None
    ns, first_name = first.id.split("/")
    pods = wait_for(
        "submission 1's four pods running",
        lambda: trainjob_pods(plane, ns, first_name),
        lambda p: len(p) == 4 and running(p),
    )
    assert {(pod_env(p)["DISPATCH_SUBMISSION"], pod_env(p)["DISPATCH_EPOCH"]) for p in pods} == {
        ("1", "1000000")
    }

    # bob's job of higher priority needs CPUs the ClusterQueue has only by preempting ada's.
    preemptor = f"urgent-{secrets.token_hex(3)}"
    plane.kubectl(
        "create",
        "-f",
        "-",
        who="bob",
        stdin=json.dumps(trainjob(preemptor, "bob", cpu="2", priority="high")),
    )
    world.others.append(preemptor)
    st = world.until(
        job,
        "recovering as submission 2",
        lambda s: len(s.submissions) == 2 and s.state is not State.RUNNING,
    )
    assert st.plan is not None and st.plan.rules[0].firings == 1
    (bob_pod,) = wait_for(
        "the preemptor's pod running",
        lambda: trainjob_pods(plane, "bob", preemptor),
        lambda p: len(p) == 1 and running(p),
    )
    end_pod(plane, "bob", bob_pod["metadata"]["name"], 0)

    st = world.until(
        job,
        "running as submission 2",
        lambda s: s.state is State.RUNNING and len(s.submissions) == 2,
    )
    second = st.submissions[1].canonical
    assert second is not None
    _, second_name = second.id.split("/")
    pods = wait_for(
        "submission 2's four pods running",
        lambda: trainjob_pods(plane, ns, second_name),
        lambda p: len(p) == 4 and running(p),
    )
    assert {pod_env(p)["DISPATCH_EPOCH"] for p in pods} == {"2000000"}
    for pod in pods:
        end_pod(plane, ns, pod["metadata"]["name"], 0)
    world.join()

    st = world.cluster.observer.get(job)
    assert (st.state, st.cause.kind) == (State.SUCCEEDED, CauseKind.NONE)
    assert [(e.from_, e.to, e.submission) for e in st.history] == [
        (State.PENDING, State.RECOVERING, 2),
        (State.RECOVERING, State.SUCCEEDED, 2),
    ]
    assert world.delivered == []

    # The record against the API server: the job's TrainJobs are exactly the two canonical
    # objects, numbered as recorded; the first was evicted by Kueue for a workload of higher
    # priority and kept from running again, the second completed.
    shown = json.loads(
        plane.kubectl(
            "get", "trainjobs", "-n", ns, "-l", f"dispatch.dev/job={job}", "-o", "json"
        ).stdout
    )["items"]
    numbers = {
        t["metadata"]["name"]: (
            t["metadata"]["labels"]["dispatch.dev/submission"],
            t["metadata"]["labels"]["dispatch.dev/attempt"],
        )
        for t in shown
    }
    assert numbers == {first_name: ("1", "1"), second_name: ("2", "1")}
    workloads = {
        w["metadata"]["ownerReferences"][0]["name"]: w
        for w in json.loads(plane.kubectl("get", "workloads", "-n", ns, "-o", "json").stdout)[
            "items"
        ]
    }
    evictions = workloads[first_name]["status"]["schedulingStats"]["evictions"]
    assert any(e["reason"] == "Preempted" for e in evictions)
    assert workloads[first_name]["spec"]["active"] is False
    done = next(t for t in shown if t["metadata"]["name"] == second_name)
    assert any(
        c["type"] == "Complete" and c["status"] == "True" for c in done["status"]["conditions"]
    )
    assert world.backend.inspect(first).cause.kind is CauseKind.PREEMPTED


def test_a_failure_no_rule_covers_fails_the_job_with_its_exit_code_and_an_escalation(
    plane: Plane, world: World
) -> None:
    spec = dispatch.JobSpec(name="buggy", command=("python", "train.py"))
    job = world.cluster.operator.submit(spec, ADA, supervised=True).job
    world.jobs.append(job)  # type: ignore[attr-defined]
    world.supervise(job)
    st = world.until(job, "running", lambda s: s.state is State.RUNNING)
    ref = st.submissions[0].canonical
    assert ref is not None
    ns, name = ref.id.split("/")
    (pod,) = wait_for(
        "its pod running",
        lambda: trainjob_pods(plane, ns, name),
        lambda p: len(p) == 1 and running(p),
    )
    end_pod(plane, ns, pod["metadata"]["name"], 3)
    world.join()
    st = world.cluster.observer.get(job)
    assert (st.state, st.cause.kind, st.cause.exit_code) == (
        State.FAILED,
        CauseKind.NON_ZERO_EXIT,
        3,
    )
    assert world.delivered == ["failed:non-zero-exit"]


def test_a_cancel_stops_the_trainjob_through_its_kueue_workload(plane: Plane, world: World) -> None:
    spec = dispatch.JobSpec(name="long", command=("python", "train.py"))
    job = world.cluster.operator.submit(spec, ADA, supervised=True).job
    world.jobs.append(job)  # type: ignore[attr-defined]
    world.supervise(job)
    st = world.until(job, "running", lambda s: s.state is State.RUNNING)
    ref = st.submissions[0].canonical
    assert ref is not None
    ns, name = ref.id.split("/")
    wait_for(
        "its pod running",
        lambda: trainjob_pods(plane, ns, name),
        lambda p: len(p) == 1 and running(p),
    )
    world.cluster.operator.cancel(job, ADA, "not needed")
    world.join()
    st = world.cluster.observer.get(job)
    assert st.state is State.CANCELLED
    wait_for("its pod gone", lambda: trainjob_pods(plane, ns, name), lambda p: not p)
    wl = next(
        w
        for w in plane.get("workloads", namespace=ns)["items"]
        if w["metadata"]["ownerReferences"][0]["name"] == name
    )
    assert wl["spec"]["active"] is False
    tj = plane.get("trainjob", name, namespace=ns)
    assert tj["metadata"]["annotations"]["dispatch.dev/stop-reason"]
