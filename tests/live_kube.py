"""What every test on the local Kubernetes plane shares: the plane's client environment, API
clients for the admin and the two users, and the ways a test drives a pod's life on kwok's fake
nodes (run, succeed, fail with an exit code, be OOM-killed, lose its node).

Importable from any test folder (``tests/conftest.py`` puts this folder on ``sys.path``). The
plane is started by ``containers/kubeplane/kubeplane up`` (idempotent); tests marked ``kube``
use it.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from live_cluster import wait_for

T = TypeVar("T")
REPO = Path(__file__).resolve().parents[1]
KUBEPLANE = REPO / "containers" / "kubeplane" / "kubeplane"
USERS = ("ada", "bob")
NODES = ("n1", "n2", "n3", "n4")
# The annotations the plane's kwok stage reads to end a running pod (kwok-stages.yaml).
EXIT_CODE = "kubeplane.test/exit-code"
EXIT_REASON = "kubeplane.test/reason"
# The plane's runtime whose Jobs and JobSet never retry a failed pod (kubeplane up).
RUNTIME = "dispatch-torch"
QUEUE = "main"


@dataclass(frozen=True)
class Plane:
    """The running plane: its kubeconfig files and its own kubectl."""

    env: dict[str, str]

    def kubeconfig(self, who: str = "admin") -> str:
        """The kubeconfig of ``who``: "admin" or one of the users."""
        if who == "admin":
            return self.env["KUBECONFIG"]
        return self.env[f"KUBEPLANE_KUBECONFIG_{who.upper()}"]

    def kubectl(
        self, *args: str, who: str = "admin", check: bool = True, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run the plane's kubectl as ``who``."""
        binary = f"{self.env['KUBEPLANE_BIN']}/kubeplane"
        cmd = [binary, "kubectl", f"--kubeconfig={self.kubeconfig(who)}"]
        return subprocess.run(
            [*cmd, *args], capture_output=True, text=True, timeout=120, check=check, input=stdin
        )

    def get(self, kind: str, name: str = "", namespace: str = "", who: str = "admin") -> Any:
        """One object (or, without ``name``, the list) as JSON."""
        ns = [f"--namespace={namespace}"] if namespace else []
        target = [kind, name] if name else [kind]
        return json.loads(self.kubectl("get", *target, *ns, "-o", "json", who=who).stdout)


def plane_env() -> dict[str, str]:
    """Start the plane (idempotent; builds once) and return the environment its clients need."""
    up = subprocess.run(
        [str(KUBEPLANE), "up"], capture_output=True, text=True, timeout=7200, check=False
    )
    if up.returncode != 0:
        raise RuntimeError(f"kubeplane up failed ({up.returncode}):\n{up.stdout}{up.stderr}")
    printed = subprocess.run(
        [str(KUBEPLANE), "env"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    env = {}
    for line in printed.splitlines():
        if not line.startswith("export "):
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        env[key.strip()] = value.strip().strip("'\"")
    if not Path(env.get("KUBECONFIG", "")).is_file():
        raise RuntimeError(f"kubeplane env named no kubeconfig: {printed!r}")
    return env


def pods_of(plane: Plane, namespace: str, selector: str) -> list[dict[str, Any]]:
    """The pods matching a label selector, as the admin sees them."""
    found = (
        plane.get("pods", namespace=namespace)
        if not selector
        else json.loads(
            plane.kubectl("get", "pods", "-n", namespace, "-l", selector, "-o", "json").stdout
        )
    )
    return list(found.get("items", []))


def trainjob_pods(plane: Plane, namespace: str, trainjob: str) -> list[dict[str, Any]]:
    """The pods of a TrainJob (JobSet labels its pods with the JobSet's name, the TrainJob's)."""
    return pods_of(plane, namespace, f"jobset.sigs.k8s.io/jobset-name={trainjob}")


def running(pods: list[dict[str, Any]]) -> bool:
    """Whether there are pods and every one runs on a node."""
    return bool(pods) and all(
        p["status"].get("phase") == "Running" and p["spec"].get("nodeName") for p in pods
    )


def end_pod(plane: Plane, namespace: str, pod: str, exit_code: int, reason: str = "") -> None:
    """End a running pod as a kubelet would: kwok's stage terminates every container with
    ``exit_code`` (and ``reason``, OOMKilled say), the pod Succeeded or Failed."""
    notes = [f"{EXIT_CODE}={exit_code}"] + ([f"{EXIT_REASON}={reason}"] if reason else [])
    plane.kubectl("annotate", "--overwrite", "pod", pod, "-n", namespace, *notes)


def lose_node(plane: Plane, node: str) -> None:
    """The node is gone: its Node object is deleted (the controller manager's pod garbage
    collector then fails and deletes its pods). ``kubeplane up`` creates it again."""
    plane.kubectl("delete", "node", node, "--wait=true")


def restore_nodes(plane: Plane) -> None:
    """Every fake node back, Ready (``kubeplane up`` puts back a deleted node)."""
    plane_env()
    wait_for(
        "the four nodes Ready",
        lambda: plane.get("nodes"),
        lambda nodes: {n["metadata"]["name"] for n in nodes["items"] if _ready(n)} >= set(NODES),
    )


def _ready(node: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in node.get("status", {}).get("conditions", [])
    )


def trainjob(
    name: str,
    namespace: str,
    *,
    nodes: int = 1,
    cpu: str = "1",
    priority: str = "low",
    gates: tuple[str, ...] = (),
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A TrainJob on the plane's queue, ``nodes`` pods of ``cpu`` each, at ``priority``."""
    annotations = {"kueue.x-k8s.io/admission-gated-by": ",".join(gates)} if gates else {}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "kueue.x-k8s.io/queue-name": QUEUE,
                "kueue.x-k8s.io/priority-class": priority,
                **(labels or {}),
            },
            "annotations": annotations,
        },
        "spec": {
            "runtimeRef": {"name": RUNTIME},
            "trainer": {
                "numNodes": nodes,
                "command": ["python", "train.py"],
                "resourcesPerNode": {"requests": {"cpu": cpu, "memory": "1Gi"}},
            },
        },
    }


def cleanup(plane: Plane, namespace: str, names: list[str]) -> None:
    """Delete the TrainJobs ``names`` and wait until their pods are gone."""
    for name in names:
        plane.kubectl(
            "delete", "trainjob", name, "-n", namespace, "--ignore-not-found", "--wait=true"
        )
    for name in names:

        def pods(name: str = name) -> list[dict[str, Any]]:
            return trainjob_pods(plane, namespace, name)

        wait_for(f"the pods of {name} gone", pods, lambda found: not found)


def names(prefix: str) -> Iterator[str]:
    """Fresh object names: ``prefix`` and a counter."""
    i = 0
    while True:
        i += 1
        yield f"{prefix}-{i}"


def until(what: str, probe: Callable[[], T], ok: Callable[[T], bool]) -> T:
    """``wait_for`` under this module's name, for tests that import only it."""
    return wait_for(what, probe, ok)
