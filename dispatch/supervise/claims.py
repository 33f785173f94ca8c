"""A sweep's claims of a sharded store's shards, and what a round of claims does with each.

A sweep over a sharded store (the file ledger) claims the unsettled jobs shard by shard and
notes each claimed job's revision; the scheduler is then asked once about the jobs noted, and
each gets its pass on the record at that revision. With a time limit it claims in rounds, each
looked at and passed before the next (``peek_until``). What a round does with a shard is one
table, ``SHARD_TABLE``, read over the facts of the shard as the round comes to it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from dispatch.clock import Clock
from dispatch.model.errors import DispatchError, NotFoundError
from dispatch.model.values import JobID
from dispatch.records.contract import Sharded
from dispatch.spi import Backend, find_all
from dispatch.supervise.memo import SweepMemos, Waited
from dispatch.supervise.report import Seen, SweepReport, describe

log = logging.getLogger("dispatch.supervise")

# The share of the time a sweep has left that it spends noting revisions before it looks and
# passes what it noted: a cold pass costs ten times a noting, so the passes get the rest.
PEEK_SHARE = 8


def peek_until(now: datetime, deadline: datetime | None) -> datetime | None:
    """Until when a sweep notes revisions before it looks and passes them: without a time
    limit, until every job is noted (one look); with one, for ``1 / PEEK_SHARE`` of the time
    left, so that a cold sweep whose reads alone would outlast its limit still passes jobs,
    and a warm one, whose notes are quick, still looks once."""
    return None if deadline is None else now + (deadline - now) / PEEK_SHARE


class Claims:
    """A sweep's claims of a sharded store's shards: the unsettled jobs of each shard, the
    order the shards are claimed in (from a random one on, so two sweepers that start together
    split them), the shards claimed (``claimed``, given back when the sweep ends) and refused,
    and the jobs whose revision was noted or that the time limit left."""

    def __init__(self, store: Sharded, token: str, claimed: list[int], jobs: list[JobID]) -> None:
        self.store, self.token, self.claimed = store, token, claimed
        self.members: dict[int, list[JobID]] = {}
        for job in jobs:
            self.members.setdefault(store.shard_of(job), []).append(job)
        start = int(token, 16) % store.shards  # the token is random: so is where it starts
        self.order = [(start + i) % store.shards for i in range(store.shards)]
        self.held: set[int] = set()
        self.refused: set[int] = set()
        self.noted: set[JobID] = set()


def first_pick(
    claims: Claims,
    memos: SweepMemos | None,
    backend: Backend,
    deadline: datetime | None,
    want: bool | None,
) -> set[JobID]:
    """The unsettled jobs whose shards a sweep claims, reads and passes before the others:
    those a look at the scheduler before any claim shows something of that a pass may act
    on (an ending, a requeue, an object gone, nothing at all); none when the sweep goes in
    one part.

    A pass decides on a record read before its look, so this look decides nothing: the
    jobs it picks are read, looked at again and passed, then the others. It costs one more
    question to the scheduler, so it is asked only when the time limit could cut the passes
    before the usual read of every record ends: with a time limit, and the memo cold (the
    first sweep, a lost memo, an upgrade that changed the decisions), when that read lists
    each job's folder. A warm sweep reads the memo instead and already passes first the
    jobs it does not know.

    ``want``: True and False force the look; None decides as above."""
    if want is None:
        want = deadline is not None and memos is not None and memos.cold(claims.members)
    if not want or not claims.members:
        return set()
    jobs = [job for members in claims.members.values() for job in members]
    try:
        found = find_all(backend, jobs)
    except DispatchError as err:
        log.warning("the first look failed; the sweep reads every job first: %s", err)
        return set()
    first = {job for job in jobs if not found[job].quiet}
    return first if len(first) < len(jobs) else set()


class ShardFact(Enum):
    """What holds of a shard when a round of claims comes to it."""

    NOTHING_TO_NOTE = "nothing of it to note"
    ROUND_FULL = "the round noted a shard and its time or its count of shards is up"
    PAST_DEADLINE = "the time limit has come"
    HELD = "this sweep claimed it already"


class ShardAnswer(Enum):
    """What a round of claims does with a shard."""

    SKIP = "skip it"
    LEAVE = "leave it, and every shard after it, to the next round"
    NOT_REACHED = "report its jobs not reached"
    NOTE_AGAIN = "note its jobs, their upstream records stamped anew"
    CLAIM = "claim it and note its jobs; refused, report them skipped"


@dataclass(frozen=True)
class ShardCase:
    """One line of the shard table: the facts that must hold, and what the round does."""

    when: tuple[ShardFact, ...]
    then: ShardAnswer


S, A = ShardFact, ShardAnswer

# What a round of claims does with each shard, in the claims' order: the first row whose
# facts all hold. Rules:
# * A shard with nothing to note (no job of the part, refused, or every job noted) is skipped
#   and costs nothing: not even a look at the clock.
# * A round takes on one shard at least; once it noted one, and its time (``until``) or its
#   count of shards (``shards_per_look``) is up, it leaves the rest for the next round.
# * Past the time limit no pass would start: the shard is not claimed, its jobs are reported
#   not reached and counted as noted, and the next tick notes them.
# * A shard this sweep holds is noted without a claim, its upstream stamps taken anew (a pass
#   of this sweep may have moved them); any other is claimed first, and one another sweeper
#   holds is skipped with its jobs, so two sweepers that start together split the shards.
SHARD_TABLE: tuple[ShardCase, ...] = (
    ShardCase((S.NOTHING_TO_NOTE,), A.SKIP),
    ShardCase((S.ROUND_FULL,), A.LEAVE),
    ShardCase((S.PAST_DEADLINE,), A.NOT_REACHED),
    ShardCase((S.HELD,), A.NOTE_AGAIN),
    ShardCase((), A.CLAIM),
)


def answer(facts: frozenset[ShardFact]) -> ShardAnswer:
    """What the first row of ``SHARD_TABLE`` that ``facts`` match says."""
    return next(row.then for row in SHARD_TABLE if facts.issuperset(row.when))


class ClaimRound:
    """One round of claims: claim the shards of the part (``only``: just those jobs; else
    every job not noted yet) and note each claimed job's revision, until ``until`` comes or
    ``per_look`` shards were taken on (one at least is). Nothing stays open per job."""

    def __init__(
        self,
        claims: Claims,
        report: SweepReport,
        memos: SweepMemos | None,
        clock: Clock,
        deadline: datetime | None,
        until: datetime | None,
        per_look: int | None,
        only: set[JobID] | None,
    ) -> None:
        self.claims, self.report, self.memos, self.clock = claims, report, memos, clock
        self.deadline, self.until, self.per_look, self.only = deadline, until, per_look, only
        self.peeked: dict[JobID, int] = {}
        self.taken = 0

    def run(self, seen: dict[JobID, Seen]) -> bool:
        """Take each shard as ``SHARD_TABLE`` says, adding the revisions noted to ``seen``;
        True when some shards were left for the next round."""
        left = False
        for shard in self.claims.order:
            members = self._members(shard)
            then = answer(self._facts(shard, members))
            if then is ShardAnswer.LEAVE:
                left = True
                break
            if then is not ShardAnswer.SKIP:
                self.taken += 1
                _DO[then](self, shard, members)
        seen.update(sorted(self.peeked.items()))
        self.report.skipped.sort()
        self.report.not_reached.sort()
        return left

    def _members(self, shard: int) -> list[JobID]:
        """The jobs of ``shard`` this round is to note."""
        claims = self.claims
        members = claims.members.get(shard)
        if not members or shard in claims.refused:
            return []
        if self.only is not None:
            members = [job for job in members if job in self.only]
        if claims.noted:
            members = [job for job in members if job not in claims.noted]
        return members

    def _facts(self, shard: int, members: list[JobID]) -> frozenset[ShardFact]:
        """The facts of ``shard``: with nothing to note, that alone (the first row takes it)."""
        if not members:
            return frozenset({S.NOTHING_TO_NOTE})
        timed = self.deadline is not None or self.until is not None
        now = self.clock.now() if timed else None
        facts: set[ShardFact] = set()
        if self.peeked and self._up(now):
            facts.add(S.ROUND_FULL)
        if now is not None and self.deadline is not None and now >= self.deadline:
            facts.add(S.PAST_DEADLINE)
        if shard in self.claims.held:
            facts.add(S.HELD)
        return frozenset(facts)

    def _up(self, now: datetime | None) -> bool:
        """Whether the round's time or its count of shards is up."""
        if now is not None and self.until is not None and now >= self.until:
            return True
        return self.per_look is not None and self.taken >= self.per_look

    def _not_reached(self, shard: int, members: list[JobID]) -> None:
        # Claimed or not, no pass would start: the next tick notes them.
        self.report.not_reached.extend(members)
        self.claims.noted.update(members)

    def _note_again(self, shard: int, members: list[JobID]) -> None:
        memos = self.memos
        recalled = memos.recalled.get(shard, {}) if memos is not None else {}
        if memos is not None:
            # Its upstream records are stamped anew: a pass of this sweep may have moved
            # them since the shard was claimed.
            memos.restamp()
        self._note(members, recalled)

    def _claim(self, shard: int, members: list[JobID]) -> None:
        claims = self.claims
        if not claims.store.claim(shard, claims.token):
            claims.refused.add(shard)
            self.report.skipped.extend(claims.members[shard])
            return
        claims.held.add(shard)
        claims.claimed.append(shard)
        recalled = self.memos.recall(shard) if self.memos is not None else {}
        self._note(members, recalled)

    def _note(self, members: list[JobID], recalled: dict[JobID, Waited]) -> None:
        """Note each job's revision: a job the memo says waits needs only that its record has
        not moved; a job being created (no header yet), or settled and gone since, is left."""
        for job in members:
            self.claims.noted.add(job)
            try:
                self.peeked[job] = self._revision(job, recalled.get(job))
            except NotFoundError:
                continue
            except Exception as err:  # noqa: BLE001 - one job's trouble must not stop it
                self.report.failed[job] = describe(err)

    def _revision(self, job: JobID, waited: Waited | None) -> int:
        """The revision to note of ``job``: its memo entry's, while the record and the
        upstream records it names have not moved (a candidate for a pass remembered)."""
        memos, store = self.memos, self.claims.store
        if (
            waited is not None
            and memos is not None
            and store.stamp_at(job, waited.revision) == waited.stamp
            and memos.unmoved(waited)
        ):
            memos.candidates[job] = waited
            return waited.revision
        return store.revision(job)


# How a round carries out each of the table's answers that take a shard on.
_DO: dict[ShardAnswer, Callable[[ClaimRound, int, list[JobID]], None]] = {
    ShardAnswer.NOT_REACHED: ClaimRound._not_reached,
    ShardAnswer.NOTE_AGAIN: ClaimRound._note_again,
    ShardAnswer.CLAIM: ClaimRound._claim,
}
