"""The verbs for what the record cannot account for: ``abandon`` and ``emergency-stop``.

``abandon`` closes, in the record, a launch whose outcome nobody knows or an object that is not
dispatch's, named by its escalation id; only a person may. ``emergency-stop`` stops every
scheduler object named for a job, needs no record and writes none.
"""

from __future__ import annotations

import re

import click

from dispatch.cli.act import Acting, done, reason_option
from dispatch.cli.refs import complete_job, resolve
from dispatch.cli.render import clean
from dispatch.cli.session import (
    Session,
    actor_option,
    config_option,
    echo_json,
    fail,
    json_option,
    me,
    refusals,
)
from dispatch.cluster import Config, compose
from dispatch.model.errors import InvalidError, NotFoundError
from dispatch.model.values import AbandonTarget, Actor, JobID

# A whole job id as dispatch makes them (10 random bytes in lowercase base32): what the
# emergency stop takes for a job the ledger does not know.
WHOLE_ID = re.compile(r"[a-z2-7]{16}")

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
@reason_option
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
    done(
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
@reason_option
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
        click.echo(clean(line))
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
