"""A stand-in for the kubelet of the plane's fake nodes: it runs the pods of chosen TrainJobs as
processes on this machine.

kwok's nodes run no containers: a pod "runs" once scheduled, and ends when a test says so. To
run a user's real training program (the DDP job of ``job_templates``), this stand-in does for
the pods of the TrainJobs it is given what a kubelet does with a container, as far as a test
needs: it starts the container's command and arguments as a process, in a folder of the pod's
own standing in for the image's working folder (a copy of ``image``), with the environment the
pod's spec gives (literal values, ``fieldRef`` to the pod's metadata, ``secretKeyRef`` read from
the Secret), ``PATH`` on this Python's ``bin`` and a ``TMPDIR`` and ``HOME`` of the pod's own.
Its output is kept as a kubelet keeps a container's, in the container runtime's log format,
and served through the API server (``kubectl logs``, pods/log) by kwok's server, which a
``Logs`` object of kwok's points at it. A process that exits ends its pod with its exit code
(the plane's kwok stage, ``end_pod``); a
pod that is deleted or goes (Kueue's eviction, say) has its process sent ``SIGTERM``, and
``SIGKILL`` after the grace period, as a kubelet stops a container.

What it does not stand in for: the pod network. Pods reach one another through a Service's DNS
name, which does not resolve here; ``PET_MASTER_ADDR`` (torchrun's rendezvous, set by
Trainer's torch runtime to the first node's name) becomes 127.0.0.1 and ``PET_MASTER_PORT`` a
free port of this machine's, one per TrainJob.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client, config

JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
EXIT_CODE = "kubeplane.test/exit-code"
BIN = Path(sys.executable).parent
GRACE = 30.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Running:
    """One pod's process."""

    pod: str
    process: subprocess.Popen[bytes]
    log: Path
    env: dict[str, str]
    copier: threading.Thread
    termed_at: float | None = None
    reported: bool = False


@dataclass
class PodProcesses:
    """Runs the pods of the TrainJobs labelled ``selector`` in ``namespace`` as processes."""

    kubeconfig: str
    namespace: str
    selector: str
    image: Path
    root: Path
    pods: dict[str, Running] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    errors: list[BaseException] = field(default_factory=list)

    def __post_init__(self) -> None:
        api = config.new_client_from_config(config_file=self.kubeconfig)  # type: ignore[no-untyped-call]
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="pod-processes", daemon=True)

    def log_of(self, pod: str) -> str:
        """What the pod's process wrote so far."""
        run = self.pods.get(pod)
        return run.log.read_text(errors="replace") if run else ""

    def logs(self) -> str:
        """Every pod's output, each under its name."""
        return "\n".join(f"==> {p} <==\n{self.log_of(p)}" for p in sorted(self.pods))

    def env_of(self, pod: str) -> dict[str, str]:
        """The environment the pod's process was started with."""
        return dict(self.pods[pod].env)

    def _loop(self) -> None:
        while not self.stopped.is_set():
            try:
                self._tick()
            except Exception as err:  # noqa: BLE001 - reported by the test through ``errors``
                self.errors.append(err)
            self.stopped.wait(0.5)

    def _trainjobs(self) -> set[str]:
        found: Any = self.custom.list_namespaced_custom_object(
            "trainer.kubeflow.org",
            "v1alpha1",
            self.namespace,
            "trainjobs",
            label_selector=self.selector,
        )
        return {t["metadata"]["name"] for t in found.get("items", [])}

    def _tick(self) -> None:
        names = self._trainjobs()
        pods: list[Any] = self.core.list_namespaced_pod(
            self.namespace, label_selector=JOBSET_NAME
        ).items
        live = {}
        for pod in pods:
            owner = (pod.metadata.labels or {}).get(JOBSET_NAME)
            if owner not in names:
                continue
            live[pod.metadata.name] = pod
            if (
                pod.metadata.name not in self.pods
                and pod.status.phase == "Running"
                and pod.metadata.deletion_timestamp is None
            ):
                self._start(pod, owner)
        for name, run in self.pods.items():
            self._watch(name, run, live.get(name))

    def _start(self, pod: Any, trainjob: str) -> None:
        name = pod.metadata.name
        home = self.root / name
        work = home / "image"
        shutil.copytree(self.image, work)
        (home / "tmp").mkdir(mode=0o700)
        container = pod.spec.containers[0]
        env = {
            "PATH": f"{BIN}{os.pathsep}/usr/bin{os.pathsep}/bin",
            "HOME": str(home),
            "TMPDIR": str(home / "tmp"),
            **self._env(pod, container.env or []),
        }
        if "PET_MASTER_ADDR" in env:
            env["PET_MASTER_ADDR"] = "127.0.0.1"
            env["PET_MASTER_PORT"] = str(self.ports.setdefault(trainjob, _free_port()))
        argv = [*(container.command or []), *(container.args or [])]
        log = home / "output.log"
        process = subprocess.Popen(
            argv,
            cwd=container.working_dir or work,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        kept = home / "container.log"
        copier = threading.Thread(target=_keep, args=(process, log, kept), daemon=True)
        copier.start()
        self.pods[name] = Running(pod=name, process=process, log=log, env=env, copier=copier)
        # What a kubelet keeps of the container's output, kwok's server serves as its log.
        self.custom.create_namespaced_custom_object(
            "kwok.x-k8s.io",
            "v1alpha1",
            self.namespace,
            "logs",
            {
                "apiVersion": "kwok.x-k8s.io/v1alpha1",
                "kind": "Logs",
                "metadata": {"name": name, "namespace": self.namespace},
                "spec": {
                    "logs": [
                        {"containers": [container.name], "logsFile": str(kept), "follow": True}
                    ]
                },
            },
        )

    def _env(self, pod: Any, entries: list[Any]) -> dict[str, str]:
        env: dict[str, str] = {}
        for e in entries:
            if e.value_from is None:
                env[e.name] = e.value or ""
            elif e.value_from.field_ref is not None:
                env[e.name] = _field(pod, e.value_from.field_ref.field_path)
            elif e.value_from.secret_key_ref is not None:
                ref = e.value_from.secret_key_ref
                got = self._secret(ref.name).get(ref.key)
                if got is not None:
                    env[e.name] = got
                elif not ref.optional:
                    raise RuntimeError(
                        f"pod {pod.metadata.name}: secret {ref.name} lacks {ref.key}"
                    )
        return env

    def _secret(self, name: str) -> Mapping[str, str]:
        data = self.core.read_namespaced_secret(name, self.namespace).data or {}
        return {k: base64.b64decode(v).decode() for k, v in data.items()}

    def _watch(self, name: str, run: Running, pod: Any) -> None:
        code = run.process.poll()
        if code is not None:
            run.copier.join(30)  # all it wrote is in its log before its pod ends
            if not run.reported and pod is not None and pod.metadata.deletion_timestamp is None:
                self.core.patch_namespaced_pod(
                    name,
                    self.namespace,
                    {"metadata": {"annotations": {EXIT_CODE: str(code if code >= 0 else 137)}}},
                )
            run.reported = True
            return
        if pod is None or pod.metadata.deletion_timestamp is not None:
            if run.termed_at is None:
                run.termed_at = time.monotonic()
                run.process.send_signal(signal.SIGTERM)
            elif time.monotonic() - run.termed_at > GRACE:
                os.killpg(run.process.pid, signal.SIGKILL)

    def stop(self) -> None:
        """Stop watching; every process still running is killed, and the Logs objects go."""
        self.stopped.set()
        self.thread.join(30)
        for name, run in self.pods.items():
            if run.process.poll() is None:
                os.killpg(run.process.pid, signal.SIGKILL)
                run.process.wait(30)
            run.copier.join(30)
            if run.process.stdout is not None:
                run.process.stdout.close()
            self.custom.delete_namespaced_custom_object(
                "kwok.x-k8s.io", "v1alpha1", self.namespace, "logs", name
            )


def _keep(process: subprocess.Popen[bytes], log: Path, kept: Path) -> None:
    """Copy the process's output as it comes: as written to ``log``, and in the container
    runtime's log format (a time, the stream, F for a whole line) to ``kept``."""
    assert process.stdout is not None
    with log.open("wb") as raw, kept.open("wb") as cri:
        for line in process.stdout:
            raw.write(line)
            raw.flush()
            stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ").encode()
            cri.write(stamp + b" stdout F " + line.rstrip(b"\n") + b"\n")
            cri.flush()


def _field(pod: Any, path: str) -> str:
    """A ``fieldRef``'s value: the pod's name, namespace, node, or one of its labels or
    annotations."""
    meta = pod.metadata
    simple = {
        "metadata.name": meta.name,
        "metadata.namespace": meta.namespace,
        "metadata.uid": meta.uid,
        "spec.nodeName": pod.spec.node_name,
        "status.podIP": "127.0.0.1",
    }
    if path in simple:
        return str(simple[path] or "")
    for prefix, values in (
        ("metadata.annotations", meta.annotations),
        ("metadata.labels", meta.labels),
    ):
        if path.startswith(prefix + "['") and path.endswith("']"):
            return str((values or {}).get(path[len(prefix) + 2 : -2], ""))
    raise RuntimeError(f"pod {meta.name}: fieldRef {path} is not stood in for")


@contextmanager
def pod_processes(
    kubeconfig: str, namespace: str, selector: str, image: Path, root: Path
) -> Iterator[PodProcesses]:
    """Pods of the TrainJobs ``selector`` names run as processes while the block runs."""
    runner = PodProcesses(kubeconfig, namespace, selector, image, root)
    runner.thread.start()
    try:
        yield runner
    finally:
        runner.stop()
