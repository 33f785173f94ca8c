"""A script whose program may requeue its own job: what dispatch does with that requeue, said
before anything is submitted.

Frameworks requeue their own job from a signal handler (PyTorch Lightning's auto-requeue,
lingua's, submitit's): the script asks Slurm for a signal ahead of the time limit
(``--signal``), and the program runs ``scontrol requeue $SLURM_JOB_ID`` when it comes, often
relying on the cluster's ``JobRequeue=1`` rather than a ``--requeue`` line. Without a rule on
``requeued`` dispatch submits the job ``--no-requeue``, so Slurm refuses that requeue, and the
program then exits (often with 0). A signal alone does not say the program requeues (a script
may save and exit on it, as dispatch's own templates do), so there the plan says what happens
and how to let it requeue itself. A script that runs ``scontrol requeue`` itself says it
does: unless the user said ``--no-requeue``, it is submitted requeueable
(``BatchScript.requeues_itself``), so its requeue is taken, never refused in silence, and the
supervisor judges it as the plan says (``dispatch.core.ending.own_requeue``): any rule on
``requeued`` acts on it; without one its next run is stopped and the job fails with cause
``requeued``, and a person is told.

Pure: the script's text, its directives and the command line's options come in; whether the job
requeues itself, and the notes for the user, go out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dispatch.adapters.slurm.sbatch_options import Given
from dispatch.batch.script_block import SbatchOption
from dispatch.model.enums import CauseKind
from dispatch.model.errors import InvalidError
from dispatch.model.values import Rule

# ``scontrol requeue`` written in the script itself.
_REQUEUE_CALL = re.compile(r"\bscontrol\s+requeue\b")
TO_LET_IT = "to let it run again, add #DISPATCH --rule=requeued:requeue:N"


@dataclass(frozen=True)
class Signs:
    """Where a script and its command line show that its job may requeue itself, and where
    they forbid Slurm to requeue it (``""``: nowhere)."""

    signal: str = ""
    call: str = ""
    no_requeue: str = ""


def signs(text: str, name: str, script: Iterable[SbatchOption], given: Sequence[Given]) -> Signs:
    """The signs in the script ``text`` (shown as ``name``), its ``#SBATCH`` options
    ``script`` and the command line's options ``given``."""
    found: dict[str, str] = {}
    for o in script:
        if o.given.name in ("signal", "no-requeue"):
            found.setdefault(o.given.name, f"{o.at}: {o.given.spelled}")
    for g in given:
        if g.name in ("signal", "no-requeue"):
            found.setdefault(g.name, f"the command line: {g.spelled}")
    call = _REQUEUE_CALL.search(text)
    at = f"{name} line {text.count(chr(10), 0, call.start()) + 1}: scontrol requeue" if call else ""
    return Signs(signal=found.get("signal", ""), call=at, no_requeue=found.get("no-requeue", ""))


def judged(said: Signs, rules: Sequence[Rule], shared: bool) -> tuple[bool, list[str]]:
    """Whether the job is submitted requeueable for its own requeue (beyond a rule that lets
    it requeue itself), and what the user is told; ``InvalidError`` for a ``--no-requeue``
    beside a rule that lets the job requeue itself."""
    own = [i for i, r in enumerate(rules) if CauseKind.REQUEUED in r.on]
    lets = [i for i in own if rules[i].lets_own_requeue]
    if lets and said.no_requeue:
        raise InvalidError(
            f"{said.no_requeue}: rule {lets[0]} (requeued: requeue) lets the job requeue itself, "
            "which --no-requeue forbids Slurm to do; remove one of them"
        )
    if lets or not (said.signal or said.call):
        return False, []
    head = (
        f"{said.call or said.signal}: the job's program may requeue its own job (scontrol requeue)"
    )
    if said.no_requeue:
        return False, [
            f"{head}; with {said.no_requeue} Slurm refuses that requeue, as you asked, and the "
            f"run ends when the program exits; {TO_LET_IT}"
        ]
    if shared:
        return False, [
            f"{head}; under a shared checkpoint every rule holds the job for a person, so it is "
            "submitted --no-requeue and Slurm refuses that requeue"
        ]
    if not said.call:
        return False, [
            f"{head} on this signal, as Lightning, lingua and submitit do; the job is submitted "
            "--no-requeue, so Slurm refuses that requeue and the run ends when the program "
            f"exits (an exit 0 reads as succeeded); {TO_LET_IT}"
        ]
    if own:
        then = f"rule {own[0]} ({rules[own[0]].action}) acts on it"
    else:
        then = "the requeued run is stopped and the job fails with cause requeued"
    return True, [
        f"{head}; dispatch lets Slurm take that requeue (the job is submitted --requeue), then "
        f"{then}; {TO_LET_IT}"
    ]
