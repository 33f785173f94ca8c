"""The sweep as a Kubernetes CronJob: the objects ``dispatch supervise install --kubernetes``
creates. Pure functions, no I/O.

Two objects, both named ``dispatch-sweep-<digest of the config's path>`` so that installing
again from any login host that shares the config replaces them:

* a Secret holding the config the sweep reads in its pod (``pod_config``): the login host's
  config with the ledger's path made absolute, the kubeconfig and its context left out (the pod
  reaches the API server as its service account) and ``owner`` set to the user who installs it,
  so the service account acts on that user's TrainJobs and creates new ones as theirs. A Secret,
  not a ConfigMap: the config may hold a webhook's address, which is a credential.
* a CronJob that runs ``dispatch sweep`` with that config on the schedule, as the service
  account, as the installing user's uid and gid (the ledger's files stay theirs), with the
  ledger's claim mounted at the ledger's own path. One sweep at a time (``Forbid``); a sweep
  still running after the interval is ended by its Job's deadline.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from dispatch.config import Settings
from dispatch.model.base import format_duration
from dispatch.model.errors import InvalidError

JSON = dict[str, Any]
PREFIX = "dispatch-sweep-"
LABEL_SWEEP = "dispatch.dev/sweep"
ANNOTATION_CONFIG = "dispatch.dev/config"
ANNOTATION_OWNER = "dispatch.dev/user"
# Where the pod reads its config: a file of the Secret, mounted alone (``subPath``).
CONFIG_FILE = "config.toml"
CONFIG_PATH = f"/run/dispatch/{CONFIG_FILE}"
# Settings that only make sense on the login host: the pod has its service account.
LOGIN_ONLY = ("kubeconfig", "context")
HISTORY = 3


def name_for(config: Path) -> str:
    """The objects' name for the config file at ``config`` (its absolute path)."""
    return PREFIX + hashlib.sha256(str(config).encode()).hexdigest()[:10]


def pod_config(settings: Settings, owner: str) -> str:
    """The config the sweep reads in its pod, as TOML text (see the module's note)."""
    backend = {k: v for k, v in settings.backend_settings.items() if k not in LOGIN_ONLY}
    backend["owner"] = backend.get("owner") or owner
    deliver: JSON = {"timeout": format_duration(settings.deliver_timeout)}
    for key, value in (
        ("command", list(settings.deliver_command)),
        ("mail_to", list(settings.deliver_mail_to)),
        ("sendmail", list(settings.deliver_sendmail)),
        ("webhook", settings.deliver_webhook),
    ):
        if value:
            deliver[key] = value
    sweep: JSON = {
        "time_limit": format_duration(settings.sweep_time_limit),
        "pack_after": _never(settings.pack_after),
        "forget_after": _never(settings.forget_after),
    }
    if settings.sweep_metrics is not None:
        sweep["metrics"] = str(settings.sweep_metrics)
    tables: list[tuple[str, Mapping[str, Any]]] = [
        ("", {"ledger": str(settings.ledger)}),
        ("backend", {"name": settings.backend}),
        ("backend.settings", backend),
        ("deliver", deliver),
        ("sweep", sweep),
        ("supervise", {"poll": format_duration(settings.poll)}),
    ]
    lines = [f"# dispatch's sweep in its pod, from {settings.path}"]
    for header, table in tables:
        if header:
            lines.append(f"\n[{header}]")
        lines.extend(f"{json.dumps(k)} = {toml_value(v)}" for k, v in table.items())
    return "\n".join(lines) + "\n"


def _never(d: timedelta | None) -> str:
    return "never" if d is None else format_duration(d)


def toml_value(value: Any) -> str:
    """``value`` written as TOML: text, a number, a truth value, a list or an inline table."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        # A JSON string is a TOML basic string, but for DEL, which TOML wants escaped.
        return json.dumps(value).replace("\x7f", "\\u007f")
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise InvalidError(f"setting value {value!r} cannot be written to the pod's config")


@dataclass(frozen=True)
class Wanted:
    """What the person installing asks for, beyond the config: when, in what image, as which
    service account and uid, and the ledger's claim (``claim_path``: its folder there)."""

    schedule: str
    every: timedelta
    image: str
    service_account: str
    claim: str
    claim_path: str = ""
    command: tuple[str, ...] = ("dispatch",)
    uid: int | None = None
    gid: int | None = None


@dataclass(frozen=True)
class SweepCronJob:
    """The CronJob (and the Secret of its config) that sweeps one config's ledger."""

    config: Path
    namespace: str
    owner: str
    ledger: Path
    pod_config: str
    want: Wanted

    @property
    def name(self) -> str:
        """The CronJob's and the Secret's name."""
        return name_for(self.config)

    def _meta(self) -> JSON:
        return {
            "name": self.name,
            "namespace": self.namespace,
            "labels": self.labels(),
            "annotations": {ANNOTATION_CONFIG: str(self.config), ANNOTATION_OWNER: self.owner},
        }

    def labels(self) -> dict[str, str]:
        """The labels of both objects, the Jobs and their pods."""
        return {
            "app.kubernetes.io/name": "dispatch-sweep",
            "app.kubernetes.io/managed-by": "dispatch",
            LABEL_SWEEP: self.name.removeprefix(PREFIX),
        }

    def secret(self) -> JSON:
        """The Secret holding the pod's config."""
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": self._meta(),
            "type": "Opaque",
            "stringData": {CONFIG_FILE: self.pod_config},
        }

    def cronjob(self) -> JSON:
        """The CronJob that runs the sweep."""
        seconds = int(self.want.every.total_seconds())
        ledger_mount: JSON = {"name": "ledger", "mountPath": str(self.ledger)}
        if self.want.claim_path:
            ledger_mount["subPath"] = self.want.claim_path
        pod: JSON = {
            "serviceAccountName": self.want.service_account,
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "sweep",
                    "image": self.want.image,
                    "command": [*self.want.command, "sweep", "--config", CONFIG_PATH],
                    "volumeMounts": [
                        {
                            "name": "config",
                            "mountPath": CONFIG_PATH,
                            "subPath": CONFIG_FILE,
                            "readOnly": True,
                        },
                        ledger_mount,
                    ],
                }
            ],
            "volumes": [
                {"name": "config", "secret": {"secretName": self.name, "defaultMode": 0o444}},
                {"name": "ledger", "persistentVolumeClaim": {"claimName": self.want.claim}},
            ],
        }
        if self.want.uid:
            # The ledger's files stay the user's, as when cron sweeps on a login host.
            pod["securityContext"] = {"runAsUser": self.want.uid, "runAsGroup": self.want.gid or 0}
        return {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": self._meta(),
            "spec": {
                "schedule": self.want.schedule,
                "concurrencyPolicy": "Forbid",
                "startingDeadlineSeconds": seconds,
                "successfulJobsHistoryLimit": HISTORY,
                "failedJobsHistoryLimit": HISTORY,
                "jobTemplate": {
                    "metadata": {"labels": self.labels()},
                    "spec": {
                        "backoffLimit": 0,
                        "activeDeadlineSeconds": seconds,
                        "template": {"metadata": {"labels": self.labels()}, "spec": pod},
                    },
                },
            },
        }

    def objects(self) -> list[JSON]:
        """Both objects, the Secret first (the CronJob's pods mount it)."""
        return [self.secret(), self.cronjob()]

    def describe(self) -> str:
        """One line for the person who installed it."""
        return (
            f"CronJob {self.namespace}/{self.name}: `dispatch sweep` every "
            f"{format_duration(self.want.every)} as service account {self.want.service_account}, "
            f"the ledger {self.ledger} from claim {self.want.claim}"
        )
