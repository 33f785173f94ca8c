"""The Kubeflow backend: the SPI (Backend, MultiFinder) over Kubeflow Trainer and Kueue.

Every call is: render an object or a patch (``render``), send it (``run``), read what came back
(``parse``) and give it meaning (``meaning``). The scheduler object is a TrainJob created with
dispatch's admission gate; ``open`` removes that gate and nothing else; ``find`` is one LIST
of TrainJobs (and, when there are any, one of Kueue's Workloads and one of pods) per namespace
searched, however many jobs are asked; ``stop`` deactivates the TrainJob's Kueue Workload,
which ends its execution and keeps Kueue from admitting it again.
"""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Sequence
from functools import cached_property
from typing import IO

from dispatch.adapters.kubeflow import parse, render
from dispatch.adapters.kubeflow.capabilities import (
    BAD_GATE,
    capabilities,
    gate_support,
    rule_support,
)
from dispatch.adapters.kubeflow.meaning import observe, state_line
from dispatch.adapters.kubeflow.run import Changed, KubeAPI
from dispatch.adapters.kubeflow.settings import KubeflowSettings
from dispatch.model.enums import Capability, ObjectState, Tristate
from dispatch.model.errors import (
    DispatchError,
    InvalidError,
    NotFoundError,
    RejectedError,
    UnauthorizedError,
    UnsupportedError,
)
from dispatch.model.objects import (
    Declarations,
    Discovery,
    ObjectObs,
    ObjectRef,
    StartRequest,
    StopReport,
    object_name,
)
from dispatch.model.values import JobID, JobSpec, RecoveryPolicy, RuleSupport, Support

log = logging.getLogger("dispatch.kubeflow")
# How often and how long stop_job looks again before it calls what is still there alive.
_STOP_LOOKS = 20
_STOP_PAUSE = 0.5
# How often stop looks for a new TrainJob's Workload before it deletes the TrainJob instead.
_WORKLOAD_LOOKS = 20
# Conditional patches of the gate retried when the TrainJob changed between read and patch.
_OPEN_TRIES = 5
# How the API server names a service account: system:serviceaccount:<namespace>:<name>.
SERVICE_ACCOUNT = "system:serviceaccount:"


class KubeflowBackend:
    """dispatch's view of one Kubernetes cluster running Kubeflow Trainer under Kueue."""

    def __init__(self, settings: KubeflowSettings, api: KubeAPI | None = None) -> None:
        if not settings.queue:
            raise InvalidError(
                "kubeflow setting 'queue' is required: Kueue's admission is the gate"
            )
        self.settings = settings
        self._api = api

    @property
    def api(self) -> KubeAPI:
        """The API client, made at first use."""
        if self._api is None:
            self._api = KubeAPI(self.settings)
        return self._api

    @cached_property
    def caller(self) -> str:
        """The user the API server knows this client as."""
        return self.api.whoami()

    @cached_property
    def user(self) -> str:
        """Whose TrainJobs are dispatch's: the caller's, or, for a sweep that runs as a service
        account on a user's behalf, the setting ``owner``'s. Another user's TrainJob with the
        job's label is foreign."""
        owner, caller, ns = self.settings.owner, self.caller, self.settings.namespace
        if not owner or owner == caller:
            return caller
        if not caller.startswith(f"{SERVICE_ACCOUNT}{ns}:"):
            raise UnauthorizedError(
                f"kubeflow setting 'owner' = {owner!r}: only a service account of namespace "
                f"{ns} acts for another user (a sweep installed with `dispatch supervise "
                f"install --kubernetes`), and {caller} is not one; remove the setting"
            )
        return owner

    @cached_property
    def _capabilities(self) -> dict[Capability, Support]:
        probe = render.trainjob(
            StartRequest(
                job="probe",
                submission=1,
                attempt=1,
                lineage_submission=1,
                spec=JobSpec(command=("true",)),
            ),
            self.settings,
            self.user,
        )
        probe["metadata"]["annotations"][render.GATES] = BAD_GATE
        probe["metadata"]["name"] = "dispatch-capability-probe"
        try:
            self.api.create_trainjob(probe, dry_run=True)
            gate = gate_support(None)
        except UnauthorizedError as err:
            # Not a capability of the cluster's: this user may not create TrainJobs here.
            raise UnauthorizedError(
                f"{self.caller} may not create TrainJobs in namespace {self.settings.namespace} "
                f"({err.message}); use a namespace you may (the kubeflow setting 'namespace')"
            ) from None
        except DispatchError as err:
            gate = gate_support(err.message)
        return capabilities(gate)

    def capabilities(self, spec: JobSpec | None = None) -> dict[Capability, Support]:
        """What the cluster supports (the gate probed, the rest declared)."""
        return dict(self._capabilities)

    def rules(self, spec: JobSpec, policy: RecoveryPolicy) -> list[RuleSupport]:
        """One answer per rule: performed by the supervisor, never natively."""
        return [rule_support(rule, self._capabilities) for rule in policy.rules]

    def declarations(self) -> Declarations:
        """The adapter's name and its capabilities."""
        return Declarations(name="kubeflow", capabilities=self.capabilities())

    def close(self) -> None:
        """Close the API client."""
        if self._api is not None:
            self._api.close()

    # -- effects ---------------------------------------------------------------------------

    def start(self, req: StartRequest) -> ObjectRef:
        """Create the attempt's TrainJob with dispatch's admission gate."""
        if self._capabilities[Capability.READMISSION_GATE].state is not Tristate.YES:
            gate = self._capabilities[Capability.READMISSION_GATE]
            raise UnsupportedError(f"no admission gate to create {req.name} behind: {gate.detail}")
        body = render.trainjob(req, self.settings, self.user)
        made = self.api.create_trainjob(body)
        meta = made.get("metadata") or {}
        notes, labels = meta.get("annotations") or {}, meta.get("labels") or {}
        if notes.get(render.ANNOTATION_USER) != self.user:
            raise RejectedError(f"TrainJob {meta.get('name')} exists and is not this user's")
        # A create seen again answers with the object there: it must be this very attempt.
        numbers = (labels.get(render.LABEL_SUBMISSION), labels.get(render.LABEL_ATTEMPT))
        if notes.get(render.ANNOTATION_JOB) != req.job or numbers != (
            str(req.submission),
            str(req.attempt),
        ):
            raise RejectedError(f"TrainJob {meta.get('name')} exists and is another job's")
        return ObjectRef(id=f"{meta['namespace']}/{meta['name']}", name=req.name)

    def check(self, req: StartRequest, *, reuse: bool = False) -> str:
        """Ask the API server whether it would create this attempt's TrainJob as it stands,
        creating nothing: a server-side dry run, which the schema and every admission webhook
        (Trainer's, Kueue's, JobSet's) see as they see a create. What it refuses raises as
        ``start`` would. ``reuse`` changes nothing: a dry run costs one call."""
        body = render.trainjob(req, self.settings, self.user)
        body["metadata"]["name"] = "dispatch-check"
        self.api.create_trainjob(body, dry_run=True)
        return f"the API server would create it in namespace {self.settings.namespace}"

    def open(self, ref: ObjectRef) -> None:
        """Remove dispatch's entry from the TrainJob's admission gates, only if it is this
        user's and its numbers read; any other gate stays. An open object is success."""
        ns, name = _split(ref)
        for _ in range(_OPEN_TRIES):
            tj = self.api.get_trainjob(ns, name)
            facts = parse.trainjob_facts(tj, {}, {})
            if facts.user != self.user or facts.submission is None or facts.attempt is None:
                raise RejectedError(f"{ref} is foreign (another user's, or its numbers unreadable)")
            if self.settings.gate not in facts.gates:
                return
            meta = tj["metadata"]
            patch = render.open_patch(
                meta.get("annotations") or {}, self.settings.gate, meta["resourceVersion"]
            )
            try:
                self.api.patch_trainjob(ns, name, patch)
                return
            except Changed as err:  # changed since read: read again
                log.info("open %s: %s; reading it again", ref, err)
        raise RejectedError(f"open {ref}: the TrainJob kept changing; try again")

    def stop(self, ref: ObjectRef, reason: str) -> None:
        """End the TrainJob's execution: record why, then deactivate its Kueue Workload (Kueue
        evicts it and never admits it again); one Kueue gave no Workload within 10 s is deleted.
        One gone, ended, or another user's, is left alone."""
        ns, name = _split(ref)
        try:
            tj = self.api.get_trainjob(ns, name)
        except NotFoundError:
            return
        uid = str(tj["metadata"].get("uid", ""))
        workload = self._workload(ns, uid)
        facts = parse.trainjob_facts(tj, {uid: workload} if workload else {}, {})
        if facts.user != self.user or state_line(facts, self.settings.gate).state is (
            ObjectState.ENDED
        ):
            return
        self.api.patch_trainjob(ns, name, render.stop_patch(reason))
        if workload is None:
            self.api.delete_trainjob(ns, name)
            return
        self.api.patch_workload(ns, workload["metadata"]["name"], render.DEACTIVATE)

    def _workload(self, ns: str, uid: str) -> parse.JSON | None:
        """The Kueue Workload of the TrainJob ``uid``; Kueue makes it a moment after the
        TrainJob, so a stop right after a start waits for it a little."""
        for look in range(_WORKLOAD_LOOKS):
            if look:
                time.sleep(_STOP_PAUSE)
            found = parse.workloads_by_owner(self.api.list_workloads(ns)).get(uid)
            if found is not None:
                return found
        return None

    def stop_job(self, job: JobID, reason: str) -> StopReport:
        """Stop every live TrainJob of this user's with the job's label, then look again."""
        before = [o for o in self.find(job).objects if o.state.live and self._mine(o)]
        for obs in before:
            self.stop(obs.ref, reason)
        alive = self._still_live(job, {o.ref.id for o in before})
        alive_ids = {r.id for r in alive}
        stopped = tuple(o.ref for o in before if o.ref.id not in alive_ids)
        return StopReport(stopped=stopped, live=tuple(alive))

    def _mine(self, obs: ObjectObs) -> bool:
        return not obs.foreign

    def _still_live(self, job: JobID, ids: set[str]) -> list[ObjectRef]:
        for look in range(_STOP_LOOKS if ids else 1):
            if look:
                time.sleep(_STOP_PAUSE)
            live = [o.ref for o in self.find(job).objects if o.ref.id in ids and o.state.live]
            if not live:
                return []
        return live

    # -- looks -----------------------------------------------------------------------------

    def find(self, job: JobID) -> Discovery:
        """Every TrainJob with the job's label in the namespaces searched."""
        return self.find_many([job])[job]

    def find_many(
        self, jobs: Sequence[JobID], states: Sequence[ObjectState] = ()
    ) -> dict[JobID, Discovery]:
        """A Discovery for every job asked, from one LIST of TrainJobs per namespace (and one
        of Workloads and one of pods where TrainJobs were found)."""
        by_label: dict[str, list[JobID]] = {}
        for job in jobs:
            by_label.setdefault(render.job_label(job), []).append(job)
        selector = (
            f"{render.LABEL_JOB}={render.job_label(jobs[0])}"
            if len(jobs) == 1
            else render.LABEL_JOB
        )
        found: dict[JobID, list[ObjectObs]] = {job: [] for job in jobs}
        for ns in self.settings.searched:
            for facts in self._facts(ns, selector):
                for job in by_label.get(facts.label, []):
                    if facts.job in ("", job):
                        obs = observe(facts, self.settings.gate, self.user, object_name(job))
                        if not states or obs.state in states:
                            found[job].append(obs)
        return {
            job: Discovery(objects=tuple(objs), complete=not states) for job, objs in found.items()
        }

    def _facts(self, ns: str, selector: str) -> list[parse.TrainJobFacts]:
        trainjobs = self.api.list_trainjobs(ns, selector)
        if not trainjobs:
            return []
        workloads = parse.workloads_by_owner(self.api.list_workloads(ns))
        pods = parse.pods_by_trainjob(self.api.list_pods(ns, parse.JOBSET_NAME))
        facts = [parse.trainjob_facts(tj, workloads, pods) for tj in trainjobs]
        for f in facts:
            self.keep_ended(f)
        return facts

    def keep_ended(self, f: parse.TrainJobFacts) -> None:
        """Keep a preempted TrainJob of this user's ended: Kueue requeues an evicted workload
        and would admit it again, a second execution of one submission with the same
        ``DISPATCH_EPOCH`` that nobody decided (on Slurm, ``--no-requeue`` rules this out at
        creation; Kueue has no such setting). Deactivating its Workload is the one write a look
        makes; it changes nothing the look reports (the object stays ended, preempted)."""
        wl = f.workload
        ours = f.user == self.user and f.submission is not None and f.attempt is not None
        if not ours or wl is None or not wl.active:
            return
        if state_line(f, self.settings.gate).when != "evicted: Preempted":
            return
        try:
            self.api.patch_workload(f.namespace, wl.name, render.DEACTIVATE)
        except DispatchError as err:  # the next look tries again
            log.warning("keeping %s ended: %s", f.id, err)

    def output(self, job: JobID, submission: int, stream: str = "stdout") -> IO[bytes]:
        """What submission ``submission`` of ``job`` wrote: the log of its TrainJob's first
        pod (the first node's, where rank 0 runs), as a Slurm job's output is its batch
        step's on the first node. A pod's log holds stdout and stderr together."""
        if stream != "stdout":
            raise UnsupportedError(
                "a pod's log holds its stdout and stderr together: leave out --stderr"
            )
        # The TrainJobs of that submission alone: their own facts say which are this user's.
        selector = (
            f"{render.LABEL_JOB}={render.job_label(job)},{render.LABEL_SUBMISSION}={submission}"
        )
        mine = []
        for searched in self.settings.searched:
            for tj in self.api.list_trainjobs(searched, selector):
                f = parse.trainjob_facts(tj, {}, {})
                if f.user == self.user and f.job in ("", job) and f.attempt is not None:
                    mine.append(f)
        if not mine:
            raise NotFoundError(f"job {job} has no TrainJob of submission {submission} now")
        last = max(mine, key=lambda f: f.attempt or 0)
        ns, name = last.namespace, last.name
        pods = self.api.list_pods(ns, f"{parse.JOBSET_NAME}={name}")
        if not pods:
            raise NotFoundError(
                f"TrainJob {ns}/{name} has no pod now (never started, or its pods are gone, "
                "and their logs with them)"
            )
        first = min(pods, key=parse.pod_order)
        return io.BytesIO(self.api.read_pod_log(ns, first["metadata"]["name"]))

    def inspect(self, ref: ObjectRef) -> ObjectObs:
        """One TrainJob as the cluster shows it now."""
        ns, name = _split(ref)
        tj = self.api.get_trainjob(ns, name)
        workloads = parse.workloads_by_owner(self.api.list_workloads(ns))
        pods = parse.pods_by_trainjob(self.api.list_pods(ns, f"{parse.JOBSET_NAME}={name}"))
        facts = parse.trainjob_facts(tj, workloads, pods)
        self.keep_ended(facts)
        return observe(facts, self.settings.gate, self.user, ref.name or object_name(facts.job))


def _split(ref: ObjectRef) -> tuple[str, str]:
    ns, sep, name = ref.id.partition("/")
    if not sep or not ns or not name:
        raise InvalidError(f"object id {ref.id!r} is not <namespace>/<TrainJob name>")
    return ns, name
