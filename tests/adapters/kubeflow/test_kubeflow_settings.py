"""The kubeflow adapter's settings: known keys only, each value checked."""

from __future__ import annotations

from typing import Any

import pytest

from dispatch.adapters.kubeflow import KubeflowBackend, factory
from dispatch.adapters.kubeflow.settings import load_settings
from dispatch.model.errors import InvalidError


def test_the_defaults_and_the_namespaces_searched() -> None:
    s = load_settings({"queue": "main", "namespace": "ada", "namespaces": ["old", "ada"]})
    assert s.searched == ("ada", "old")
    assert s.gate == "dispatch.dev/start"


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ({"queue": "main", "colour": "red"}, "not known"),
        ({"queue": "Main_Queue"}, "'queue'"),
        ({"queue": "main", "namespace": ""}, "'namespace'"),
        ({"queue": "main", "gate": "admin-held"}, "'gate'"),
        ({"queue": "main", "timeout": 0}, "'timeout'"),
        ({"queue": "main", "timeout": True}, "'timeout'"),
        ({"queue": "main", "runtime_kind": "Runtime"}, "'runtime_kind'"),
        ({"queue": "main", "resources_per_node": {"cpu": True}}, "resources_per_node"),
        ({"queue": "main", "namespaces": "a B"}, "'namespaces'"),
    ],
)
def test_a_bad_setting_is_refused_naming_it(raw: dict[str, Any], words: str) -> None:
    with pytest.raises(InvalidError, match=words):
        load_settings(raw)


def test_a_backend_without_a_queue_is_refused() -> None:
    with pytest.raises(InvalidError, match="'queue' is required"):
        factory({})
    assert isinstance(factory({"queue": "main"}), KubeflowBackend)


def test_the_adapter_is_registered_as_kubeflow() -> None:
    from importlib.metadata import entry_points

    import dispatch
    from dispatch.cluster import new_backend

    assert "kubeflow" in {ep.name for ep in entry_points(group="dispatch.adapters")}
    assert "kubeflow" in dispatch.adapter_names()
    assert isinstance(new_backend("kubeflow", {"queue": "main"}), KubeflowBackend)


@pytest.mark.parametrize(
    ("status", "message", "effect", "kind"),
    [
        (404, 'trainjobs.trainer.kubeflow.org "x" not found', False, "NotFoundError"),
        (403, 'User "ada" cannot list resource', False, "UnauthorizedError"),
        (403, 'admission webhook "vtrainjob.kb.io" denied the request: bad', True, "InvalidError"),
        (409, "the object has been modified", True, "Changed"),
        (422, "spec.trainer.numNodes: Invalid value", True, "InvalidError"),
        (503, "etcd is down", True, "OutcomeUnknownError"),
        (503, "etcd is down", False, "UnreachableError"),
    ],
)
def test_the_api_servers_refusals_become_dispatch_errors_in_one_place(
    status: int, message: str, effect: bool, kind: str
) -> None:
    import json

    from kubernetes.client.exceptions import ApiException

    from dispatch.adapters.kubeflow.run import _translate

    err = ApiException(status=status, reason="x")
    err.body = json.dumps({"message": message})
    got = _translate(err, "call", effect)
    assert type(got).__name__ == kind
    assert message in str(got)


def test_a_lost_connection_is_unreachable_and_a_timed_out_effect_unknown() -> None:
    from urllib3.exceptions import NewConnectionError, ReadTimeoutError

    from dispatch.adapters.kubeflow.run import _translate
    from dispatch.model.errors import OutcomeUnknownError, UnreachableError

    refused = NewConnectionError(None, "connection refused")  # type: ignore[arg-type]
    assert isinstance(_translate(refused, "list", False), UnreachableError)
    late = ReadTimeoutError(None, "/apis", "read timed out")  # type: ignore[arg-type]
    assert isinstance(_translate(late, "create", True), OutcomeUnknownError)
    assert isinstance(_translate(late, "list", False), UnreachableError)


def test_the_memory_kubeflow_shape_declares_what_the_adapter_declares() -> None:
    """Where the memory adapter's Kubeflow shape does not implement more than a Kubeflow
    cluster (holds, kept output, cessation evidence: every optional protocol, on purpose), it
    declares what the kubeflow adapter declares."""
    from dispatch.adapters.kubeflow.capabilities import capabilities, gate_support
    from dispatch.adapters.memory import MemoryBackend, Shape
    from dispatch.model.enums import Capability

    live = capabilities(gate_support("kueue.x-k8s.io/admission-gated-by: Invalid value"))
    memory = MemoryBackend(shape=Shape.KUBEFLOW).capabilities()
    more = {
        Capability.HOLD,
        Capability.OUTPUT_RETAINED,
        Capability.CESSATION_SIGNAL,
    }
    for cap in Capability:
        if cap not in more:
            assert memory[cap].state is live[cap].state, cap
