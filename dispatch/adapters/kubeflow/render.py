"""Kubernetes objects out: the TrainJob dispatch creates for one launch attempt, and the patches
it sends. Pure functions, no I/O.

A TrainJob of dispatch's carries the job (label ``dispatch.dev/job``, exact id in the
annotation of the same name), the submission and attempt (labels), the user that created it
(annotation ``dispatch.dev/user``), Kueue's queue and priority (labels), and dispatch's gate:
its entry in Kueue's ``kueue.x-k8s.io/admission-gated-by``, so Kueue admits nothing until
dispatch removes that entry. Every pod gets ``DISPATCH_JOB``, ``DISPATCH_SUBMISSION``,
``DISPATCH_ATTEMPT``, ``DISPATCH_RESTARTS`` and ``DISPATCH_EPOCH`` (a TrainJob's execution is
never rerun inside it, so the restart count is 0).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from dispatch.adapters.kubeflow.settings import KubeflowSettings
from dispatch.model.errors import InvalidError
from dispatch.model.objects import StartRequest, epoch, object_name
from dispatch.model.values import RESERVED_ENV, SHELL_NAME, JobID

GROUP = "trainer.kubeflow.org"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
LABEL_JOB = "dispatch.dev/job"
LABEL_SUBMISSION = "dispatch.dev/submission"
LABEL_ATTEMPT = "dispatch.dev/attempt"
ANNOTATION_JOB = "dispatch.dev/job"
ANNOTATION_USER = "dispatch.dev/user"
ANNOTATION_STOP = "dispatch.dev/stop-reason"
GATES = "kueue.x-k8s.io/admission-gated-by"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
# Kubernetes label values: at most 63 characters, alphanumeric at both ends.
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
# A TrainJob's name is a DNS label of at most 63 characters; its JobSet and pods add to it, so
# dispatch keeps its own names shorter.
NAME_LIMIT = 50
GPU = "nvidia.com/gpu"


def job_label(job: JobID) -> str:
    """The value of ``dispatch.dev/job`` for ``job``: the id itself when it is a label value,
    else ``h-`` and a hash of it (the annotation keeps the exact id)."""
    if LABEL_VALUE.fullmatch(job) and len(job) <= 63:
        return job
    return "h-" + hashlib.sha256(job.encode()).hexdigest()[:40]


def trainjob_name(job: JobID, submission: int, attempt: int) -> str:
    """The TrainJob's name: ``dj-<job>-<submission>-<attempt>`` when that is a short DNS label,
    else the job's letters and digits shortened, with a hash of the id to keep it unique."""
    suffix = f"-{submission}-{attempt}"
    plain = f"{object_name(job)}{suffix}"
    if re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", plain) and len(plain) <= NAME_LIMIT:
        return plain
    slug = re.sub(r"[^a-z0-9]+", "-", job.lower()).strip("-")[:20].strip("-")
    digest = hashlib.sha256(job.encode()).hexdigest()[:10]
    return f"dj-{slug + '-' if slug else ''}{digest}{suffix}"


def environment(req: StartRequest) -> list[dict[str, str]]:
    """Every pod's environment: the spec's variables, then dispatch's own."""
    for name in req.spec.env:
        if not SHELL_NAME.fullmatch(name):
            raise InvalidError(f"env: variable name {name!r} is not a shell name; not rendered")
        if name in RESERVED_ENV:
            raise InvalidError(f"env: variable {name} is set by dispatch itself; not rendered")
    own = {
        "DISPATCH_JOB": req.job,
        "DISPATCH_SUBMISSION": str(req.lineage_submission),
        "DISPATCH_ATTEMPT": str(req.attempt),
        "DISPATCH_RESTARTS": "0",
        "DISPATCH_EPOCH": str(epoch(req.lineage_submission, 0)),
    }
    merged = {**dict(sorted(req.spec.env.items())), **own}
    return [{"name": k, "value": v} for k, v in merged.items()]


def resources(spec_gpus: int, per_node: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """The requests (and limits, for GPUs, which Kubernetes requires equal) of every node."""
    requests = dict(per_node)
    if spec_gpus:
        requests[GPU] = str(spec_gpus)
    if not requests:
        return {}
    limits = {GPU: requests[GPU]} if GPU in requests else {}
    return {"requests": requests, **({"limits": limits} if limits else {})}


def trainjob(req: StartRequest, settings: KubeflowSettings, user: str) -> dict[str, Any]:
    """The TrainJob of ``req``'s attempt, gate closed, in the settings' namespace: the user's
    own manifest with dispatch's parts added when the job is one, else made from the spec."""
    spec = req.spec
    if spec.trainjob is not None:
        return from_manifest(req, spec.trainjob.body(), settings, user)
    if spec.working_directory:
        raise InvalidError("working_directory: a TrainJob sets no working directory; not rendered")
    if spec.output_path:
        raise InvalidError("output_path: a TrainJob's output goes to its pods' logs; not rendered")
    labels = {
        LABEL_JOB: job_label(req.job),
        LABEL_SUBMISSION: str(req.submission),
        LABEL_ATTEMPT: str(req.attempt),
        QUEUE_LABEL: settings.queue,
    }
    if settings.priority_class:
        labels[PRIORITY_LABEL] = settings.priority_class
    trainer: dict[str, Any] = {
        "numNodes": spec.nodes,
        "numProcPerNode": spec.procs_per_node,
        "command": list(spec.command),
        "env": environment(req),
    }
    image = spec.image or settings.image
    if image:
        trainer["image"] = image
    res = resources(spec.gpus_per_node, settings.resources_per_node)
    if res:
        trainer["resourcesPerNode"] = res
    body: dict[str, Any] = {
        "runtimeRef": {"apiGroup": GROUP, "kind": settings.runtime_kind, "name": settings.runtime},
        "trainer": trainer,
    }
    if spec.time_limit is not None:
        body["activeDeadlineSeconds"] = max(1, int(spec.time_limit.total_seconds()))
    return {
        "apiVersion": API_VERSION,
        "kind": "TrainJob",
        "metadata": {
            "name": trainjob_name(req.job, req.submission, req.attempt),
            "namespace": settings.namespace,
            "labels": labels,
            "annotations": {
                ANNOTATION_JOB: req.job,
                ANNOTATION_USER: user,
                GATES: settings.gate,
            },
        },
        "spec": body,
    }


# What dispatch sets on every TrainJob it creates; a manifest that sets them itself is refused.
_OWN_LABELS = (LABEL_JOB, LABEL_SUBMISSION, LABEL_ATTEMPT)
_OWN_ANNOTATIONS = (ANNOTATION_JOB, ANNOTATION_USER, ANNOTATION_STOP)
# What the API server sets on an object, which a manifest saved from ``kubectl get -o yaml``
# carries and a create refuses (or would name another object by): dropped.
_SERVER_SET = (
    "generateName",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "managedFields",
    "selfLink",
    "ownerReferences",
)


def _mapping(body: Mapping[str, Any], where: str, key: str) -> dict[str, Any]:
    """``body[key]``, a mapping (empty when absent); anything else refused naming ``where``."""
    value = body.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidError(f"{where}{key}: expected a mapping, not {type(value).__name__}")
    return dict(value)


def _texts(values: Mapping[str, Any], where: str) -> dict[str, str]:
    for key, value in values.items():
        if not isinstance(value, str):
            raise InvalidError(f"{where}.{key}: expected text, not {value!r}")
    return dict(values)


def manifest_metadata(body: Mapping[str, Any], settings: KubeflowSettings) -> dict[str, Any]:
    """The manifest's metadata, checked: its namespace (when it names one) is the one dispatch
    creates in, and it sets none of dispatch's own labels and annotations."""
    meta = _mapping(body, "", "metadata")
    ns = meta.get("namespace")
    if ns not in (None, settings.namespace):
        raise InvalidError(
            f"metadata.namespace: {ns!r}, but dispatch creates TrainJobs in "
            f"{settings.namespace!r} (the kubeflow setting 'namespace'); leave it out of the "
            "manifest or set the config's namespace"
        )
    labels = _texts(_mapping(meta, "metadata.", "labels"), "metadata.labels")
    notes = _texts(_mapping(meta, "metadata.", "annotations"), "metadata.annotations")
    for key in _OWN_LABELS:
        if key in labels:
            raise InvalidError(f"metadata.labels.{key}: set by dispatch itself; leave it out")
    for key in _OWN_ANNOTATIONS:
        if key in notes:
            raise InvalidError(f"metadata.annotations.{key}: set by dispatch itself; leave it out")
    return {**meta, "labels": labels, "annotations": notes}


def _manifest_env(trainer: Mapping[str, Any], req: StartRequest) -> list[Any]:
    """The trainer's environment as the manifest gives it, then dispatch's own variables."""
    env = trainer.get("env") or []
    if not isinstance(env, list) or not all(isinstance(e, Mapping) for e in env):
        raise InvalidError("spec.trainer.env: expected a list of {name, value} entries")
    for entry in env:
        if entry.get("name") in RESERVED_ENV:
            raise InvalidError(
                f"spec.trainer.env: {entry.get('name')} is set by dispatch itself; leave it out"
            )
    return [*env, *environment(req)]


def from_manifest(
    req: StartRequest, body: dict[str, Any], settings: KubeflowSettings, user: str
) -> dict[str, Any]:
    """The user's TrainJob manifest as the attempt's TrainJob: everything the user wrote kept;
    dispatch's name (a TrainJob runs once, so each submission is a new one), namespace, labels,
    annotations and gate added; its queue and priority where the manifest names none; its
    runtime where the manifest names none; ``DISPATCH_*`` after the trainer's variables."""
    meta = manifest_metadata(body, settings)
    spec = _mapping(body, "", "spec")
    trainer = _mapping(spec, "spec.", "trainer")
    labels: dict[str, str] = meta["labels"]
    labels.setdefault(QUEUE_LABEL, settings.queue)
    if settings.priority_class:
        labels.setdefault(PRIORITY_LABEL, settings.priority_class)
    labels.update(
        {
            LABEL_JOB: job_label(req.job),
            LABEL_SUBMISSION: str(req.submission),
            LABEL_ATTEMPT: str(req.attempt),
        }
    )
    notes: dict[str, str] = meta["annotations"]
    theirs = [g.strip() for g in notes.get(GATES, "").split(",") if g.strip()]
    notes.update(
        {
            ANNOTATION_JOB: req.job,
            ANNOTATION_USER: user,
            GATES: ",".join([*theirs, settings.gate]),
        }
    )
    trainer["env"] = _manifest_env(trainer, req)
    spec["trainer"] = trainer
    spec.setdefault(
        "runtimeRef",
        {"apiGroup": GROUP, "kind": settings.runtime_kind, "name": settings.runtime},
    )
    for key in _SERVER_SET:
        meta.pop(key, None)
    meta.update(
        {
            "name": trainjob_name(req.job, req.submission, req.attempt),
            "namespace": settings.namespace,
            "labels": labels,
            "annotations": notes,
        }
    )
    made = {**body, "apiVersion": body.get("apiVersion", API_VERSION), "metadata": meta}
    made.pop("status", None)
    return {**made, "spec": spec}


def gates_without(value: str, gate: str) -> str | None:
    """The admission gates ``value`` names, without ``gate`` (None: no gate is left)."""
    rest = [g.strip() for g in value.split(",") if g.strip() and g.strip() != gate]
    return ",".join(rest) if rest else None


def open_patch(annotations: Mapping[str, str], gate: str, version: str) -> dict[str, Any]:
    """A merge patch that removes ``gate`` from Kueue's gates and nothing else, valid only at
    ``version`` of the object (a gate someone changed meanwhile makes it conflict)."""
    left = gates_without(annotations.get(GATES, ""), gate)
    return {"metadata": {"resourceVersion": version, "annotations": {GATES: left}}}


def stop_patch(reason: str) -> dict[str, Any]:
    """A merge patch that records why dispatch stopped the TrainJob."""
    return {"metadata": {"annotations": {ANNOTATION_STOP: reason[:1000] or "stopped"}}}


DEACTIVATE = {"spec": {"active": False}}
