"""The kubeflow adapter's settings, as read from a config file: validated, unknown keys refused."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dispatch.model.errors import InvalidError

# A Kubernetes name of one DNS label (RFC 1123), as namespaces and queues are named.
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
# Kueue's admission gates are domain-prefixed paths (``example.com/name``).
GATE = re.compile(
    r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)


@dataclass(frozen=True)
class KubeflowSettings:
    """How to reach the cluster and what every TrainJob of dispatch's looks like there.

    ``kubeconfig``: the kubeconfig file (empty: ``$KUBECONFIG``, ``~/.kube/config``, or the
    service account of the pod this runs in), ``context``: its context (empty: the current one).
    ``namespace``: where dispatch creates and finds its TrainJobs; ``namespaces`` adds more that
    ``find`` searches (objects made under another setting). ``queue``: the Kueue LocalQueue of
    every TrainJob (required: Kueue's admission is the gate). ``priority_class``: a Kueue
    WorkloadPriorityClass (empty: the queue's default). ``runtime``: the (Cluster)TrainingRuntime
    the TrainJobs use; ``runtime_kind``: ``ClusterTrainingRuntime`` or ``TrainingRuntime``.
    ``image``: the image when the job names none (empty: the runtime's). ``resources_per_node``:
    the requests of every node (``{"cpu": "4", "memory": "16Gi"}``), which Kueue counts against
    the queue's quota. ``gate``: dispatch's own entry in ``kueue.x-k8s.io/admission-gated-by``.
    ``timeout``: seconds per API call. ``owner``: whose TrainJobs these are, when not the
    client's own (empty: the user the API server knows this client as): set only in the config
    of a sweep that runs in the cluster as a service account on a user's behalf (``dispatch
    supervise install --kubernetes`` sets it), and accepted only from a service account of
    ``namespace``.
    """

    kubeconfig: str = ""
    context: str = ""
    namespace: str = "default"
    namespaces: tuple[str, ...] = ()
    queue: str = ""
    priority_class: str = ""
    runtime: str = "torch-distributed"
    runtime_kind: str = "ClusterTrainingRuntime"
    image: str = ""
    resources_per_node: Mapping[str, str] = field(default_factory=dict)
    gate: str = "dispatch.dev/start"
    timeout: float = 30.0
    owner: str = ""

    @property
    def searched(self) -> tuple[str, ...]:
        """Every namespace ``find`` searches, the creating one first."""
        return (self.namespace, *(n for n in self.namespaces if n != self.namespace))


def _text(key: str, value: Any, pattern: re.Pattern[str] | None = None, empty: bool = True) -> str:
    if not isinstance(value, str) or (not value and not empty):
        raise InvalidError(f"kubeflow setting {key!r} = {value!r}: expected text")
    if value and pattern is not None and not pattern.fullmatch(value):
        raise InvalidError(f"kubeflow setting {key!r} = {value!r}: not a valid name here")
    return value


def _names(key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = value.split()
    if not isinstance(value, list | tuple):
        raise InvalidError(f"kubeflow setting {key!r} = {value!r}: expected a list of names")
    return tuple(_text(key, v, DNS_LABEL, empty=False) for v in value)


def _resources(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str | int) and not isinstance(v, bool)
        for k, v in value.items()
    ):
        raise InvalidError(
            f"kubeflow setting 'resources_per_node' = {value!r}: expected a table of quantities"
        )
    return {k: str(v) for k, v in value.items()}


def load_settings(raw: Mapping[str, Any]) -> KubeflowSettings:
    """Settings from a config mapping; ``InvalidError`` names any unknown key or bad value."""
    known = KubeflowSettings.__dataclass_fields__
    for key in raw:
        if key not in known:
            raise InvalidError(
                f"kubeflow setting {key!r} is not known; known settings: {', '.join(sorted(known))}"
            )
    timeout = raw.get("timeout", KubeflowSettings.timeout)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise InvalidError(f"kubeflow setting 'timeout' = {timeout!r}: expected positive seconds")
    if not raw.get("queue"):
        raise InvalidError(
            "kubeflow setting 'queue' is required: the Kueue LocalQueue whose admission is "
            "dispatch's gate"
        )
    kind = raw.get("runtime_kind", KubeflowSettings.runtime_kind)
    if kind not in ("ClusterTrainingRuntime", "TrainingRuntime"):
        raise InvalidError(
            f"kubeflow setting 'runtime_kind' = {kind!r}: expected ClusterTrainingRuntime or "
            "TrainingRuntime"
        )
    return KubeflowSettings(
        kubeconfig=_text("kubeconfig", raw.get("kubeconfig", "")),
        context=_text("context", raw.get("context", "")),
        namespace=_text("namespace", raw.get("namespace", "default"), DNS_LABEL, empty=False),
        namespaces=_names("namespaces", raw.get("namespaces", ())),
        queue=_text("queue", raw.get("queue", ""), DNS_LABEL, empty=False),
        priority_class=_text("priority_class", raw.get("priority_class", "")),
        runtime=_text("runtime", raw.get("runtime", KubeflowSettings.runtime), empty=False),
        runtime_kind=kind,
        image=_text("image", raw.get("image", "")),
        resources_per_node=_resources(raw.get("resources_per_node", {})),
        gate=_text("gate", raw.get("gate", KubeflowSettings.gate), GATE, empty=False),
        timeout=float(timeout),
        owner=_text("owner", raw.get("owner", "")),
    )
