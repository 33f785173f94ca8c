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

Pods of other kinds, those labelled ``pod_selector`` (the sweep's CronJob's, say), run too, with
what their volumes hold where the pod's spec mounts it: a Secret's key (``subPath``), the
service account's token, the cluster's CA and the namespace (the projected volume the API
server adds; the token asked of the API server for the pod, as a kubelet asks), and a
PersistentVolumeClaim's hostPath volume. The process gets a mount namespace of its own, with a
private ``/run`` (so files mounted under ``/run`` or ``/var/run`` are its alone) and the claim's
folder bound at the mount's path; it runs as the pod's ``runAsUser`` and ``runAsGroup``, and
``KUBERNETES_SERVICE_HOST`` and ``KUBERNETES_SERVICE_PORT`` name the API server on 127.0.0.1
(the ``kubernetes`` Service's address is not routed here). This needs root, as the plane does.

What it does not stand in for: the pod network. Pods reach one another through a Service's DNS
name, which does not resolve here; ``PET_MASTER_ADDR`` (torchrun's rendezvous, set by
Trainer's torch runtime to the first node's name) becomes 127.0.0.1 and ``PET_MASTER_PORT`` a
free port of this machine's, one per TrainJob.
"""

from __future__ import annotations

import base64
import json
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
from urllib.parse import urlsplit

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
    pod_selector: str = ""
    # Where the pods' programs are found (PATH): this run's, or one its users may run.
    bin_folder: Path = BIN
    pods: dict[str, Running] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    errors: list[BaseException] = field(default_factory=list)

    def __post_init__(self) -> None:
        api = config.new_client_from_config(config_file=self.kubeconfig)  # type: ignore[no-untyped-call]
        self.server = urlsplit(api.configuration.host)
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
        others: list[Any] = (
            self.core.list_namespaced_pod(self.namespace, label_selector=self.pod_selector).items
            if self.pod_selector
            else []
        )
        for pod in [*pods, *others]:
            owner = (pod.metadata.labels or {}).get(JOBSET_NAME)
            if owner is not None and owner not in names:
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

    def _start(self, pod: Any, trainjob: str | None) -> None:
        name = pod.metadata.name
        home = self.root / name
        work = home / "image"
        shutil.copytree(self.image, work)
        (home / "tmp").mkdir(mode=0o700)
        container = pod.spec.containers[0]
        env = {
            "PATH": f"{self.bin_folder}{os.pathsep}/usr/bin{os.pathsep}/bin",
            "HOME": str(home),
            "TMPDIR": str(home / "tmp"),
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": str(self.server.port),
            **self._env(pod, container.env or []),
        }
        if "PET_MASTER_ADDR" in env and trainjob is not None:
            env["PET_MASTER_ADDR"] = "127.0.0.1"
            env["PET_MASTER_PORT"] = str(self.ports.setdefault(trainjob, _free_port()))
        argv = [*(container.command or []), *(container.args or [])]
        if trainjob is None:
            argv = self._in_pod(pod, container, home, argv)
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

    def _in_pod(self, pod: Any, container: Any, home: Path, argv: list[str]) -> list[str]:
        """``argv`` run in a mount namespace of its own holding the pod's volumes, as the
        pod's user (see the module's note)."""
        files: dict[str, str] = {}
        binds: list[tuple[str, str]] = []
        volumes = {v.name: v for v in pod.spec.volumes or []}
        for mount in container.volume_mounts or []:
            volume = volumes[mount.name]
            target = mount.mount_path.replace("/var/run/", "/run/", 1)
            if volume.secret is not None:
                data = self._secret(volume.secret.secret_name)
                chosen = {mount.sub_path: data[mount.sub_path]} if mount.sub_path else data
                files.update(_placed(target, chosen, bool(mount.sub_path)))
            elif volume.projected is not None:
                files.update(_placed(target, self._access(pod), False))
            elif volume.persistent_volume_claim is not None:
                source = self._claim_path(volume.persistent_volume_claim.claim_name)
                binds.append((str(Path(source, mount.sub_path or "")), target))
            else:
                raise RuntimeError(f"pod {pod.metadata.name}: volume {mount.name} not stood in for")
        if not target_under_run(files):
            raise RuntimeError(f"pod {pod.metadata.name}: stand-in mounts files under /run only")
        security = pod.spec.security_context
        uid = security.run_as_user if security is not None else None
        gid = security.run_as_group if security is not None else None
        spec = home / "pod.json"
        spec.write_text(json.dumps({"files": files, "binds": binds, "uid": uid, "gid": gid}))
        spec.chmod(0o600)
        if uid is not None:
            for owned in (home, home / "tmp", home / "image"):
                os.chown(owned, uid, gid or 0)
        launch = [sys.executable, "-c", _LAUNCH, str(spec), *argv]
        return ["unshare", "--mount", "--propagation", "private", "--", *launch]

    def _access(self, pod: Any) -> dict[str, str]:
        """What the API server's projected volume gives a pod: a token of its service account
        bound to the pod, the cluster's CA, the namespace."""
        request = client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(
                audiences=[],
                expiration_seconds=3600,
                bound_object_ref=client.V1BoundObjectReference(
                    kind="Pod", api_version="v1", name=pod.metadata.name, uid=pod.metadata.uid
                ),
            )
        )
        reply: Any = self.core.create_namespaced_service_account_token(
            pod.spec.service_account_name, self.namespace, request
        )
        ca: Any = self.core.read_namespaced_config_map("kube-root-ca.crt", self.namespace)
        return {
            "token": reply.status.token,
            "ca.crt": ca.data["ca.crt"],
            "namespace": self.namespace,
        }

    def _claim_path(self, claim: str) -> str:
        """The host folder of a claim bound to a hostPath PersistentVolume."""
        pvc: Any = self.core.read_namespaced_persistent_volume_claim(claim, self.namespace)
        pv: Any = self.core.read_persistent_volume(pvc.spec.volume_name)
        if pv.spec.host_path is None:
            raise RuntimeError(f"claim {claim}: stand-in mounts hostPath volumes only")
        return str(pv.spec.host_path.path)

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


# Run in the pod's mount namespace as root: a private /run, the pod's files in it, the claims
# bound, then the pod's user, then the container's command.
_LAUNCH = """
import json, os, subprocess, sys
spec = json.load(open(sys.argv[1]))
subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=755", "pod-run", "/run"], check=True)
for path, text in spec["files"].items():
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o644)
for source, target in spec["binds"]:
    if source != target:
        subprocess.run(["mount", "--bind", source, target], check=True)
if spec["gid"] is not None:
    os.setgroups([])
    os.setgid(spec["gid"])
if spec["uid"] is not None:
    os.setuid(spec["uid"])
os.execvp(sys.argv[2], sys.argv[2:])
"""


def _placed(target: str, data: Mapping[str, str], single: bool) -> dict[str, str]:
    """The files a volume puts at ``target``: itself (``single``, a subPath) or its keys."""
    if single:
        return {target: next(iter(data.values()))}
    return {f"{target.rstrip('/')}/{key}": text for key, text in data.items()}


def target_under_run(files: Mapping[str, str]) -> bool:
    """Whether every file goes under /run, which the pod's namespace has of its own."""
    return all(path.startswith("/run/") for path in files)


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
    kubeconfig: str,
    namespace: str,
    selector: str,
    image: Path,
    root: Path,
    pod_selector: str = "",
    bin_folder: Path = BIN,
) -> Iterator[PodProcesses]:
    """Pods of the TrainJobs ``selector`` names, and pods labelled ``pod_selector``, run as
    processes while the block runs."""
    runner = PodProcesses(kubeconfig, namespace, selector, image, root, pod_selector, bin_folder)
    runner.thread.start()
    try:
        yield runner
    finally:
        runner.stop()
