"""An upgrade and the sweep memo: a release whose decisions are the same trusts the memo of the
one before (no record is read again at once); one whose table keeps the waits of the version
before trusts them until each entry lapses, one to two hours spread by job; one whose table
may now act where the one before waited trusts none, and acts in its first tick."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sweep_world import World

from dispatch.core import deadlines, table_version
from dispatch.core.current import Current
from dispatch.core.fold import fold
from dispatch.core.job import Job
from dispatch.core.next import next_steps
from dispatch.core.steps import Escalate, Wait
from dispatch.model.objects import Discovery
from dispatch.model.record import View
from dispatch.records import file_index as index
from dispatch.supervise.supervisor import Remembered

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World("file", tmp_path)


def remembered(world: World, n: int) -> list[str]:
    """``n`` running jobs, each remembered by the last sweep's memo until it lapses (their
    open's deadline past, nothing is ahead of them)."""
    jobs = world.submit(n)
    world.sweep_until_idle(world.supervisor())
    world.clock.t += timedelta(minutes=1)
    report = world.supervisor().sweep()
    assert sorted(report.passed) == jobs and not report.progressed and not report.remembered
    return jobs


def upgrade(monkeypatch: pytest.MonkeyPatch, keeps_waits: bool) -> None:
    """This process now runs the next release of the decisions, which keeps the waits of the
    one the memo was made under, or keeps none."""
    now = table_version.VERSION
    monkeypatch.setattr(table_version, "VERSION", now + 1)
    monkeypatch.setattr(table_version, "WAITS_KEPT_SINCE", now if keeps_waits else now + 1)


def checking(world: World, skipped: list[str]) -> Remembered:
    """Decides again each pass a sweep skips on its memo, on the record it remembered: one
    that would not have been a lone Wait fails the test (the simulator's ``memo-waits``)."""

    def check(job: str, revision: int, found: Discovery, now: datetime, upstream: object) -> None:
        whole = world.store.read(job)
        j = fold(View(header=whole.header, commits=whole.commits[: revision - 1]), now)
        steps = next_steps(j, found, now)
        assert len(steps) == 1 and isinstance(steps[0], Wait), (job, steps)
        skipped.append(job)

    return check


def new_rule(job: Job, cur: Current, now: datetime) -> list[Escalate]:
    """A deadline a newer table adds: every job is escalated once."""
    return [Escalate(id="new-rule", detail="a newer table asks a person about every job")]


def acting_where_it_waited(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's table now escalates every job, where the table before waited."""
    monkeypatch.setattr(deadlines, "DEADLINES", (*deadlines.DEADLINES, new_rule))


# The release before: it loads each memo file and writes it again as its own.
REWRITE = """
import sys
from pathlib import Path
from dispatch.supervise import memo
channel = sys.argv[1]
for name in sys.argv[2:]:
    path = Path(name)
    entries = memo.load(path.read_bytes(), channel)
    assert entries, name
    path.write_bytes(memo.dump(entries, channel))
"""


def release_before(tmp_path: Path) -> Path:
    """A copy of the package whose every core and model source was edited (a comment)."""
    before = tmp_path / "before"
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(REPO / "dispatch", before / "dispatch", ignore=skip)
    for folder in ("core", "model"):
        for path in (before / "dispatch" / folder).glob("*.py"):
            path.write_text(path.read_text() + "\n# edited in the release before\n")
    return before


def test_a_memo_a_release_with_other_sources_wrote_is_trusted_and_no_record_is_read(
    world: World, reads: list[str], tmp_path: Path
) -> None:
    jobs = remembered(world, 6)
    files = sorted((world.store.root / index.SWEEP).glob("memo-*"))  # type: ignore[attr-defined]
    written = {path: path.read_bytes() for path in files}
    channel = world.supervisor().deliveries.via
    env = {**os.environ, "PYTHONPATH": str(release_before(tmp_path))}
    argv = [sys.executable, "-c", REWRITE, channel, *map(str, files)]
    subprocess.run(argv, env=env, check=True, cwd=tmp_path)
    assert {path: path.read_bytes() for path in files} == written
    reads.clear()
    report = world.supervisor().sweep()
    assert sorted(report.remembered) == jobs
    assert reads == []


def test_after_an_upgrade_that_keeps_the_waits_the_re_reads_come_spread_over_two_hours(
    world: World, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = remembered(world, 40)
    upgrade(monkeypatch, keeps_waits=True)
    sup = world.supervisor()
    skipped: list[str] = []
    sup.check_remembered = checking(world, skipped)
    per_tick: list[int] = []
    read_again: set[str] = set()
    for _ in range(14):  # a sweep every ten minutes for two hours and ten minutes
        reads.clear()
        report = sup.sweep()
        assert sorted(report.passed) == jobs and not report.progressed
        per_tick.append(len(set(reads)))
        read_again.update(reads)
        world.clock.t += timedelta(minutes=10)
    assert per_tick[0] == 0 and len(set(skipped)) == len(jobs)
    assert max(per_tick) <= len(jobs) // 3, per_tick
    assert sum(1 for n in per_tick if n) >= 4, per_tick  # spread over several ticks
    assert sorted(read_again) == jobs  # and every job read again within two hours
    for path in sorted((world.store.root / index.SWEEP).glob("memo-*")):  # type: ignore[attr-defined]
        stamp = f" table-{table_version.VERSION} ".encode()
        assert stamp in path.read_bytes().partition(b"\n")[0], path.read_bytes()


def test_after_an_upgrade_whose_table_acts_where_it_waited_every_job_is_decided_at_once(
    world: World, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = remembered(world, 8)
    acting_where_it_waited(monkeypatch)
    upgrade(monkeypatch, keeps_waits=False)
    reads.clear()
    report = world.supervisor().sweep()
    assert report.remembered == [] and sorted(set(reads)) == jobs
    assert sorted(report.progressed) == jobs
    for job in jobs:
        assert [e.kind for e in world.entries(job, "escalate")] == ["escalate"]


def test_a_table_that_acts_where_it_waited_but_claims_to_keep_the_waits_would_hide_the_act(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Why the claim is checked against the corpus (``tests/core/test_table_version.py``):
    trusted, the old entries skip the passes that would now escalate, until they lapse."""
    jobs = remembered(world, 8)
    acting_where_it_waited(monkeypatch)
    upgrade(monkeypatch, keeps_waits=True)
    report = world.supervisor().sweep()
    assert sorted(report.remembered) == jobs and report.progressed == []
