"""``dispatch supervise install|uninstall|status --kubernetes``: the sweep's CronJob in the
cluster of the config's kubeflow adapter, made, removed and read as the user of the config's
kubeconfig (see ``cronjob`` for what the objects hold)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from dispatch.adapters.kubeflow.backend import KubeflowBackend
from dispatch.adapters.kubeflow.cronjob import (
    HISTORY,
    LABEL_SWEEP,
    PREFIX,
    SweepCronJob,
    Wanted,
    name_for,
    pod_config,
)
from dispatch.adapters.kubeflow.run import KubeAPI
from dispatch.config import Settings, backend_of
from dispatch.model.errors import DispatchError, InvalidError, NotFoundError, RejectedError
from dispatch.records import sweep_exit

JSON = dict[str, Any]
# The label the Job controller puts on a Job's pods.
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


def kubeflow_backend(settings: Settings) -> KubeflowBackend:
    """The config's kubeflow backend (its API client made at first use); refused for another
    adapter's config."""
    if settings.backend != "kubeflow":
        raise InvalidError(
            f"{settings.source} uses the {settings.backend} adapter: --kubernetes runs the "
            "sweep in the cluster of the kubeflow adapter; use --cron or --scrontab"
        )
    backend = backend_of(settings)
    assert isinstance(backend, KubeflowBackend)
    return backend


def check_paths(settings: Settings) -> None:
    """Refuse a config naming a file of the login host the sweep's pod cannot reach."""
    metrics = settings.sweep_metrics
    if metrics is not None and not metrics.is_relative_to(settings.ledger):
        raise InvalidError(
            f"sweep.metrics {metrics} in {settings.path} is outside the ledger folder "
            f"{settings.ledger}, the one folder of the login host the sweep's pod mounts: "
            "write the metrics under the ledger's folder, or leave sweep.metrics out"
        )


def sweep_cronjob(settings: Settings, backend: KubeflowBackend, want: Wanted) -> SweepCronJob:
    """The CronJob for ``settings``, owned by the user whose TrainJobs ``backend`` acts on."""
    image = want.image or backend.settings.image
    if not image:
        raise InvalidError(
            "--image is needed: the image the sweep runs in, with dispatch installed (the "
            "kubeflow setting 'image' names none)"
        )
    owner = backend.user
    return SweepCronJob(
        config=settings.path,
        namespace=backend.settings.namespace,
        owner=owner,
        ledger=settings.ledger,
        pod_config=pod_config(settings, owner),
        want=replace(want, image=image),
    )


def check_parts(api: KubeAPI, job: SweepCronJob) -> None:
    """Refuse, before anything is made, a service account or claim the sweep cannot use."""
    ns, account, claim_name = job.namespace, job.want.service_account, job.want.claim
    try:
        api.get_object("ServiceAccount", ns, account)
    except NotFoundError:
        raise RejectedError(
            f"service account {ns}/{account} does not exist: the sweep runs as it; "
            "ask the cluster's admins for one with the rights docs/kubeflow.md lists, or name "
            "another with --service-account"
        ) from None
    try:
        claim = api.get_object("PersistentVolumeClaim", ns, claim_name)
    except NotFoundError:
        raise RejectedError(
            f"claim {ns}/{claim_name} does not exist: the sweep mounts the ledger from it; name "
            "the claim of the shared filesystem that holds the ledger with --ledger-claim"
        ) from None
    phase = (claim.get("status") or {}).get("phase")
    if phase != "Bound":
        raise RejectedError(
            f"claim {ns}/{claim_name} is {phase or 'not bound'}: the sweep's pod would wait for "
            "it; ask the cluster's admins to bind it to the ledger's shared filesystem"
        )


def install(api: KubeAPI, job: SweepCronJob) -> None:
    """Make (or replace) the Secret and the CronJob."""
    check_parts(api, job)
    for body in job.objects():
        api.put_object(body)


def uninstall(backend: KubeflowBackend, settings: Settings) -> bool:
    """Remove the CronJob (and its Jobs) and the Secret; False when none was there."""
    name, ns = name_for(settings.path), backend.settings.namespace
    removed = backend.api.delete_object("CronJob", ns, name)
    return backend.api.delete_object("Secret", ns, name) or removed


def status(backend: KubeflowBackend, settings: Settings) -> JSON:
    """Whether the CronJob is there, and what its last sweeps did."""
    api, name, ns = backend.api, name_for(settings.path), backend.settings.namespace
    doc: JSON = {"config": str(settings.path), "cronjob": f"{ns}/{name}", "installed": False}
    try:
        cron = api.get_object("CronJob", ns, name)
    except NotFoundError:
        return doc
    spec, state = cron.get("spec") or {}, cron.get("status") or {}
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    jobs = api.list_jobs(ns, f"{LABEL_SWEEP}={name.removeprefix(PREFIX)}")
    jobs.sort(key=lambda j: str(j["metadata"].get("creationTimestamp", "")))
    sweeps = [_sweep(j) for j in jobs]
    doc.update(
        installed=True,
        schedule=spec.get("schedule"),
        suspended=bool(spec.get("suspend")),
        service_account=pod.get("serviceAccountName", "default"),
        image=pod["containers"][0].get("image"),
        last_schedule=state.get("lastScheduleTime"),
        last_success=state.get("lastSuccessfulTime"),
        sweeps=sweeps,
        last_said=_last_said(api, ns, sweeps),
    )
    ended = sweep_exit.read(settings.ledger)
    doc["exit_code"] = ended.code if ended else None
    doc["exit_code_at"] = ended.finished.isoformat() if ended else None
    return doc


def _last_said(api: KubeAPI, ns: str, sweeps: list[JSON]) -> str | None:
    """The last line the newest ended sweep printed (its pod's log), while its pod is kept."""
    ended = [s for s in sweeps if s["outcome"] != "running"]
    if not ended:
        return None
    name = ended[-1]["job"]
    try:
        pods = api.list_pods(ns, f"{JOB_NAME_LABEL}={name}")
        if not pods:
            return None
        text = api.read_pod_log(ns, pods[0]["metadata"]["name"])
    except DispatchError as err:  # gone, or not the user's to read: said, not fatal
        return f"(its log cannot be read: {err.message})"
    lines = [line for line in text.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _sweep(job: JSON) -> JSON:
    """One sweep's Job: its name, when it started and ended, and how."""
    st = job.get("status") or {}
    outcome = "running"
    for cond in st.get("conditions") or []:
        if cond.get("status") == "True" and cond.get("type") in ("Complete", "Failed"):
            outcome = "succeeded" if cond["type"] == "Complete" else "failed"
            if cond["type"] == "Failed" and cond.get("reason"):
                outcome = f"failed ({cond['reason']})"
    return {
        "job": job["metadata"]["name"],
        "started": st.get("startTime"),
        "finished": st.get("completionTime"),
        "outcome": outcome,
    }


def status_lines(doc: JSON) -> list[str]:
    """``status``'s document for a person."""
    if not doc["installed"]:
        return [
            f"no sweep CronJob for {doc['config']} ({doc['cronjob']} is not there); install "
            "one with: dispatch supervise install --kubernetes"
        ]
    lines = [
        f"entry: CronJob {doc['cronjob']}, schedule {doc['schedule']!r}"
        + (" (suspended)" if doc["suspended"] else "")
        + f", service account {doc['service_account']}, image {doc['image']}",
        f"config: {doc['config']}",
        f"last scheduled: {doc['last_schedule'] or 'never yet'}",
        f"last succeeded: {doc['last_success'] or 'never yet'}",
    ]
    if not doc["sweeps"]:
        lines.append("last sweep: none yet")
    for s in doc["sweeps"][-HISTORY:]:
        lines.append(f"sweep {s['job']}: started {s['started'] or '-'}, {s['outcome']}")
    if doc["last_said"] is not None:
        lines.append(f"last said: {doc['last_said']}")
    if doc["exit_code"] is not None:
        at = doc["exit_code_at"]
        lines.append(f"exit code: {doc['exit_code']} (the ledger's last sweep, ended {at})")
    return lines
