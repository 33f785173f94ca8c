"""Offering escalations to a channel, and recording what happened to each.

A channel that returns delivered the escalation: the record says so, and through which channel.
One that raises did not: the record keeps its error (once per channel and error, so a channel
down for a day writes one entry, not one a pass), and the escalation is offered again after the
next pass, whether or not its job has settled since (a settled job's are found through the
ledger's outbox). With no channel configured an escalation is written to the supervisor's log
and recorded as logged only: nobody was told, and a channel configured later still delivers it.

The backoff: once the channel has failed ``RESTING_AFTER`` offers in a row, it rests for the
rest of the sweep (or ``run``'s pass), and what was not offered waits for the next one; so a
channel that is down costs a tick at most that many timeouts, and is tried again at each tick.
No offer starts once the sweep's time limit has come, and a built-in channel's offer is cut
short at it (``Timed.within``).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Protocol, Self, runtime_checkable

from dispatch.clock import Clock
from dispatch.core.fold import fold
from dispatch.core.job import Job
from dispatch.core.waits import owed
from dispatch.model.errors import ConflictError, message_of
from dispatch.model.record import LOGGED_ONLY, DeliveredEntry, DeliveryFailedEntry
from dispatch.model.status import Escalation
from dispatch.model.values import Actor, JobID
from dispatch.printable import printable
from dispatch.records.contract import Records

log = logging.getLogger("dispatch.supervise")

Deliver = Callable[[JobID, Escalation], None]
"""Receives one escalation; returning without an exception means it reached a person."""

# How often a delivery's record is retried when other commits race it.
DELIVERY_RETRIES = 4
# Failed offers in a row after which the channel rests until the next sweep: two, so that one
# escalation the channel refuses by itself does not hold back the others.
RESTING_AFTER = 2
# The most of a channel's error kept in the record.
ERROR_KEPT = 300


@runtime_checkable
class Channel(Protocol):
    """A ``Deliver`` that names itself for people in ``via`` (``mail to ops@example.org``)."""

    via: str

    def __call__(self, job: JobID, escalation: Escalation) -> None:
        """Deliver ``escalation``; raise unless it reached a person."""


class Timed:
    """A built-in channel: one delivery is bounded by ``timeout``, which ``within`` cuts."""

    timeout: timedelta

    def within(self, limit: timedelta) -> Self:
        """This channel with its timeout cut to ``limit`` (what a sweep's time limit leaves)."""
        if limit >= self.timeout:
            return self
        cut = copy.copy(self)
        cut.timeout = limit
        return cut


def message(job: JobID, escalation: Escalation) -> str:
    """What a person reads of an escalation: the job, the id, when, why, where to answer."""
    at = escalation.at.strftime("%Y-%m-%d %H:%M:%S UTC")
    return (
        f"dispatch job {job}: escalation {escalation.id} at {at}: {escalation.detail}\n"
        f"To see it and how to answer it: dispatch escalations {job}"
    )


def _logged_only(job: JobID, escalation: Escalation) -> None:
    # The detail holds people's text (reasons, --as ids): escaped before it reaches a log.
    shown = printable(escalation.detail)
    log.warning("job %s: escalation %s: %s", job, printable(escalation.id), shown)


class Deliveries:
    """The escalations of one supervisor's passes: offered to its channel, outcomes recorded."""

    def __init__(self, store: Records, clock: Clock, actor: Actor, deliver: Deliver | None) -> None:
        self.store, self.clock, self.actor = store, clock, actor
        self.deliver: Deliver = deliver or _logged_only
        self.via = (
            LOGGED_ONLY
            if deliver is None
            else (deliver.via if isinstance(deliver, Channel) else "")
        )
        # Failures kept back while a pass is between its decisions (its last look before a
        # settle), so that recording them cannot move the record under the settle commit.
        self.held: list[tuple[JobID, str, str]] | None = None
        # No offer starts at or after it (a sweep's time limit), and a timed channel's is cut.
        self.deadline: datetime | None = None
        # Failed offers in a row since the last success (or ``rest_over``).
        self.failing = 0

    @property
    def resting(self) -> bool:
        """Whether the channel rests until the next sweep: it failed too often in a row."""
        return self.failing >= RESTING_AFTER

    def rest_over(self, deadline: datetime | None = None) -> None:
        """A new sweep (or pass of ``run``) begins: the channel is offered again, until
        ``deadline``."""
        self.failing, self.deadline = 0, deadline

    def _channel_now(self) -> Deliver | None:
        """The channel for the next offer, cut to the time left; None when no offer may
        start (the channel rests, or the time limit came)."""
        if self.resting:
            return None
        if self.deadline is None:
            return self.deliver
        left = self.deadline - self.clock.now()
        if left <= timedelta(0):
            return None
        return self.deliver.within(left) if isinstance(self.deliver, Timed) else self.deliver

    def owed(self, j: Job) -> list[Escalation]:
        """The escalations of ``j`` to offer: not delivered, not answered since, and (with no
        channel) not logged."""
        return owed(j, logged_count=self.via == LOGGED_ONLY)

    def offer(self, job: JobID, escalations: Sequence[Escalation]) -> None:
        """Offer each escalation once, and record what happened; those the channel's rest or
        the time limit leaves are offered by a later sweep."""
        for e in escalations:
            deliver = self._channel_now()
            if deliver is None:
                return
            try:
                deliver(job, e)
            except Exception as err:  # noqa: BLE001 - any failure means "offer it again"
                self.failing += 1
                shown = printable(str(err))
                log.warning("job %s: delivering %s failed, offered again: %s", job, e.id, shown)
                said = message_of(err)
                error = said[:ERROR_KEPT] or type(err).__name__
                if self.held is not None:
                    self.held.append((job, e.id, error))
                else:
                    self._record(job, e.id, error)
                continue
            self.failing = 0
            self._record(job, e.id, None)

    @contextmanager
    def holding_failures(self) -> Iterator[None]:
        """Keep back the failures of the offers made inside; record them on leaving."""
        self.held = []
        try:
            yield
        finally:
            held, self.held = self.held, None
            for job, escalation_id, error in held:
                self._record(job, escalation_id, error)

    def _record(self, job: JobID, escalation_id: str, error: str | None) -> None:
        for _ in range(DELIVERY_RETRIES):
            view = self.store.read(job)
            known = fold(view, self.clock.now()).escalations.get(escalation_id)
            if known is None or known.delivered is not None:
                return
            at, by = self.clock.now(), self.actor
            if error is None:
                if self.via == LOGGED_ONLY and known.logged is not None:
                    return
                entry: DeliveredEntry | DeliveryFailedEntry = DeliveredEntry(
                    at=at, by=by, id=escalation_id, via=self.via
                )
            else:
                last = known.failed
                if last is not None and (last.via, last.error) == (self.via, error):
                    return
                entry = DeliveryFailedEntry(
                    at=at, by=by, id=escalation_id, via=self.via, error=error
                )
            try:
                self.store.commit(job, [entry], view.revision)
                return
            except ConflictError:
                continue
        log.warning(
            "job %s: could not record the delivery of %s; it may be offered again",
            job,
            escalation_id,
        )
