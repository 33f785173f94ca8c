"""The kubeflow adapter: Kubeflow Trainer's TrainJobs under Kueue, read as typed causes.

``factory(settings)`` is the entry point registered as ``kubeflow`` in ``dispatch.adapters``.
It needs the official ``kubernetes`` client (``pip install 'dispatch[kubeflow]'``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dispatch.adapters.kubeflow.backend import KubeflowBackend
from dispatch.adapters.kubeflow.settings import KubeflowSettings, load_settings

__all__ = ["KubeflowBackend", "KubeflowSettings", "factory"]


def factory(settings: Mapping[str, Any]) -> KubeflowBackend:
    """A KubeflowBackend from config-file settings; unknown keys are refused with InvalidError."""
    return KubeflowBackend(load_settings(settings))
