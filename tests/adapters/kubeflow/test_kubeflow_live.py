"""The kubeflow adapter on the local Kubernetes plane: each way an execution ends is read as its
typed cause; dispatch's gate is the only one it opens; a foreign object is never adopted."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from live_cluster import wait_for
from live_kube import Plane, end_pod, lose_node, plane_env, restore_nodes, running, trainjob_pods

from dispatch.adapters.kubeflow import KubeflowBackend
from dispatch.adapters.kubeflow.settings import load_settings
from dispatch.model.enums import CauseKind, ObjectState
from dispatch.model.errors import RejectedError
from dispatch.model.objects import ObjectObs, ObjectRef, StartRequest
from dispatch.model.values import JobSpec

pytestmark = pytest.mark.kube
ADMIN_GATE = "example.com/admin-held"


@pytest.fixture(scope="module")
def plane() -> Plane:
    return Plane(plane_env())


@pytest.fixture
def backend(plane: Plane) -> Iterator[KubeflowBackend]:
    b = KubeflowBackend(
        load_settings(
            {
                "kubeconfig": plane.kubeconfig("ada"),
                "namespace": "ada",
                "queue": "main",
                "runtime": "dispatch-torch",
                "resources_per_node": {"cpu": "1", "memory": "1Gi"},
            }
        )
    )
    b.started = []  # type: ignore[attr-defined]
    yield b
    for job in b.started:  # type: ignore[attr-defined]
        b.stop_job(job, "live test clean-up")
    b.close()


def start(b: KubeflowBackend, **spec: Any) -> tuple[str, ObjectRef]:
    job = "k" + secrets.token_hex(4)
    b.started.append(job)  # type: ignore[attr-defined]
    req = StartRequest(
        job=job,
        submission=1,
        attempt=1,
        lineage_submission=1,
        spec=JobSpec(command=("python", "train.py"), **spec),
    )
    return job, b.start(req)


def new_request(b: KubeflowBackend) -> StartRequest:
    """A first attempt of a new job of this test's, stopped at the end."""
    job = "k" + secrets.token_hex(4)
    b.started.append(job)  # type: ignore[attr-defined]
    return StartRequest(
        job=job,
        submission=1,
        attempt=1,
        lineage_submission=1,
        spec=JobSpec(command=("python", "train.py")),
    )


def seen(b: KubeflowBackend, job: str, ref: ObjectRef, what: str, ok: Any) -> ObjectObs:
    found = wait_for(what, lambda: b.find(job).get(ref), lambda o: o is not None and ok(o))
    assert found is not None
    return found


def pods_running(plane: Plane, ref: ObjectRef, count: int = 1) -> list[dict[str, Any]]:
    ns, name = ref.id.split("/")
    return wait_for(
        "the TrainJob's pods running",
        lambda: trainjob_pods(plane, ns, name),
        lambda p: len(p) == count and running(p),
    )


@pytest.mark.parametrize(
    ("code", "reason", "kind"),
    [
        (0, "", CauseKind.NONE),
        (3, "", CauseKind.NON_ZERO_EXIT),
        (137, "OOMKilled", CauseKind.OUT_OF_MEMORY),
    ],
)
def test_how_a_pod_ends_is_the_executions_cause(
    plane: Plane, backend: KubeflowBackend, code: int, reason: str, kind: CauseKind
) -> None:
    job, ref = start(backend, nodes=2)
    backend.open(ref)
    pods = pods_running(plane, ref, 2)
    end_pod(plane, "ada", pods[0]["metadata"]["name"], code, reason)
    if code == 0:
        end_pod(plane, "ada", pods[1]["metadata"]["name"], 0)
    o = seen(backend, job, ref, "the end", lambda o: o.state is ObjectState.ENDED)
    assert o.cause.kind is kind
    assert o.cause.exit_code == code


def test_a_node_gone_is_node_lost(plane: Plane, backend: KubeflowBackend) -> None:
    job, ref = start(backend)
    backend.open(ref)
    (pod,) = pods_running(plane, ref)
    try:
        lose_node(plane, pod["spec"]["nodeName"])
        o = seen(backend, job, ref, "the end", lambda o: o.state is ObjectState.ENDED)
        assert o.cause.kind is CauseKind.NODE_LOST
    finally:
        restore_nodes(plane)


def test_a_job_larger_than_its_queue_is_no_capacity(plane: Plane, backend: KubeflowBackend) -> None:
    job, ref = start(backend, nodes=20)
    backend.open(ref)
    o = seen(backend, job, ref, "Kueue's verdict", lambda o: o.cause.kind is not CauseKind.NONE)
    assert (o.state, o.cause.kind) == (ObjectState.PENDING, CauseKind.NO_CAPACITY)


def test_a_time_limit_is_time_limit(plane: Plane, backend: KubeflowBackend) -> None:
    job, ref = start(backend, time_limit=timedelta(seconds=5))
    backend.open(ref)
    o = seen(backend, job, ref, "the end", lambda o: o.state is ObjectState.ENDED)
    assert o.cause.kind is CauseKind.TIME_LIMIT, o.cause


def test_every_pod_carries_the_executions_numbers(plane: Plane, backend: KubeflowBackend) -> None:
    job = "k" + secrets.token_hex(4)
    backend.started.append(job)  # type: ignore[attr-defined]
    req = StartRequest(
        job=job,
        submission=2,
        attempt=3,
        lineage_submission=7,
        spec=JobSpec(command=("python", "train.py"), nodes=2, env={"SEED": "1"}),
    )
    ref = backend.start(req)
    backend.open(ref)
    for pod in pods_running(plane, ref, 2):
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        assert env["DISPATCH_EPOCH"] == "7000000"
        assert (env["DISPATCH_SUBMISSION"], env["DISPATCH_ATTEMPT"], env["SEED"]) == ("7", "3", "1")


def test_open_lifts_only_dispatchs_gate_and_an_admins_stays(
    plane: Plane, backend: KubeflowBackend
) -> None:
    """The admin's gate is on the TrainJob from its creation (Kueue refuses a gate added
    later): here the test creates dispatch's TrainJob itself, as the adapter renders it, with
    the admin's gate beside dispatch's."""
    from dispatch.adapters.kubeflow import render

    req = new_request(backend)
    job = req.job
    body = render.trainjob(req, backend.settings, backend.user)
    body["metadata"]["annotations"][render.GATES] = f"{ADMIN_GATE},dispatch.dev/start"
    plane.kubectl("create", "-f", "-", who="ada", stdin=json.dumps(body))
    ref = ObjectRef(id=f"ada/{body['metadata']['name']}", name=req.name)
    o = seen(backend, job, ref, "the object", lambda o: True)
    assert (o.state, o.held_by_other) == (ObjectState.HELD, True)
    backend.open(ref)
    backend.open(ref)
    tj = plane.get("trainjob", body["metadata"]["name"], namespace="ada")
    assert tj["metadata"]["annotations"][render.GATES] == ADMIN_GATE
    o = seen(backend, job, ref, "the object", lambda o: True)
    assert (o.state, o.held_by_other) == (ObjectState.HELD, True)


@pytest.mark.parametrize("forge", ["numbers", "user"])
def test_a_foreign_object_is_shown_foreign_and_never_opened(
    plane: Plane, backend: KubeflowBackend, forge: str
) -> None:
    from dispatch.adapters.kubeflow import render

    req = new_request(backend)
    job = req.job
    body = render.trainjob(req, backend.settings, backend.user)
    if forge == "numbers":
        body["metadata"]["labels"][render.LABEL_ATTEMPT] = "one"
    else:
        body["metadata"]["annotations"][render.ANNOTATION_USER] = "bob"
    plane.kubectl("create", "-f", "-", stdin=json.dumps(body))
    ref = ObjectRef(id=f"ada/{body['metadata']['name']}", name=req.name)
    o = seen(backend, job, ref, "the object", lambda o: True)
    assert o.foreign
    with pytest.raises(RejectedError, match="foreign"):
        backend.open(ref)
    report = backend.stop_job(job, "not ours")
    assert ref not in report.stopped
    tj = plane.get("trainjob", body["metadata"]["name"], namespace="ada")
    assert tj["metadata"]["annotations"][render.GATES] == "dispatch.dev/start"
    plane.kubectl("delete", "trainjob", body["metadata"]["name"], "-n", "ada")


def test_a_sweeps_find_is_three_lists_however_many_jobs(
    plane: Plane, backend: KubeflowBackend
) -> None:
    jobs = [start(backend)[0] for _ in range(4)]
    calls: list[str] = []
    api = backend.api
    for name in ("list_trainjobs", "list_workloads", "list_pods", "get_trainjob"):
        real = getattr(api, name)

        def counted(*args: Any, _real: Any = real, _name: str = name) -> Any:
            calls.append(_name)
            return _real(*args)

        setattr(api, name, counted)
    one = backend.find_many(jobs[:1])
    assert calls == ["list_trainjobs", "list_workloads", "list_pods"]
    calls.clear()
    many = backend.find_many(jobs)
    assert calls == ["list_trainjobs", "list_workloads", "list_pods"]
    assert all(len(many[j].objects) == 1 for j in jobs)
    assert many[jobs[0]].objects == one[jobs[0]].objects


@pytest.mark.parametrize("owner", ["bob", "ada-other-job"])
def test_a_trainjob_there_under_the_attempts_name_is_never_adopted(
    plane: Plane, backend: KubeflowBackend, owner: str
) -> None:
    """Someone else made the object the attempt's name names first (another user, or another
    job of this user's): the create's 409 is answered with that object, which start refuses
    instead of taking it for the attempt's."""
    from dispatch.adapters.kubeflow import render

    req = new_request(backend)
    body = render.trainjob(req, backend.settings, backend.user)
    notes = body["metadata"]["annotations"]
    if owner == "bob":
        notes[render.ANNOTATION_USER] = "bob"
    else:
        notes[render.ANNOTATION_JOB] = "k-another-job"
    name = body["metadata"]["name"]
    plane.kubectl("create", "-f", "-", stdin=json.dumps(body))
    try:
        with pytest.raises(RejectedError, match="is not this user's|is another job's"):
            backend.start(req)
        tj = plane.get("trainjob", name, namespace="ada")
        # Left as it was: still gated, still its maker's.
        assert tj["metadata"]["annotations"] == notes
    finally:
        plane.kubectl("delete", "trainjob", name, "-n", "ada", "--ignore-not-found")
