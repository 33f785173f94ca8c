"""A Cluster: an adapter's backend composed with the core and a record store.

``compose`` takes a backend you built; ``open`` finds an adapter by its registered name
(``register`` in-process, or the ``dispatch.adapters`` entry point group). A cluster has an
Observer always, a Stopper unless read-only, and an Operator only with a store and not
read-only: every operator action is recorded.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from dispatch.clock import Clock, SystemClock
from dispatch.core.fold import fold
from dispatch.core.object_level import project_objects
from dispatch.core.project import project
from dispatch.model.enums import State
from dispatch.model.errors import (
    AlreadyRegisteredError,
    NotFoundError,
    ReadOnlyError,
    UnavailableError,
    UnsupportedError,
)
from dispatch.model.objects import StopReport
from dispatch.model.status import Status
from dispatch.model.values import Actor, JobID, JobSpec
from dispatch.records.contract import Records
from dispatch.spi import Backend, OutputReader, find_all

if TYPE_CHECKING:  # imported where a cluster gets one: a reading command has no operator
    from dispatch.operator import Operator

Factory = Callable[[dict[str, Any]], Backend]

# The adapters dispatch ships, found without reading the installed distributions' entry points
# (which costs a command's start-up a scan of every distribution); the ``dispatch.adapters``
# group names them too, beside any other package's adapters.
BUILT_IN = {
    "memory": "dispatch.adapters.memory",
    "slurm": "dispatch.adapters.slurm",
    "kubeflow": "dispatch.adapters.kubeflow",
}

_registry: dict[str, Factory] = {}
_registry_mu = threading.Lock()


def register(name: str, factory: Factory) -> None:
    """Make an adapter available to ``open`` under ``name``; a taken name is refused."""
    with _registry_mu:
        if name in _registry or name in BUILT_IN or name in _entry_point_names():
            raise AlreadyRegisteredError(f"an adapter named {name!r} is already registered")
        _registry[name] = factory


def _entry_point_names() -> set[str]:
    from importlib.metadata import entry_points

    return {ep.name for ep in entry_points(group="dispatch.adapters")}


def adapter_names() -> list[str]:
    """The names of every registered adapter, sorted.

    (Named so because ``dispatch.adapters`` is the package the adapters live in.)
    """
    with _registry_mu:
        return sorted(set(_registry) | set(BUILT_IN) | _entry_point_names())


def new_backend(name: str, settings: dict[str, Any] | None = None) -> Backend:
    """Build the named adapter's backend from its settings."""
    with _registry_mu:
        factory = _registry.get(name)
    if factory is None and name in BUILT_IN:
        factory = importlib.import_module(BUILT_IN[name]).factory
    if factory is None:
        from importlib.metadata import entry_points

        found = [ep for ep in entry_points(group="dispatch.adapters") if ep.name == name]
        if not found:
            known = ", ".join(adapter_names()) or "none"
            raise NotFoundError(f"no adapter named {name!r}; registered: {known}")
        factory = found[0].load()
    return factory(dict(settings or {}))


@dataclass
class Config:
    """What a cluster is composed with."""

    store: Records | None = None
    read_only: bool = False
    rand: Callable[[int], bytes] = os.urandom
    clock: Clock = field(default_factory=SystemClock)
    settings: dict[str, Any] = field(default_factory=dict)


class Observer:
    """Reads jobs: their status from the record and what the scheduler shows."""

    def __init__(self, backend: Backend, store: Records | None, clock: Clock) -> None:
        self._backend, self._store, self._clock = backend, store, clock

    def capabilities(self, spec: JobSpec | None = None) -> dict[Any, Any]:
        """What the cluster supports, for ``spec`` when given."""
        return dict(self._backend.capabilities(spec))

    def _records(self) -> Records:
        if self._store is None:
            raise UnavailableError("reading a job's status needs a record store")
        return self._store

    def get(self, job: JobID) -> Status:
        """The job's status now: read the record, then look at the scheduler. Without a
        record store, the job as the scheduler alone shows it (level ``object-only``)."""
        if self._store is None:
            found = project_objects(job, self._backend.find(job))
            if found is None:
                raise NotFoundError(
                    f"the scheduler shows no object of job {job}, and there is no record store "
                    "to read it from"
                )
            return found
        view = self._store.read(job)
        d = self._backend.find(job)
        now = self._clock.now()
        return project(fold(view, now), d, now)

    def output(self, job: JobID, submission: int = 0, stream: str = "stdout") -> IO[bytes]:
        """What submission ``submission`` (0: the latest) of ``job`` wrote on ``stream``, where
        the cluster can read it; ``UnsupportedError`` where it cannot."""
        if not isinstance(self._backend, OutputReader):
            raise UnsupportedError("this cluster cannot read a job's output")
        if submission == 0:
            latest = fold(self._records().read(job), self._clock.now()).latest()
            if latest is None:
                raise NotFoundError(f"job {job} has no submission yet, so no output")
            submission = latest.n
        return self._backend.output(job, submission, stream)

    def list(self, states: tuple[State, ...] = (), settled: bool = False) -> list[Status]:
        """Every job's status (unsettled ones unless ``settled``), filtered by ``states``."""
        store = self._records()
        jobs = store.jobs(include_settled=settled)
        views = {j: store.read(j) for j in jobs}
        found = find_all(self._backend, jobs)
        now = self._clock.now()
        out = [project(fold(views[j], now), found[j], now) for j in jobs]
        return [s for s in out if not states or s.state in states]


class Stopper:
    """The emergency stop: stops every object of a job by name; needs and writes no record."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend

    def emergency_stop(self, job: JobID, by: Actor, reason: str) -> StopReport:
        """Stop every object named for ``job``; recovery may still happen afterwards."""
        return self._backend.stop_job(job, f"emergency stop by {by}: {reason}")


class Cluster:
    """An adapter's backend composed with the core."""

    def __init__(self, backend: Backend, config: Config) -> None:
        self.backend = backend
        self.config = config
        self.observer = Observer(backend, config.store, config.clock)
        self._stopper = None if config.read_only else Stopper(backend)
        self._operator: Operator | None = None
        if not config.read_only and config.store is not None:
            from dispatch.operator import Operator

            self._operator = Operator(backend, config.store, config.clock, config.rand)

    @property
    def operator(self) -> Operator:
        """The Operator; ``ReadOnlyError`` or ``UnavailableError`` when there is none."""
        if self._operator is None:
            if self.config.read_only:
                raise ReadOnlyError("the cluster was opened read-only; it has no operator")
            raise UnavailableError("the cluster has no record store, so no operator")
        return self._operator

    @property
    def stopper(self) -> Stopper:
        """The Stopper; ``ReadOnlyError`` when the cluster is read-only."""
        if self._stopper is None:
            raise ReadOnlyError("the cluster was opened read-only; it has no stopper")
        return self._stopper

    def close(self) -> None:
        """Close the backend."""
        self.backend.close()


def compose(backend: Backend, config: Config | None = None) -> Cluster:
    """Compose the core over a backend you built."""
    return Cluster(backend, config or Config())


def open(name: str, config: Config | None = None) -> Cluster:  # noqa: A001 - the API's name
    """Compose the core over the adapter registered as ``name``."""
    config = config or Config()
    return Cluster(new_backend(name, config.settings), config)
