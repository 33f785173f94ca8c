"""The verbs that act on a job: one per action of the Operator, plus the emergency stop.

Each names its actor (``human:$USER`` unless ``--as KIND:ID``), is recorded by the Operator
(the emergency stop excepted: it needs no record and writes none), and prints one line: what
was done, and what happens next. A refusal is one line saying why and what to do instead,
exit 1; bad input (a bad ``--as``, an ambiguous job) exit 2, with nothing recorded.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from dispatch.cli.refs import complete_job, resolve
from dispatch.cli.render import when
from dispatch.cli.session import (
    DURATION,
    Session,
    actor_option,
    config_option,
    echo_json,
    fail,
    json_option,
    me,
    refusals,
)
from dispatch.cluster import Cluster, Config, compose
from dispatch.core.fold import fold
from dispatch.core.job import Job
from dispatch.model.errors import InvalidError, NotFoundError, RejectedError
from dispatch.model.values import AbandonTarget, Actor, JobID

F = Callable[..., Any]

# A whole job id as dispatch makes them (10 random bytes in lowercase base32): what the
# emergency stop takes for a job the ledger does not know.
WHOLE_ID = re.compile(r"[a-z2-7]{16}")


def _verb(name: str, example: str) -> Callable[[F], click.Command]:
    """A verb's command with the options every verb has, and an example in its help."""

    def wrap(f: F) -> click.Command:
        doc = (f.__doc__ or "").rstrip() + f"\n\n\b\nExample:\n  $ {example}\n"
        f.__doc__ = doc
        f = json_option(actor_option(config_option(f)))
        f = click.argument("job", shell_complete=complete_job)(f)
        return click.command(name=name)(f)

    return wrap


def _reason(f: F) -> F:
    return click.option("--reason", "-m", default="", help="Why, for the record.")(f)


class Acting:
    """One verb's session: the cluster over the existing ledger, the job, and the actor."""

    def __init__(self, config: str | None, ref: str, actor: Actor | None) -> None:
        self.session = Session(config)
        self.cluster: Cluster = compose(self.session.backend, Config(store=self.session.ledger))
        self.job: JobID = resolve(self.session.ledger, ref)
        self.by = actor or me()

    def folded(self) -> Job:
        """The job's record, folded now."""
        return fold(self.session.ledger.read(self.job), datetime.now(UTC))


def _done(as_json: bool, act: Acting, action: str, line: str, **more: Any) -> None:
    if as_json:
        echo_json({"job": act.job, "action": action, "by": str(act.by), "message": line, **more})
    else:
        click.echo(line)


@_verb("hold", "dispatch hold 7f3k --for 2h --reason 'dataset being rebuilt'")
@_reason
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
    overdue:<instance> for a person.
    """
    with refusals():
        act = Acting(config, job, actor)
        until = datetime.now(UTC) + hold_for if hold_for else None
        instance = act.cluster.operator.hold(act.job, act.by, reason, until)
    deadline = f" until {when(until)} UTC" if until else ""
    _done(
        as_json,
        act,
        "hold",
        f"hold {instance} placed on job {act.job}{deadline}; nothing of it starts or opens "
        f"until `dispatch release {act.job}` (what runs keeps running; the next sweep holds "
        "what is queued)",
        instance=instance,
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
    """
    with refusals():
        act = Acting(config, job, actor)
        h = act.folded().active_hold()
        if h is None:
            raise RejectedError(f"job {act.job} has no hold in force; nothing to release")
        if h.recovery:
            raise RejectedError(
                f"hold {h.instance} of job {act.job} is a recovery hold, which is never "
                f"released: run `dispatch resubmit {act.job}`, `dispatch cancel {act.job}` or "
                f"`dispatch give-up {act.job}`"
            )
        if h.hold.by != act.by and not override:
            raise RejectedError(
                f"hold {h.instance} of job {act.job} was placed by {h.hold.by}; release it "
                "anyway with --override (the record notes the override)"
            )
        act.cluster.operator.release(act.job, act.by)
    noted = f" (overriding {h.hold.by})" if h.hold.by != act.by else ""
    _done(
        as_json,
        act,
        "release",
        f"hold {h.instance} of job {act.job} released{noted}; the next sweep lets it run",
        instance=h.instance,
        override=h.hold.by != act.by,
    )


@_verb("cancel", "dispatch cancel 7f3k --reason 'wrong config'")
@_reason
def cancel(config: str | None, actor: Actor | None, as_json: bool, job: str, reason: str) -> None:
    """Cancel JOB: the cancel is committed first, then what runs is stopped.

    The cancel is final once committed; stopping may lag, and the next sweeps check it.
    """
    with refusals():
        act = Acting(config, job, actor)
        receipt = act.cluster.operator.cancel(act.job, act.by, reason)
        if not receipt.committed:
            raise RejectedError(
                f"job {act.job} already {receipt.already}; nothing to cancel"
                + ("" if receipt.already == "cancelled" else f" (see `dispatch status {act.job}`)")
            )
    live = [r.id for r in receipt.live]
    if live:
        n = len(live)
        cleanup = (
            f"{n} object{'s' if n != 1 else ''} still alive ({', '.join(live)}), "
            "checked again next sweep"
        )
    else:
        cleanup = "nothing of the job runs"
    _done(
        as_json,
        act,
        "cancel",
        f"cancel committed; clean-up: {cleanup}",
        live=live,
        cleanup_complete=receipt.cleanup_complete,
    )


@_verb("requeue", "dispatch requeue 7f3k --reason 'node n3 was flaky'")
@_reason
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
    _done(as_json, act, "revoke-requeue" if revoke else "requeue", line)


@_verb("resubmit", "dispatch resubmit 7f3k --reason 'the higher-priority run is done'")
@_reason
def resubmit(config: str | None, actor: Actor | None, as_json: bool, job: str, reason: str) -> None:
    """Ask for a new submission of JOB: the same job, a new scheduler job.

    Answers a recovery hold (overdue:<instance>) among others.
    """
    with refusals():
        act = Acting(config, job, actor)
        latest = act.folded().latest()
        n = (latest.n if latest else 0) + 1
        act.cluster.operator.resubmit(act.job, act.by, reason)
    _done(
        as_json,
        act,
        "resubmit",
        f"resubmit of job {act.job} asked; the next sweep launches submission {n}",
        submission=n,
    )


@_verb("supersede", "dispatch supersede 7f3k --reason 'fixed the data path'")
@_reason
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
    _done(
        as_json,
        act,
        "supersede",
        f"job {act.job} superseded by job {plan.job} (same spec, higher DISPATCH_EPOCH); "
        "the next sweep launches it",
        new_job=plan.job,
    )


@_verb("give-up", "dispatch give-up 7f3k --reason 'the data is gone'")
@_reason
def give_up(config: str | None, actor: Actor | None, as_json: bool, job: str, reason: str) -> None:
    """Give JOB up: it fails with the cause that ended it. Recorded; nothing to answer."""
    with refusals():
        act = Acting(config, job, actor)
        act.cluster.operator.give_up(act.job, act.by, reason)
    _done(
        as_json,
        act,
        "give-up",
        f"job {act.job} given up; the next sweep fails it with the cause that ended it",
    )


_SUBMISSION = re.compile(r"(?:all-unknown:)?(\d+)")
_ATTEMPT = re.compile(r"(?:unmatched:)?(\d+)/(\d+)")


def target_of(word: str) -> AbandonTarget:
    """An abandon target from its escalation id or short form: ``all-unknown:2`` or ``2``,
    ``unmatched:2/1`` or ``2/1``, ``foreign:<object id>``."""
    if m := _SUBMISSION.fullmatch(word):
        return AbandonTarget(submission=int(m[1]))
    if m := _ATTEMPT.fullmatch(word):
        return AbandonTarget(submission=int(m[1]), attempt=int(m[2]))
    if word.startswith("foreign:") and len(word) > len("foreign:"):
        return AbandonTarget(foreign=word.removeprefix("foreign:"))
    raise InvalidError(
        f"abandon target {word!r} is none of all-unknown:N (or N), unmatched:N/A (or N/A), "
        "foreign:OBJECT"
    )


@click.command(name="abandon")
@click.argument("job", shell_complete=complete_job)
@click.argument("target")
@config_option
@actor_option
@json_option
@_reason
def abandon(
    config: str | None,
    actor: Actor | None,
    as_json: bool,
    job: str,
    target: str,
    reason: str,
) -> None:
    """Close what nobody can account for: a launch whose outcome is unknown, or a foreign
    object. TARGET is the escalation's id: all-unknown:N, unmatched:N/A or foreign:OBJECT.

    Only a human may abandon. Check Slurm first (`squeue --name dj-<job id>`).

    \b
    Example:
      $ dispatch abandon 7f3k all-unknown:2 --reason 'no such job in squeue'
    """
    with refusals():
        t = target_of(target)
        act = Acting(config, job, actor)
        act.cluster.operator.abandon(act.job, t, act.by, reason)
    if t.foreign:
        what, nxt = f"foreign object {t.foreign}", "it no longer keeps the record from settling"
    elif t.attempt:
        what, nxt = f"attempt {t.submission}/{t.attempt}", "it no longer counts as unresolved"
    else:
        what, nxt = f"submission {t.submission}", "the next sweep launches the next submission"
    _done(
        as_json,
        act,
        "abandon",
        f"{what} of job {act.job} abandoned; {nxt}",
        target=t.model_dump(mode="json"),
    )


@click.command(name="emergency-stop")
@click.argument("job", shell_complete=complete_job)
@config_option
@actor_option
@json_option
@_reason
def emergency_stop(
    config: str | None, actor: Actor | None, as_json: bool, job: str, reason: str
) -> None:
    """Stop every scheduler job named for JOB now (scancel --name dj-JOB), record or not.

    Not recorded: a supervisor may still recover the job afterwards; cancel it to stop that.
    JOB may be a whole id that the ledger does not know.

    \b
    Example:
      $ dispatch emergency-stop 7f3k2m9x1c4t7bdq --reason 'runaway job'
    """
    with refusals():
        session = Session(config)
        job_id = _stop_target(session, job)
        by = actor or me()
        report = compose(session.backend, Config()).stopper.emergency_stop(job_id, by, reason)
    stopped = [r.id for r in report.stopped]
    live = [r.id for r in report.live]
    line = (
        f"emergency stop of job {job_id}: {len(stopped)} stopped"
        + (f" ({', '.join(stopped)})" if stopped else "")
        + (f", {len(live)} still alive ({', '.join(live)})" if live else "")
        + "; not recorded: a supervisor may still recover it (`dispatch cancel` stops that)"
    )
    if as_json:
        echo_json(
            {
                "job": job_id,
                "action": "emergency-stop",
                "by": str(by),
                "message": line,
                "stopped": stopped,
                "live": live,
            }
        )
    else:
        click.echo(line)
    if live:
        fail(f"{len(live)} object(s) of job {job_id} still alive after the stop")


def _stop_target(session: Session, ref: str) -> JobID:
    """The job the ledger names by ``ref``; without a ledger or a record, ``ref`` as given."""
    try:
        store = session.ledger
    except InvalidError:
        store = None
    if store is not None:
        try:
            return resolve(store, ref)
        except NotFoundError:
            pass
    if not WHOLE_ID.fullmatch(ref):
        raise NotFoundError(
            f"no job {ref!r} in the ledger; without a record, give the job's whole id "
            "(16 characters, as in the Slurm job name dj-<id>)"
        )
    return ref


VERBS = (hold, release, cancel, requeue, resubmit, supersede, give_up, abandon, emergency_stop)
