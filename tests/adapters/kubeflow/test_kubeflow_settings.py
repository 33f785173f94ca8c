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
