"""``dispatch supervise install|uninstall|status --kubernetes``: the sweep as a CronJob in the
cluster of the config's kubeflow adapter (``dispatch.adapters.kubeflow.install``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dispatch.cli.session import EXIT_FAILED, echo_json
from dispatch.config import Settings, load
from dispatch.model.errors import InvalidError
from dispatch.supervise.install import schedule

if TYPE_CHECKING:
    from dispatch.adapters.kubeflow.backend import KubeflowBackend

DEFAULT_SERVICE_ACCOUNT = "dispatch-sweeper"

_kubernetes_options = [
    click.option(
        "--image",
        default="",
        help="With --kubernetes: the image the sweep runs in, with dispatch installed "
        "(default: the kubeflow setting 'image').",
    ),
    click.option(
        "--service-account",
        default="",
        help=f"With --kubernetes: the service account the sweep runs as (default: "
        f"{DEFAULT_SERVICE_ACCOUNT}).",
    ),
    click.option(
        "--ledger-claim",
        default="",
        help="With --kubernetes: the PersistentVolumeClaim of the shared filesystem that holds "
        "the ledger (required).",
    ),
    click.option(
        "--ledger-subpath",
        default="",
        help="With --kubernetes: the ledger's folder within the claim (default: its root).",
    ),
]


def kubernetes_options(f: Any) -> Any:
    """The options of a CronJob sweep."""
    for option in reversed(_kubernetes_options):
        f = option(f)
    return f


def _no_user(user: str) -> None:
    if user:
        raise click.UsageError(
            "--user goes with --cron or --scrontab: a CronJob sweeps for the user whose "
            "kubeconfig installs it"
        )


def install_cronjob(
    settings: Settings,
    every: timedelta,
    dry_run: bool,
    user: str,
    scron_options: tuple[str, ...],
    log: Path | None,
    *,
    image: str,
    service_account: str,
    ledger_claim: str,
    ledger_subpath: str,
) -> None:
    """Print, then (without ``dry_run``) make, the CronJob that sweeps ``settings``' ledger."""
    import yaml

    from dispatch.adapters.kubeflow import install as kube
    from dispatch.adapters.kubeflow.cronjob import Wanted

    _no_user(user)
    if scron_options or log:
        raise click.UsageError(
            "--scron-option and --log do not go with --kubernetes: the sweep's output is its "
            "pod's log (kubectl logs)"
        )
    if not ledger_claim:
        raise InvalidError(
            "--ledger-claim is needed with --kubernetes: the PersistentVolumeClaim of the "
            f"shared filesystem that holds the ledger {settings.ledger}, mounted in the sweep's "
            "pod at that same path"
        )
    if settings.embedded:
        raise InvalidError(
            f"no config file ({settings.path}): a CronJob sweep needs the config of the "
            "kubeflow adapter; write one (docs/kubeflow.md)"
        )
    want = Wanted(
        schedule=schedule(every),
        every=every,
        image=image,
        service_account=service_account or DEFAULT_SERVICE_ACCOUNT,
        claim=ledger_claim,
        claim_path=ledger_subpath,
        command=("dispatch",),
        uid=os.getuid() or None,
        gid=os.getgid() if os.getuid() else None,
    )
    with _kubeflow(settings) as backend:
        kube.check_paths(settings)
        job = kube.sweep_cronjob(settings, backend, want)
        click.echo(yaml.safe_dump_all(job.objects(), sort_keys=False), nl=False)
        if dry_run:
            return
        kube.install(backend.api, job)
    click.echo(f"installed {job.describe()}", err=True)


@contextmanager
def _kubeflow(settings: Settings) -> Iterator[KubeflowBackend]:
    """The config's kubeflow backend, its API client closed after."""
    from dispatch.adapters.kubeflow.install import kubeflow_backend

    backend = kubeflow_backend(settings)
    try:
        yield backend
    finally:
        backend.close()


def uninstall_cronjob(path: Path, user: str) -> None:
    """Remove the CronJob and the Secret ``install_cronjob`` made for the config at ``path``."""
    from dispatch.adapters.kubeflow.cronjob import name_for
    from dispatch.adapters.kubeflow.install import uninstall

    _no_user(user)
    settings = load(path)
    with _kubeflow(settings) as backend:
        removed = uninstall(backend, settings)
    name = f"{backend.settings.namespace}/{name_for(settings.path)}"
    if removed:
        click.echo(f"removed the sweep CronJob {name} for {path} and its config")
    else:
        click.echo(f"no sweep CronJob {name} for {path}; nothing changed")


def cronjob_status(path: Path, user: str, as_json: bool) -> None:
    """Whether the CronJob runs, and its last sweeps; exits 1 when it is not there."""
    from dispatch.adapters.kubeflow.install import status, status_lines

    _no_user(user)
    settings = load(path)
    with _kubeflow(settings) as backend:
        doc = status(backend, settings)
    if as_json:
        echo_json(doc)
    else:
        for line in status_lines(doc):
            click.echo(line)
    if not doc["installed"]:
        sys.exit(EXIT_FAILED)
