"""The one module that talks to Kubernetes, through the official ``kubernetes`` client: every
call returns the API's JSON as plain mappings, and every failure leaves as a dispatch error,
translated here (``_translate``) and nowhere else."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from dispatch.adapters.kubeflow.render import GROUP, VERSION
from dispatch.adapters.kubeflow.settings import KubeflowSettings
from dispatch.model.errors import (
    DispatchError,
    InvalidError,
    LaunchRefusedError,
    NotFoundError,
    OutcomeUnknownError,
    RejectedError,
    UnauthorizedError,
    UnreachableError,
)

T = TypeVar("T")
JSON = dict[str, Any]
KUEUE = ("kueue.x-k8s.io", "v1beta2")
# How often put_object writes an object that keeps changing under it before it gives up.
PUT_TRIES = 10


class Changed(RejectedError):
    """A conditional patch found the object changed since it was read (HTTP 409)."""


def _translate(err: Exception, what: str, effect: bool) -> DispatchError:
    """The dispatch error for a failed API call (``effect``: a call that may change state)."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import NewConnectionError, ReadTimeoutError

    if isinstance(err, ApiException):
        return _from_reply(int(err.status or 0), _message(err), what, effect)
    if isinstance(err, ReadTimeoutError) and effect:
        return OutcomeUnknownError(f"{what}: no reply in time; it may or may not have acted")
    if isinstance(err, NewConnectionError | OSError | ReadTimeoutError):
        return UnreachableError(f"{what}: {err}")
    cause = getattr(err, "reason", None)
    if cause is not None and not isinstance(cause, str):
        return _translate(cause, what, effect)
    if effect:
        return OutcomeUnknownError(f"{what}: {err}; it may or may not have acted")
    return UnreachableError(f"{what}: {err}")


def _from_reply(status: int, text: str, what: str, effect: bool) -> DispatchError:
    """The dispatch error for the API server's error reply of HTTP ``status``."""
    if status == 404:
        return NotFoundError(f"{what}: {text}")
    if status == 403 and "admission webhook" in text and "denied" in text:
        # A webhook's refusal of the object (Kueue's, Trainer's) comes as 403 too.
        return InvalidError(f"{what}: {text}")
    if status in (401, 403):
        return UnauthorizedError(f"{what}: {text}")
    if status == 409:
        return Changed(f"{what}: {text}")
    if status in (400, 422):
        return InvalidError(f"{what}: {text}")
    if status >= 500 and effect:
        return OutcomeUnknownError(f"{what}: HTTP {status}: {text}; it may or may not have acted")
    return UnreachableError(f"{what}: HTTP {status}: {text}")


def _message(err: Any) -> str:
    """The API's own message in an error reply, else its HTTP reason."""
    try:
        body = json.loads(err.body or "{}")
    except (TypeError, ValueError):
        body = {}
    text = body.get("message") if isinstance(body, Mapping) else None
    return str(text or err.reason or f"HTTP {err.status}")[:500]


def _json(value: object) -> JSON:
    """The API's reply as a JSON object (the custom-object calls return dicts)."""
    if not isinstance(value, dict):
        raise UnreachableError(f"the API server answered {type(value).__name__}, not an object")
    return value


class KubeAPI:
    """The calls the kubeflow adapter makes, as the user of the settings' kubeconfig."""

    def __init__(self, settings: KubeflowSettings) -> None:
        from kubernetes import client
        from kubernetes import config as kubeconfig

        # The client's config loaders carry no type hints.
        config: Any = kubeconfig
        self.timeout = settings.timeout
        try:
            if settings.kubeconfig or not _in_cluster():
                api = config.new_client_from_config(
                    config_file=settings.kubeconfig or None, context=settings.context or None
                )
            else:
                config.load_incluster_config()
                api = client.ApiClient()
        except (config.ConfigException, OSError, ValueError) as err:
            where = settings.kubeconfig or "(default)"
            raise UnreachableError(f"kubeconfig {where}: {err}") from None
        self.api = api
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.auth = client.AuthenticationV1Api(api)
        self.batch = client.BatchV1Api(api)
        self._client = client

    def _call(self, what: str, fn: Callable[[], T], *, effect: bool = False) -> T:
        try:
            return fn()
        except DispatchError:
            raise
        except Exception as err:  # every foreign error becomes a dispatch error right here
            raise _translate(err, what, effect) from None

    def close(self) -> None:
        """Close the client's connection pool."""
        self.api.close()

    def whoami(self) -> str:
        """The user name the API server knows this client as."""
        review = self._client.V1SelfSubjectReview()
        reply = self._call(
            "who am I (SelfSubjectReview)",
            lambda: self.auth.create_self_subject_review(review, _request_timeout=self.timeout),
        )
        info = reply.status.user_info if reply.status is not None else None
        if info is None or not info.username:
            raise UnreachableError("the API server did not say who this client is")
        return str(info.username)

    def create_trainjob(self, body: JSON, dry_run: bool = False) -> JSON:
        """Create a TrainJob; one of that name already there (a reply lost before) is the
        answer. A webhook's or the API's refusal is a ``LaunchRefusedError``."""
        ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
        try:
            return _json(
                self._call(
                    f"create TrainJob {ns}/{name}",
                    lambda: self.custom.create_namespaced_custom_object(
                        GROUP,
                        VERSION,
                        ns,
                        "trainjobs",
                        body,
                        _request_timeout=self.timeout,
                        dry_run="All" if dry_run else None,
                    ),
                    effect=True,
                )
            )
        except Changed:
            return self.get_trainjob(ns, name)
        except InvalidError as err:
            raise LaunchRefusedError(err.message) from None

    def get_trainjob(self, ns: str, name: str) -> JSON:
        """One TrainJob."""
        return _json(
            self._call(
                f"get TrainJob {ns}/{name}",
                lambda: self.custom.get_namespaced_custom_object(
                    GROUP, VERSION, ns, "trainjobs", name, _request_timeout=self.timeout
                ),
            )
        )

    def patch_trainjob(self, ns: str, name: str, patch: JSON) -> JSON:
        """Merge-patch a TrainJob; a patch naming a resourceVersion that moved raises Changed."""
        return _json(
            self._call(
                f"patch TrainJob {ns}/{name}",
                lambda: self.custom.patch_namespaced_custom_object(
                    GROUP, VERSION, ns, "trainjobs", name, patch, _request_timeout=self.timeout
                ),
                effect=True,
            )
        )

    def list_trainjobs(self, ns: str, selector: str) -> list[JSON]:
        """The TrainJobs of a namespace matching a label selector."""
        reply = _json(
            self._call(
                f"list TrainJobs in {ns}",
                lambda: self.custom.list_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    ns,
                    "trainjobs",
                    label_selector=selector,
                    _request_timeout=self.timeout,
                ),
            )
        )
        return list(reply.get("items") or [])

    def list_workloads(self, ns: str) -> list[JSON]:
        """Kueue's Workloads of a namespace."""
        reply = _json(
            self._call(
                f"list Kueue Workloads in {ns}",
                lambda: self.custom.list_namespaced_custom_object(
                    *KUEUE, ns, "workloads", _request_timeout=self.timeout
                ),
            )
        )
        return list(reply.get("items") or [])

    def patch_workload(self, ns: str, name: str, patch: JSON) -> JSON:
        """Merge-patch a Kueue Workload."""
        return _json(
            self._call(
                f"patch Kueue Workload {ns}/{name}",
                lambda: self.custom.patch_namespaced_custom_object(
                    *KUEUE, ns, "workloads", name, patch, _request_timeout=self.timeout
                ),
                effect=True,
            )
        )

    def delete_trainjob(self, ns: str, name: str) -> None:
        """Delete a TrainJob and what it owns; one already gone is success."""
        try:
            self._call(
                f"delete TrainJob {ns}/{name}",
                lambda: self.custom.delete_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    ns,
                    "trainjobs",
                    name,
                    propagation_policy="Background",
                    _request_timeout=self.timeout,
                ),
                effect=True,
            )
        except NotFoundError:
            return

    def list_pods(self, ns: str, selector: str) -> list[JSON]:
        """The pods of a namespace matching a label selector, as JSON."""
        reply = self._call(
            f"list pods in {ns}",
            lambda: self.core.list_namespaced_pod(
                ns,
                label_selector=selector,
                _preload_content=False,
                _request_timeout=self.timeout,
            ),
        )
        # Unparsed (_preload_content=False): the reply is the HTTP response, read as JSON.
        return list(_json(json.loads(getattr(reply, "data", b"{}"))).get("items") or [])

    def read_pod_log(self, ns: str, name: str) -> bytes:
        """What a pod's container wrote (its log, stdout and stderr together), as the kubelet
        keeps it; one gone with its pod is ``NotFoundError``."""
        reply = self._call(
            f"read the log of pod {ns}/{name}",
            lambda: self.core.read_namespaced_pod_log(
                name, ns, _preload_content=False, _request_timeout=self.timeout
            ),
        )
        return bytes(getattr(reply, "data", b""))

    def _plain(self, what: str, call: Callable[..., Any], *args: Any, **kw: Any) -> JSON:
        """A core or batch call's reply as JSON (unparsed by the client's models)."""
        reply = self._call(
            what,
            lambda: call(*args, _preload_content=False, _request_timeout=self.timeout, **kw),
            effect=call.__name__.startswith(("create", "replace", "delete")),
        )
        return _json(json.loads(getattr(reply, "data", b"") or b"{}"))

    def _kinds(self) -> dict[str, tuple[Callable[..., Any], ...]]:
        """Per kind of object: its read, create, replace and delete calls."""
        core, batch = self.core, self.batch
        return {
            "ServiceAccount": (core.read_namespaced_service_account,),
            "PersistentVolumeClaim": (core.read_namespaced_persistent_volume_claim,),
            "Secret": (
                core.read_namespaced_secret,
                core.create_namespaced_secret,
                core.replace_namespaced_secret,
                core.delete_namespaced_secret,
            ),
            "CronJob": (
                batch.read_namespaced_cron_job,
                batch.create_namespaced_cron_job,
                batch.replace_namespaced_cron_job,
                batch.delete_namespaced_cron_job,
            ),
        }

    def get_object(self, kind: str, ns: str, name: str) -> JSON:
        """One object of a core or batch kind (``_kinds``)."""
        return self._plain(f"get {kind} {ns}/{name}", self._kinds()[kind][0], name, ns)

    def put_object(self, body: JSON) -> JSON:
        """Create the object, or replace the one of its name at the version just read; an
        object changed between the read and the replace (another install racing this one) is
        read again, a few times."""
        kind, meta = body["kind"], body["metadata"]
        ns, name = meta["namespace"], meta["name"]
        _, create, replace, _ = self._kinds()[kind]
        for _ in range(PUT_TRIES):
            try:
                return self._plain(f"create {kind} {ns}/{name}", create, ns, body)
            except Changed:  # there already: replace it
                pass
            try:
                there = self.get_object(kind, ns, name)
            except NotFoundError:  # deleted since: create it again
                continue
            version = there["metadata"]["resourceVersion"]
            try:
                return self._plain(
                    f"replace {kind} {ns}/{name}",
                    replace,
                    name,
                    ns,
                    {**body, "metadata": {**meta, "resourceVersion": version}},
                )
            except (Changed, NotFoundError):  # changed or gone since the read: again
                continue
        raise RejectedError(f"{kind} {ns}/{name} kept changing while it was written; try again")

    def delete_object(self, kind: str, ns: str, name: str) -> bool:
        """Delete an object and what it owns; False when it was not there."""
        try:
            self._plain(
                f"delete {kind} {ns}/{name}",
                self._kinds()[kind][3],
                name,
                ns,
                propagation_policy="Background",
            )
        except NotFoundError:
            return False
        return True

    def list_jobs(self, ns: str, selector: str) -> list[JSON]:
        """The batch Jobs of a namespace matching a label selector."""
        reply = self._plain(
            f"list Jobs in {ns}", self.batch.list_namespaced_job, ns, label_selector=selector
        )
        return list(reply.get("items") or [])

    def get_runtime(self, kind: str, name: str, ns: str) -> JSON:
        """The (Cluster)TrainingRuntime the TrainJobs use."""
        if kind == "ClusterTrainingRuntime":
            return _json(
                self._call(
                    f"get ClusterTrainingRuntime {name}",
                    lambda: self.custom.get_cluster_custom_object(
                        GROUP,
                        VERSION,
                        "clustertrainingruntimes",
                        name,
                        _request_timeout=self.timeout,
                    ),
                )
            )
        return _json(
            self._call(
                f"get TrainingRuntime {ns}/{name}",
                lambda: self.custom.get_namespaced_custom_object(
                    GROUP, VERSION, ns, "trainingruntimes", name, _request_timeout=self.timeout
                ),
            )
        )


def _in_cluster() -> bool:
    import os

    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.exists(
        "/var/run/secrets/kubernetes.io/serviceaccount/token"
    )
