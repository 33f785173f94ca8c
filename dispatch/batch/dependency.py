"""``--dependency`` under ``dispatch sbatch``: which parts name dispatch jobs, which Slurm's.

Pure: the option's value comes in, and out go the dependencies on dispatch jobs (each a kind
and a reference as written: an id, the start of one, or a name), whether ``singleton`` was
asked, and what is left for sbatch. ``singleton`` is sbatch's, as written: a job keeps its
user's name under dispatch, so Slurm runs one job of that name and user at a time, as it
would for sbatch, and a ``scancel --name`` reaches the jobs waiting for it. A word of digits
(``1234``, ``1234_5``, ``1234+60``) is a Slurm job id, as sbatch reads it, and stays sbatch's
business: dispatch cannot follow that job if it is resubmitted, and says so. Any other word
names a dispatch job, whose dependency dispatch itself keeps (``dispatch.core.upstream``): the
job is created once the named job has settled, so the dependency follows it across every
resubmission.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dispatch.model.enums import DependencyKind
from dispatch.model.errors import InvalidError

# sbatch's dependency types (sbatch(1), --dependency) that take job ids.
SLURM_KINDS = ("after", "afterany", "afterburstbuffer", "aftercorr", "afternotok", "afterok")
# A Slurm job id in a dependency: the id, an array task's ``_N``, an ``after`` delay ``+MINUTES``.
_SLURM_ID = re.compile(r"\d+(?:_\d+)?(?:\+\d+)?")


@dataclass(frozen=True)
class Dependencies:
    """What one ``--dependency`` value says."""

    on_jobs: tuple[tuple[DependencyKind, str], ...] = ()
    singleton: bool = False
    slurm: str = ""  # what sbatch gets, "" for nothing
    slurm_ids: tuple[str, ...] = ()
    # A Slurm id written right after a dispatch job's word (``afterok:GROUP:7``): the word.
    following: tuple[tuple[str, str], ...] = ()

    def notes(self) -> list[str]:
        """What the user is told of the Slurm ids dispatch passes on without following."""
        after = dict(self.following)
        return [
            f"--dependency: {i} is a Slurm job id, not a dispatch job: sbatch gets it as "
            "written on every submission, and dispatch cannot follow that job if it is "
            "resubmitted (give its dispatch job id to have the dependency follow it)"
            + (
                f"; ':' separates jobs here, so to name task {i} of array {after[i]}, write "
                f"{after[i]}_{i}"
                if i in after and i.isdigit()
                else ""
            )
            for i in self.slurm_ids
        ]


def read(value: str, where: str = "") -> Dependencies:
    """Sort ``value`` (given ``where``: a script's line; the command line when empty);
    ``InvalidError`` names the word at fault and what to write instead."""
    at = f"{where}: " if where else ""
    if not value.strip():
        raise InvalidError(f"{at}--dependency needs a value, e.g. afterok:JOB")
    fault = f"{at}--dependency={value}"
    any_of = "?" in value
    terms = value.split("?" if any_of else ",")
    on_jobs: list[tuple[DependencyKind, str]] = []
    slurm_terms: list[str] = []
    slurm_ids: list[str] = []
    following: list[tuple[str, str]] = []
    singleton = False
    for term in terms:
        if term == "singleton":
            singleton = True
            slurm_terms.append(term)
            continue
        kind, _, ids = term.partition(":")
        if kind not in SLURM_KINDS or not ids:
            raise InvalidError(
                f"{fault}: {term!r} is not a dependency sbatch knows; write "
                "TYPE:JOB[:JOB...] with TYPE one of afterok, afterany, afternotok "
                "(or singleton)"
            )
        kept, jobs, after = _words(kind, ids, any_of, fault)
        slurm_ids += kept
        on_jobs += jobs
        following += after
        if kept:
            slurm_terms.append(f"{kind}:{':'.join(kept)}")
    if singleton and any_of:
        raise InvalidError(f"{fault}: singleton cannot be one of several ('?')")
    return Dependencies(
        on_jobs=tuple(on_jobs),
        singleton=singleton,
        slurm=("?" if any_of else ",").join(slurm_terms),
        slurm_ids=tuple(slurm_ids),
        following=tuple(following),
    )


def _words(
    kind: str, ids: str, any_of: bool, fault: str
) -> tuple[list[str], list[tuple[DependencyKind, str]], list[tuple[str, str]]]:
    """One term's words (``ids`` of ``TYPE:ID[:ID...]``): its Slurm ids, the dispatch jobs it
    names, and each Slurm id written right after a dispatch job's word, with that word."""
    kept: list[str] = []
    on_jobs: list[tuple[DependencyKind, str]] = []
    following: list[tuple[str, str]] = []
    before = ""
    for word in ids.split(":"):
        if _SLURM_ID.fullmatch(word):
            kept.append(word)
            if before:
                following.append((word, before))
            before = ""
            continue
        before = word
        if kind not in {k.value for k in DependencyKind}:
            raise InvalidError(
                f"{fault}: {kind}:{word}: dispatch follows afterok, afterany and afternotok on "
                f"its jobs, not {kind}"
            )
        if any_of:
            raise InvalidError(
                f"{fault}: '?' (any one of) cannot name dispatch jobs; dispatch waits for all "
                "of them: separate them with ','"
            )
        on_jobs.append((DependencyKind(kind), word))
    return kept, on_jobs, following
