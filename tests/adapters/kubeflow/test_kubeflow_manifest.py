"""A user's own TrainJob manifest as the TrainJob of an attempt: everything the user wrote
kept, dispatch's parts added, dispatch's own keys refused (no cluster)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dispatch.adapters.kubeflow import render
from dispatch.adapters.kubeflow.settings import load_settings
from dispatch.model.errors import InvalidError
from dispatch.model.objects import StartRequest
from dispatch.model.values import JobSpec, TrainJobManifest

SETTINGS = load_settings(
    {"namespace": "ada", "queue": "main", "runtime": "dispatch-torch", "priority_class": "low"}
)


def manifest(**meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "finetune", **meta},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {
                "numNodes": 2,
                "command": ["torchrun", "train.py"],
                "env": [
                    {"name": "LR", "value": "3e-4"},
                    {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
                ],
                "resourcesPerNode": {"requests": {"cpu": "4"}},
            },
            "podTemplateOverrides": [{"targetJobs": [{"name": "node"}]}],
        },
    }


def made(body: dict[str, Any], submission: int = 2, attempt: int = 1) -> dict[str, Any]:
    spec = JobSpec(
        command=("torchrun", "train.py"),
        extensions=(TrainJobManifest(source="finetune.yaml", manifest=json.dumps(body)),),
    )
    req = StartRequest(
        job="0a1b2c3d4e5f6071",
        submission=submission,
        attempt=attempt,
        lineage_submission=submission,
        spec=spec,
    )
    return render.trainjob(req, SETTINGS, "ada")


def test_the_users_manifest_is_kept_and_dispatchs_parts_are_added() -> None:
    body = manifest(
        labels={"team": "vision", "kueue.x-k8s.io/priority-class": "high"},
        annotations={"note": "mine", "kueue.x-k8s.io/admission-gated-by": "example.com/admin"},
    )
    tj = made(body)
    meta = tj["metadata"]
    assert meta["name"] == "dj-0a1b2c3d4e5f6071-2-1"
    assert meta["namespace"] == "ada"
    assert meta["labels"] == {
        "team": "vision",
        # The manifest's priority wins over the config's; the config's queue fills in.
        "kueue.x-k8s.io/priority-class": "high",
        "kueue.x-k8s.io/queue-name": "main",
        "dispatch.dev/job": "0a1b2c3d4e5f6071",
        "dispatch.dev/submission": "2",
        "dispatch.dev/attempt": "1",
    }
    assert meta["annotations"] == {
        "note": "mine",
        # The user's own admission gate stays, dispatch's is added after it.
        "kueue.x-k8s.io/admission-gated-by": "example.com/admin,dispatch.dev/start",
        "dispatch.dev/job": "0a1b2c3d4e5f6071",
        "dispatch.dev/user": "ada",
    }
    spec = tj["spec"]
    # The user's runtime and every field of theirs, untouched; DISPATCH_* after their own.
    assert spec["runtimeRef"] == {"name": "torch-distributed"}
    assert spec["podTemplateOverrides"] == body["spec"]["podTemplateOverrides"]
    trainer = spec["trainer"]
    assert trainer["env"][:2] == body["spec"]["trainer"]["env"]
    assert {e["name"]: e["value"] for e in trainer["env"][2:]} == {
        "DISPATCH_JOB": "0a1b2c3d4e5f6071",
        "DISPATCH_SUBMISSION": "2",
        "DISPATCH_ATTEMPT": "1",
        "DISPATCH_RESTARTS": "0",
        "DISPATCH_EPOCH": "2000000",
    }
    rest = {k: v for k, v in trainer.items() if k != "env"}
    assert rest == {k: v for k, v in body["spec"]["trainer"].items() if k != "env"}


def test_each_submission_is_a_new_trainjob_with_its_own_epoch() -> None:
    first, second = made(manifest(), 1, 1), made(manifest(), 2, 1)
    assert first["metadata"]["name"] != second["metadata"]["name"]
    epochs = [
        {e["name"]: e.get("value") for e in tj["spec"]["trainer"]["env"]}["DISPATCH_EPOCH"]
        for tj in (first, second)
    ]
    assert epochs == ["1000000", "2000000"]


def test_what_the_api_server_set_on_a_saved_object_is_dropped() -> None:
    body = manifest(uid="u-1", resourceVersion="42", creationTimestamp="2026-01-01T00:00:00Z")
    body["status"] = {"conditions": []}
    tj = made(body)
    assert not {"uid", "resourceVersion", "creationTimestamp"} & set(tj["metadata"])
    assert "status" not in tj


def test_a_manifest_without_a_runtime_gets_the_configs() -> None:
    body = manifest()
    del body["spec"]["runtimeRef"]
    assert made(body)["spec"]["runtimeRef"]["name"] == "dispatch-torch"


@pytest.mark.parametrize(
    "change, named",
    [
        (lambda b: b["metadata"].update(namespace="bob"), "metadata.namespace: 'bob'"),
        (
            lambda b: b["metadata"].update(labels={"dispatch.dev/submission": "9"}),
            "metadata.labels.dispatch.dev/submission",
        ),
        (
            lambda b: b["metadata"].update(annotations={"dispatch.dev/user": "ada"}),
            "metadata.annotations.dispatch.dev/user",
        ),
        (
            lambda b: b["spec"]["trainer"]["env"].append({"name": "DISPATCH_EPOCH", "value": "9"}),
            "spec.trainer.env: DISPATCH_EPOCH",
        ),
        (lambda b: b["metadata"].update(labels={"team": 3}), "metadata.labels.team"),
        (lambda b: b["spec"].update(trainer=[]), "spec.trainer"),
    ],
)
def test_a_manifest_setting_what_dispatch_sets_is_refused_naming_the_field(
    change: Any, named: str
) -> None:
    body = manifest()
    change(body)
    with pytest.raises(InvalidError) as err:
        made(body)
    assert named in err.value.message


def test_a_manifest_that_is_no_trainjob_is_no_extension() -> None:
    with pytest.raises(ValueError, match="not a TrainJob"):
        TrainJobManifest(source="x", manifest=json.dumps({"kind": "Job"}))
