"""The verbs that act on a job: one per action of the Operator.

Each names its actor (``human:$USER`` unless ``--as KIND:ID``), is recorded by the Operator,
and prints one line: what was done, and what happens next. A refusal is one line saying why
and what to do instead, exit 1; bad input (a bad ``--as``, an ambiguous job) exit 2, with
nothing recorded. ``abandon`` and the emergency stop are in ``dispose``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from dispatch.cli.refs import complete_job, resolve, resolve_all
from dispatch.cli.render import clean, when
from dispatch.cli.session import (
    DURATION,
    Session,
    actor_option,
    config_option,
    echo_json,
    json_option,
    me,
    progress,
    refusals,
)
from dispatch.cluster import Cluster, Config, compose
from dispatch.core.fold import fold
from dispatch.core.job import Job
from dispatch.core.requests import Verb
from dispatch.model.array import task_of
from dispatch.model.errors import RejectedError, RepeatedError
from dispatch.model.values import Actor, JobID
from dispatch.operator import asked

F = Callable[..., Any]


def _verb(name: str, example: str) -> Callable[[F], click.Command]:
    """A verb's command with the options every verb has, and an example in its help."""

    def wrap(f: F) -> click.Command:
        doc = (f.__doc__ or "").rstrip() + f"\n\n\b\nExample:\n  $ {example}\n"
        f.__doc__ = doc
        f = json_option(actor_option(config_option(f)))
        f = click.argument("job", shell_complete=complete_job)(f)
        return click.command(name=name)(f)

    return wrap


def reason_option(f: F) -> F:
    """The ``--reason``/``-m`` option: why, for the record."""
    return click.option("--reason", "-m", default="", help="Why, for the record.")(f)


class Acting:
    """One verb's session: the cluster over the existing ledger, the job, and the actor.
    With ``whole``, a reference may name a whole array: ``jobs`` are then its tasks."""

    def __init__(
        self, config: str | None, ref: str, actor: Actor | None, *, whole: bool = False
    ) -> None:
        self.session = Session(config)
        self.cluster: Cluster = compose(self.session.backend, Config(store=self.session.ledger))
        ledger = self.session.ledger
        self.jobs: list[JobID] = resolve_all(ledger, ref) if whole else [resolve(ledger, ref)]
        group = task_of(self.jobs[0]) if len(self.jobs) > 1 else None
        # The job acted on, or the array's group id.
        self.job: JobID = group[0] if group is not None else self.jobs[0]
        self.by = actor or me()

    @property
    def array(self) -> bool:
        """Whether the reference named a whole array."""
        return len(self.jobs) > 1

    def folded(self) -> Job:
        """The job's record, folded now."""
        return fold(self.session.ledger.read(self.job), datetime.now(UTC))


def done(as_json: bool, act: Acting, action: str, line: str, **more: Any) -> None:
    """Print what a verb did: its one line, or with ``--json`` the line and its details."""
    if as_json:
        echo_json({"job": act.job, "action": action, "by": str(act.by), "message": line, **more})
    else:
        click.echo(clean(line))


@_verb("hold", "dispatch hold 7f3k --for 2h --reason 'dataset being rebuilt'")
@reason_option
@click.option("--for", "hold_for", type=DURATION, default=None, help="Hold's deadline from now.")
def hold(
    config: str | None,
    actor: Actor | None,
    as_json: bool,
    job: str,
    reason: str,
    hold_for: timedelta | None,
) -> None:
    """Hold JOB: nothing of it starts or opens until the hold is released.

    With --for, the hold has a deadline; past it, it stays in force and escalates
    overdue:<instance> for a person. JOB may name an array (its group id): every task not
    over yet is held, each with its own hold (release one with GROUP:INDEX).
    """
    with refusals():
        act = Acting(config, job, actor, whole=True)
        until = datetime.now(UTC) + hold_for if hold_for else None
        if act.array:
            _hold_array(as_json, act, reason, until)
            return
        instance = act.cluster.operator.hold(act.job, act.by, reason, until)
    deadline = f" until {when(until)} UTC" if until else ""
    done(
        as_json,
        act,
        "hold",
        f"hold {instance} placed on job {act.job}{deadline}; nothing of it starts or opens "
        f"until `dispatch release {act.job}` (what runs keeps running; the next sweep holds "
        "what is queued)",
        instance=instance,
        until=until.isoformat() if until else None,
    )


def _hold_array(as_json: bool, act: Acting, reason: str, until: datetime | None) -> None:
    """Hold every task of the array that is not over; refused when none is left to hold."""
    held: dict[JobID, int] = {}
    # Last task first: a waiting task is held before a task ahead of it can free its place.
    for gone, job in enumerate(reversed(act.jobs), start=1):
        try:
            held[job] = act.cluster.operator.hold(job, act.by, reason, until)
        except RejectedError:
            continue  # a task that ended or settled has nothing left to hold
        finally:
            progress(gone, len(act.jobs), "holding")
    if not held:
        raise RejectedError(f"array {act.job}: every task is over; nothing to hold")
    over = len(act.jobs) - len(held)
    done(
        as_json,
        act,
        "hold",
        f"held {len(held)} tasks of array {act.job}"
        + (f" ({over} over already)" if over else "")
        + "; nothing of them starts or opens until released with "
        f"`dispatch release {act.job}` (one task: `dispatch release {act.job}:INDEX`)",
        holds={j: i for j, i in held.items()},
        until=until.isoformat() if until else None,
    )


@_verb("release", "dispatch release 7f3k")
@click.option(
    "--override", is_flag=True, help="Release a hold someone else placed (the record notes it)."
)
def release(
    config: str | None, actor: Actor | None, as_json: bool, job: str, override: bool
) -> None:
    """Release the hold in force on JOB, so it may run again.

    A hold someone else placed needs --override. A recovery hold (placed by a hold rule after
    an execution ended) is never released: answer it with resubmit, cancel or give-up.
    JOB may name an array (its group id): the hold of every task held is released.
    """
    with refusals():
        act = Acting(config, job, actor, whole=True)
        if act.array:
            _release_array(as_json, act, override)
            return
        j = act.folded()
        asked(j, Verb.RELEASE, act.by)
        h = j.active_hold()
        assert h is not None, "the request table accepts a release of a hold in force"
        if h.hold.by != act.by and not override:
            raise RejectedError(
                f"hold {h.instance} of job {act.job} was placed by {h.hold.by}; release it "
                "anyway with --override (the record notes the override)"
            )
        act.cluster.operator.release(act.job, act.by)
    noted = f" (overriding {h.hold.by})" if h.hold.by != act.by else ""
    done(
        as_json,
        act,
        "release",
        f"hold {h.instance} of job {act.job} released{noted}; the next sweep lets it run",
        instance=h.instance,
        override=h.hold.by != act.by,
    )


def _release_one(
    act: Acting, job: JobID, now: datetime, override: bool, others: list[JobID], kept: list[str]
) -> int | None:
    """Release the hold of one task of the array when this person may; the instance released,
    or None (noted in ``others`` when someone else's hold is kept, in ``kept`` for a recovery
    hold)."""
    j = fold(act.session.ledger.read(job), now)
    try:
        asked(j, Verb.RELEASE, act.by)
    except RepeatedError:
        return None  # no hold in force: nothing to release
    except RejectedError as err:
        h = j.active_hold()
        if h is not None and h.recovery:
            kept.append(err.message)  # a recovery hold: answered otherwise
        return None  # else a task that is over (cancelled, ended): nothing to release
    h = j.active_hold()
    assert h is not None, "the request table accepts a release of a hold in force"
    if h.hold.by != act.by and not override:
        others.append(job)
        return None
    try:
        act.cluster.operator.release(job, act.by)
    except RepeatedError:
        return None  # released by someone else meanwhile
    return h.instance


def _release_array(as_json: bool, act: Acting, override: bool) -> None:
    """Release the hold of every task that has one this person may release; refused when no
    task has."""
    released: dict[JobID, int] = {}
    others: list[JobID] = []
    kept: list[str] = []
    now = datetime.now(UTC)
    for gone, job in enumerate(act.jobs, start=1):
        try:
            instance = _release_one(act, job, now, override, others, kept)
        finally:
            progress(gone, len(act.jobs), "releasing")
        if instance is not None:
            released[job] = instance
    if not released:
        why = (
            f"{len(others)} held by someone else (release them anyway with --override)"
            if others
            else "none is held"
            if not kept
            else f"{len(kept)} with a recovery hold, which resubmit, cancel or give-up answer"
        )
        raise RejectedError(f"array {act.job}: no task's hold released: {why}")
    n, s = len(released), "s" if len(released) != 1 else ""
    line = f"released the hold{s} of {n} task{s} of array {act.job}"
    if others:
        line += f" ({len(others)} held by someone else kept: release them with --override)"
    if kept:
        line += f" ({len(kept)} recovery holds kept: answer each with resubmit, cancel or give-up)"
    done(
        as_json,
        act,
        "release",
        line + "; the next sweep lets them run",
        released=released,
        kept_held_by_others=others,
        recovery_holds=kept,
    )


@_verb("cancel", "dispatch cancel 7f3k --reason 'wrong config'")
@reason_option
def cancel(config: str | None, actor: Actor | None, as_json: bool, job: str, reason: str) -> None:
    """Cancel JOB: the cancel is committed first, then what runs is stopped.

    The cancel is final once committed; stopping may lag, and the next sweeps check it.
    JOB may name an array (its group id): every task not over yet is cancelled.
    """
    with refusals():
        act = Acting(config, job, actor, whole=True)
        if act.array:
            _cancel_array(as_json, act, reason)
            return
        receipt = act.cluster.operator.cancel(act.job, act.by, reason)
        if not receipt.committed:
            raise RepeatedError(receipt.line, holds=receipt.holds)
    live = [r.id for r in receipt.live]
    if live:
        n = len(live)
        cleanup = (
            f"{n} object{'s' if n != 1 else ''} still alive ({', '.join(live)}), "
            "checked again next sweep"
        )
    else:
        cleanup = "nothing of the job runs"
    if receipt.unproven:
        cleanup += "; " + "; ".join(receipt.unproven)
    done(
        as_json,
        act,
        "cancel",
        f"cancel committed; clean-up: {cleanup}",
        live=live,
        cleanup_complete=receipt.cleanup_complete,
        cessation_unproven=list(receipt.unproven),
    )


def _cancel_array(as_json: bool, act: Acting, reason: str) -> None:
    """Cancel every task of the array; repeated when every task was over already."""
    cancelled: list[JobID] = []
    live: list[str] = []
    # Last task first: a waiting task is cancelled before a task ahead of it frees its place,
    # so no sweep launches a task this cancel is about to stop. Every cancel is committed
    # before anything is stopped, and Slurm is asked once for all the tasks.
    n = len(act.jobs)
    receipts = act.cluster.operator.cancel_all(
        list(reversed(act.jobs)), act.by, reason, lambda gone: progress(gone, n, "cancelling")
    )
    for job, receipt in receipts.items():
        if receipt.committed:
            cancelled.append(job)
            live += [r.id for r in receipt.live]
    if not cancelled:
        raise RepeatedError(
            f"array {act.job}: every task was over or cancelled already; nothing recorded",
            holds=True,
        )
    over = len(act.jobs) - len(cancelled)
    still = (
        f"{len(live)} Slurm job{'s' if len(live) != 1 else ''} still alive "
        f"({', '.join(live)}), checked again next sweep"
        if live
        else "nothing of the array runs"
    )
    done(
        as_json,
        act,
        "cancel",
        f"cancel committed on {len(cancelled)} tasks of array {act.job}"
        + (f" ({over} over already)" if over else "")
        + f"; clean-up: {still}",
        cancelled=sorted(cancelled, key=act.jobs.index),
        live=live,
    )


@_verb("requeue", "dispatch requeue 7f3k --reason 'node n3 was flaky'")
@reason_option
@click.option("--revoke", is_flag=True, help="Take back a requeue not carried out yet.")
def requeue(
    config: str | None, actor: Actor | None, as_json: bool, job: str, reason: str, revoke: bool
) -> None:
    """Ask for JOB's current scheduler job to run again (its restart count goes up by one).

    The request is revocable with --revoke until the supervisor carries it out.
    """
    with refusals():
        act = Acting(config, job, actor)
        if revoke:
            act.cluster.operator.revoke_requeue(act.job, act.by, reason)
            line = f"requeue of job {act.job} revoked; nothing is requeued"
        else:
            act.cluster.operator.requeue(act.job, act.by, reason)
            line = (
                f"requeue of job {act.job} asked; the next sweep requeues it (take it back "
                f"before then with `dispatch requeue {act.job} --revoke`)"
            )
    done(as_json, act, "revoke-requeue" if revoke else "requeue", line)


@_verb("resubmit", "dispatch resubmit 7f3k --reason 'the higher-priority run is done'")
@reason_option
def resubmit(config: str | None, actor: Actor | None, as_json: bool, job: str, reason: str) -> None:
    """Ask for a new submission of JOB: the same job, a new scheduler job.

    Answers a recovery hold (overdue:<instance>) among others.
    """
    with refusals():
        act = Acting(config, job, actor)
        latest = act.folded().latest()
        n = (latest.n if latest else 0) + 1
        act.cluster.operator.resubmit(act.job, act.by, reason)
    done(
        as_json,
        act,
        "resubmit",
        f"resubmit of job {act.job} asked; the next sweep launches submission {n}",
        submission=n,
    )


@_verb("supersede", "dispatch supersede 7f3k --reason 'fixed the data path'")
@reason_option
def supersede(
    config: str | None, actor: Actor | None, as_json: bool, job: str, reason: str
) -> None:
    """Run a job that ended again, as a new job with the same spec and submit options.

    The new job names JOB as the one it supersedes; its executions get a higher
    DISPATCH_EPOCH, so they outrank every checkpoint JOB published and can resume from them.
    Answers failed:<cause> and refused:<N>.
    """
    with refusals():
        act = Acting(config, job, actor)
        old = act.session.ledger.read(act.job).header.options
        options = old.model_dump(exclude={"idempotency_key"})
        plan = act.cluster.operator.supersede(act.job, act.by, reason, **options)
    done(
        as_json,
        act,
        "supersede",
        f"job {act.job} superseded by job {plan.job} (same spec, higher DISPATCH_EPOCH); "
        "the next sweep launches it",
        new_job=plan.job,
    )


@_verb("give-up", "dispatch give-up 7f3k --reason 'the data is gone'")
@reason_option
def give_up(config: str | None, actor: Actor | None, as_json: bool, job: str, reason: str) -> None:
    """Give JOB up: it fails with the cause that ended it. Recorded; nothing to answer."""
    with refusals():
        act = Acting(config, job, actor)
        act.cluster.operator.give_up(act.job, act.by, reason)
    done(
        as_json,
        act,
        "give-up",
        f"job {act.job} given up; the next sweep fails it with the cause that ended it",
    )


VERBS = (hold, release, cancel, requeue, resubmit, supersede, give_up)
