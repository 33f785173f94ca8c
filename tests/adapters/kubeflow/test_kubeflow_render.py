"""The TrainJob dispatch creates for an attempt, and the patches it sends (no cluster)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dispatch.adapters.kubeflow import render
from dispatch.adapters.kubeflow.settings import load_settings
from dispatch.model.errors import InvalidError
from dispatch.model.objects import StartRequest
from dispatch.model.values import JobSpec

SETTINGS = load_settings(
    {
        "namespace": "ada",
        "queue": "main",
        "priority_class": "low",
        "runtime": "dispatch-torch",
        "resources_per_node": {"cpu": "2"},
    }
)


def request(job: str = "train-1", **spec: object) -> StartRequest:
    body = JobSpec(command=("python", "train.py"), nodes=2, **spec)
    return StartRequest(job=job, submission=3, attempt=2, lineage_submission=5, spec=body)


def test_the_trainjob_is_gated_named_labelled_and_carries_its_numbers() -> None:
    tj = render.trainjob(request(), SETTINGS, "ada")
    meta = tj["metadata"]
    assert meta["name"] == "dj-train-1-3-2"
    assert meta["namespace"] == "ada"
    assert meta["labels"] == {
        "dispatch.dev/job": "train-1",
        "dispatch.dev/submission": "3",
        "dispatch.dev/attempt": "2",
        "kueue.x-k8s.io/queue-name": "main",
        "kueue.x-k8s.io/priority-class": "low",
    }
    assert meta["annotations"] == {
        "dispatch.dev/job": "train-1",
        "dispatch.dev/user": "ada",
        "kueue.x-k8s.io/admission-gated-by": "dispatch.dev/start",
    }
    assert tj["spec"]["runtimeRef"]["name"] == "dispatch-torch"
    assert tj["spec"]["trainer"]["numNodes"] == 2
    assert tj["spec"]["trainer"]["resourcesPerNode"] == {"requests": {"cpu": "2"}}


def test_every_pod_gets_the_epoch_of_its_lineage_submission() -> None:
    env = {
        e["name"]: e["value"]
        for e in render.trainjob(request(env={"SEED": "7"}), SETTINGS, "ada")["spec"]["trainer"][
            "env"
        ]
    }
    assert env == {
        "SEED": "7",
        "DISPATCH_JOB": "train-1",
        "DISPATCH_SUBMISSION": "5",
        "DISPATCH_ATTEMPT": "2",
        "DISPATCH_RESTARTS": "0",
        "DISPATCH_EPOCH": "5000000",
    }


def test_a_time_limit_becomes_active_deadline_seconds_and_gpus_requests_and_limits() -> None:
    tj = render.trainjob(request(time_limit=timedelta(minutes=2), gpus_per_node=4), SETTINGS, "a")
    assert tj["spec"]["activeDeadlineSeconds"] == 120
    assert tj["spec"]["trainer"]["resourcesPerNode"] == {
        "requests": {"cpu": "2", "nvidia.com/gpu": "4"},
        "limits": {"nvidia.com/gpu": "4"},
    }


@pytest.mark.parametrize("job", ["Train_Job.1", "x" * 80, "über"])
def test_a_job_id_that_is_no_kubernetes_name_gets_a_short_hashed_one(job: str) -> None:
    name = render.trainjob_name(job, 1, 1)
    assert len(name) <= render.NAME_LIMIT
    assert render.trainjob_name(job + "!", 1, 1) != name
    label = render.job_label(job)
    assert render.LABEL_VALUE.fullmatch(label) and len(label) <= 63


def test_options_a_trainjob_cannot_carry_are_refused_not_dropped() -> None:
    with pytest.raises(InvalidError, match="working_directory"):
        render.trainjob(request(working_directory="/scratch"), SETTINGS, "ada")
    with pytest.raises(InvalidError, match="output_path"):
        render.trainjob(request(output_path="/out"), SETTINGS, "ada")


def test_open_removes_only_dispatchs_gate_at_the_version_read() -> None:
    both = {render.GATES: "example.com/admin-held,dispatch.dev/start"}
    assert render.open_patch(both, "dispatch.dev/start", "41") == {
        "metadata": {
            "resourceVersion": "41",
            "annotations": {render.GATES: "example.com/admin-held"},
        }
    }
    ours = {render.GATES: "dispatch.dev/start"}
    assert render.open_patch(ours, "dispatch.dev/start", "7")["metadata"]["annotations"] == {
        render.GATES: None
    }
