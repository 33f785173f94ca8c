"""The conformance suite passes against the memory adapter (both shapes) and the live cluster
(through the local CLI, over ssh with ``SLURM_LIVE_TRANSPORT=ssh``, or through the real pyslurm
with ``SLURM_LIVE_TRANSPORT=pyslurm`` in a release chroot: ``tests/live_ssh.py``). The live
test's name ends in its transport, ``[cli-...]``, ``[pyslurm-...]``."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import live_ssh
import pytest
from live_cluster import cluster_env, wait_for

from dispatch.adapters.memory import MemoryBackend, Shape
from dispatch.conformance import CHECKS, ConformanceError, Harness
from dispatch.model.objects import ObjectRef
from dispatch.model.values import JobSpec

T = TypeVar("T")
NAMES = [c.__name__ for c in CHECKS]


def immediate(what: str, probe: Callable[[], T], ok: Callable[[T], bool]) -> T:
    value = probe()
    if not ok(value):
        raise AssertionError(f"{what}: not so at once; saw {value!r}")
    return value


def memory_harness(shape: Shape) -> Harness:
    backend = MemoryBackend(shape=shape, auto_run=True)

    def finish(ref: ObjectRef) -> None:
        backend.env().complete(ref)

    return Harness(
        backend=backend,
        new_job=lambda: "c" + secrets.token_hex(4),
        quick=JobSpec(command=("true",)),
        lasting=JobSpec(command=("sleep", "600")),
        wait=immediate,
        finish=finish,
    )


@pytest.mark.parametrize("shape", list(Shape))
@pytest.mark.parametrize("check", CHECKS, ids=NAMES)
def test_the_memory_adapter_conforms(shape: Shape, check: Callable[[Harness], None]) -> None:
    check(memory_harness(shape))


def test_a_backend_that_breaks_a_rule_is_caught() -> None:
    h = memory_harness(Shape.SLURM)

    class Ungated(MemoryBackend):
        def start(self, req: Any) -> ObjectRef:
            ref = super().start(req)
            self.objects[ref.id].gated = False
            return ref

    h.backend = Ungated(auto_run=False)
    with pytest.raises(ConformanceError, match="gated"):
        CHECKS[0](h)


def test_the_slurm_adapter_conforms_through_the_pyslurm_transport_on_a_standin(
    check: Callable[[Harness], None],
) -> None:
    """The pyslurm transport under the whole suite, fast: ``pyslurm_standin`` stands in for
    pyslurm 25.11 and its controller (the real one runs in the sid chroot's live stage), and its
    ``ProbeRunner`` for the CLI probes; the transport, the backend, the rows and the meaning
    table are the real ones."""
    check(pyslurm_harness())


def pyslurm_harness() -> Harness:
    from adapters.slurm import pyslurm_standin as standin

    from dispatch.adapters.slurm.backend import SlurmBackend
    from dispatch.adapters.slurm.pyslurm_run import PyslurmTransport
    from dispatch.adapters.slurm.settings import SlurmSettings

    controller = standin.use(standin.Controller(auto_run=True))
    backend = SlurmBackend(
        standin.ProbeRunner(),
        SlurmSettings(transport="pyslurm"),
        reader=PyslurmTransport(standin),
    )

    def finish(ref: ObjectRef) -> None:
        controller.complete(int(ref.id))

    return Harness(
        backend=backend,
        new_job=lambda: "c" + secrets.token_hex(4),
        quick=JobSpec(command=("true",)),
        lasting=JobSpec(command=("sleep", "600")),
        wait=immediate,
        finish=finish,
    )


test_the_slurm_adapter_conforms_through_the_pyslurm_transport_on_a_standin = (
    pytest.mark.parametrize("check", CHECKS, ids=NAMES)(
        test_the_slurm_adapter_conforms_through_the_pyslurm_transport_on_a_standin
    )
)


@pytest.fixture(scope="module")
def live_env() -> dict[str, str]:
    return cluster_env()


@pytest.fixture(params=[live_ssh.TRANSPORT])
def live(live_env: dict[str, str], tmp_path: Path) -> Iterator[Harness]:
    backend = live_ssh.live_backend((), live_env)
    out = dict(working_directory=str(tmp_path), output_path=str(tmp_path / "out-%j.txt"))
    h = Harness(
        backend=backend,
        new_job=lambda: "c" + secrets.token_hex(4),
        quick=JobSpec(command=("true",), **out),
        lasting=JobSpec(command=("sleep", "600"), **out),
        wait=wait_for,
    )
    yield h
    h.clean_up()


@pytest.mark.live
@pytest.mark.parametrize("check", CHECKS, ids=NAMES)
def test_the_slurm_adapter_conforms_on_the_live_cluster(
    live: Harness, check: Callable[[Harness], None]
) -> None:
    check(live)


@pytest.fixture(scope="module")
def kube_plane() -> Any:
    from live_kube import Plane, plane_env

    return Plane(plane_env())


@pytest.fixture
def kube(kube_plane: Any) -> Iterator[Harness]:
    """The kubeflow adapter on the local plane, as user ada in namespace ada; a started
    TrainJob's pods are ended by kwok when ``finish`` annotates them (the plane's stage)."""
    from live_kube import end_pod, running, trainjob_pods

    from dispatch.adapters.kubeflow import KubeflowBackend
    from dispatch.adapters.kubeflow.settings import load_settings

    settings = load_settings(
        {
            "kubeconfig": kube_plane.kubeconfig("ada"),
            "namespace": "ada",
            "queue": "main",
            "runtime": "dispatch-torch",
            "resources_per_node": {"cpu": "1", "memory": "1Gi"},
        }
    )
    backend = KubeflowBackend(settings)

    def finish(ref: ObjectRef) -> None:
        ns, name = ref.id.split("/")
        pods = wait_for(
            "the TrainJob's pods running", lambda: trainjob_pods(kube_plane, ns, name), running
        )
        for pod in pods:
            end_pod(kube_plane, ns, pod["metadata"]["name"], 0)

    h = Harness(
        backend=backend,
        new_job=lambda: "c" + secrets.token_hex(4),
        quick=JobSpec(command=("true",)),
        lasting=JobSpec(command=("sleep", "600")),
        wait=wait_for,
        finish=finish,
    )
    yield h
    h.clean_up()
    backend.close()


@pytest.mark.kube
@pytest.mark.parametrize("check", CHECKS, ids=NAMES)
def test_the_kubeflow_adapter_conforms_on_the_local_plane(
    kube: Harness, check: Callable[[Harness], None]
) -> None:
    check(kube)
