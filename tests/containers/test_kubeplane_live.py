"""The local Kubernetes plane works part by part: a TrainJob created through the API becomes a
JobSet and pods once Kueue admits it, kwok runs the pods on its fake nodes and ends them as a
test says (exit code, OOMKilled, node gone), a workload of higher priority preempts a lower
one, and RBAC keeps each user in its own namespace."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from live_cluster import wait_for
from live_kube import (
    NODES,
    Plane,
    cleanup,
    end_pod,
    lose_node,
    plane_env,
    restore_nodes,
    running,
    trainjob,
    trainjob_pods,
)

pytestmark = pytest.mark.kube


@pytest.fixture(scope="module")
def plane() -> Plane:
    return Plane(plane_env())


@pytest.fixture
def made(plane: Plane) -> Iterator[list[tuple[str, str]]]:
    """The TrainJobs a test made, (namespace, name), deleted after it."""
    objects: list[tuple[str, str]] = []
    yield objects
    for namespace in {ns for ns, _ in objects}:
        cleanup(plane, namespace, [n for ns, n in objects if ns == namespace])


def create(plane: Plane, made: list[tuple[str, str]], body: dict[str, Any], who: str) -> str:
    """Create a TrainJob as user ``who`` (through the API, with the user's own certificate)."""
    plane.kubectl("create", "-f", "-", who=who, stdin=json.dumps(body))
    made.append((body["metadata"]["namespace"], body["metadata"]["name"]))
    return str(body["metadata"]["name"])


def workload_of(plane: Plane, namespace: str, name: str) -> dict[str, Any] | None:
    """Kueue's Workload for the TrainJob ``name``, if there is one yet."""
    for wl in plane.get("workloads.kueue.x-k8s.io", namespace=namespace)["items"]:
        owners = wl["metadata"].get("ownerReferences", [])
        if any(o["kind"] == "TrainJob" and o["name"] == name for o in owners):
            return dict(wl)
    return None


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    """The condition ``kind`` of an object's status ({} when absent)."""
    for c in (obj or {}).get("status", {}).get("conditions", []):
        if c["type"] == kind:
            return dict(c)
    return {}


def fresh(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


def test_a_trainjob_is_admitted_by_kueue_becomes_a_jobset_and_its_pods_run_and_succeed(
    plane: Plane, made: list[tuple[str, str]]
) -> None:
    name = create(plane, made, trainjob(fresh("run"), "ada", nodes=2), who="ada")
    wl = wait_for(
        "Kueue to admit the TrainJob's workload",
        lambda: workload_of(plane, "ada", name),
        lambda w: condition(w, "Admitted").get("status") == "True",
    )
    assert wl is not None and wl["status"]["admission"]["clusterQueue"] == "cluster"
    jobset = plane.get("jobsets.jobset.x-k8s.io", name, namespace="ada")
    assert jobset["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    pods = wait_for(
        "two pods running on kwok's nodes",
        lambda: trainjob_pods(plane, "ada", name),
        lambda p: len(p) == 2 and running(p),
    )
    assert {p["spec"]["nodeName"] for p in pods} <= set(NODES)
    for pod in pods:
        end_pod(plane, "ada", pod["metadata"]["name"], 0)
    done = wait_for(
        "the TrainJob complete",
        lambda: plane.get("trainjobs.trainer.kubeflow.org", name, namespace="ada"),
        lambda tj: condition(tj, "Complete").get("status") == "True",
    )
    assert condition(done, "Failed").get("status") != "True"


@pytest.mark.parametrize(("code", "reason"), [(3, ""), (137, "OOMKilled")])
def test_a_pod_ended_with_an_exit_code_fails_its_trainjob_with_that_code(
    plane: Plane, made: list[tuple[str, str]], code: int, reason: str
) -> None:
    name = create(plane, made, trainjob(fresh("fail"), "ada"), who="ada")
    (pod,) = wait_for(
        "the pod running",
        lambda: trainjob_pods(plane, "ada", name),
        lambda p: len(p) == 1 and running(p),
    )
    end_pod(plane, "ada", pod["metadata"]["name"], code, reason)
    ended = wait_for(
        "the pod failed",
        lambda: plane.get("pod", pod["metadata"]["name"], namespace="ada"),
        lambda p: p["status"]["phase"] == "Failed",
    )
    terminated = ended["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == code
    assert terminated["reason"] == (reason or "Error")
    wait_for(
        "the TrainJob failed",
        lambda: plane.get("trainjobs.trainer.kubeflow.org", name, namespace="ada"),
        lambda tj: condition(tj, "Failed").get("status") == "True",
    )


def test_a_higher_priority_workload_preempts_a_lower_one_through_kueue(
    plane: Plane, made: list[tuple[str, str]]
) -> None:
    # The low one takes every CPU of the ClusterQueue (four nodes of four), so the high one
    # can only be admitted by preempting it.
    low = create(plane, made, trainjob(fresh("low"), "ada", nodes=4, cpu="4"), who="ada")
    wait_for(
        "the low job's four pods running",
        lambda: trainjob_pods(plane, "ada", low),
        lambda p: len(p) == 4 and running(p),
    )
    high = create(plane, made, trainjob(fresh("high"), "bob", cpu="2", priority="high"), who="bob")
    evicted = wait_for(
        "the low job's workload evicted",
        lambda: workload_of(plane, "ada", low),
        lambda w: condition(w, "Evicted").get("status") == "True",
    )
    assert condition(evicted, "Evicted")["reason"] == "Preempted"
    wait_for(
        "the low job suspended",
        lambda: plane.get("trainjobs.trainer.kubeflow.org", low, namespace="ada"),
        lambda tj: tj["spec"].get("suspend") is True,
    )
    wait_for("the low job's pods gone", lambda: trainjob_pods(plane, "ada", low), lambda p: not p)
    wait_for(
        "the high job's pod running",
        lambda: trainjob_pods(plane, "bob", high),
        lambda p: len(p) == 1 and running(p),
    )


def test_a_pod_whose_node_is_gone_fails_as_a_disruption(
    plane: Plane, made: list[tuple[str, str]]
) -> None:
    name = create(plane, made, trainjob(fresh("node"), "ada"), who="ada")
    (pod,) = wait_for(
        "the pod running",
        lambda: trainjob_pods(plane, "ada", name),
        lambda p: len(p) == 1 and running(p),
    )
    try:
        lose_node(plane, pod["spec"]["nodeName"])
        # The pod garbage collector fails a pod bound to a node that no longer exists (after
        # its quarantine of 40 s) with a DisruptionTarget condition, then deletes it.
        wait_for(
            "the TrainJob failed",
            lambda: plane.get("trainjobs.trainer.kubeflow.org", name, namespace="ada"),
            lambda tj: condition(tj, "Failed").get("status") == "True",
        )
    finally:
        restore_nodes(plane)


def test_each_user_acts_in_its_own_namespace_only(
    plane: Plane, made: list[tuple[str, str]]
) -> None:
    own = plane.kubectl("get", "trainjobs", "-n", "ada", who="ada", check=False)
    assert own.returncode == 0, own.stderr
    for verb in (["get", "trainjobs", "-n", "bob"], ["get", "pods", "-n", "bob"]):
        refused = plane.kubectl(*verb, who="ada", check=False)
        assert refused.returncode != 0
        assert "forbidden" in refused.stderr.lower(), refused.stderr
    body = json.dumps(trainjob(fresh("intruder"), "bob"))
    refused = plane.kubectl("create", "-f", "-", who="ada", check=False, stdin=body)
    assert "forbidden" in refused.stderr.lower(), refused.stderr
    assert (
        plane.kubectl("get", "trainjobs", "-n", "bob", "-o", "name").stdout.count("intruder") == 0
    )
