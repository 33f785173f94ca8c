"""``dispatch list`` answers from the rows it kept (``dispatch/cli/listing.py``) and folds only
the records that moved or whose look changed: a kept row never disagrees with the fold, a commit
no row knows of is shown at once, and rows another user wrote are not trusted. Another user is
played by ``nobody`` (the tests run as root, which may give files away with ``chown``)."""

from __future__ import annotations

import hashlib
import json
import os
import pwd
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cli_setup import ADA, Site

import dispatch
from dispatch.cli import listing
from dispatch.model.errors import UnreachableError
from dispatch.model.objects import Discovery
from dispatch.records.file import FileRecords
from dispatch.records.file_index import rows_path
from dispatch.supervise import memo

ME = {"USER": "ada"}
NOBODY = pwd.getpwnam("nobody").pw_uid


class Reads:
    """Counts the records the file ledger reads, by wrapping the real ``FileRecords.read``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.jobs: list[str] = []
        real = FileRecords.read

        def counted(store: FileRecords, job: str) -> Any:
            self.jobs.append(job)
            return real(store, job)

        monkeypatch.setattr(FileRecords, "read", counted)

    def take(self) -> list[str]:
        out, self.jobs = sorted(self.jobs), []
        return out


def listed(site: Site, *args: str) -> list[dict[str, Any]]:
    result = site.run(["list", "--all", "--json", *args, "--config", str(site.config)], env=ME)
    assert result.exit_code == 0, result.stderr
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    for row in rows:
        row.pop("age_seconds")
    return rows


def folded(site: Site) -> list[dict[str, Any]]:
    """The list with no kept row: every record folded, as before rows were kept."""
    for path in (site.ledger / "sweep").glob("list-*"):
        path.unlink()
    return listed(site)


def sweeps(site: Site, n: int = 4) -> None:
    for _ in range(n):
        assert site.sweep().exit_code == 0


def test_a_kept_row_never_disagrees_with_the_fold_and_only_moved_records_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = Site(tmp_path)
    rule = dispatch.Rule(on=["preempted"], action="resubmit", budget=2)
    spec = site.spec.model_copy(update={"recovery": dispatch.RecoveryPolicy(rules=(rule,))})
    jobs = sorted(site.cluster.operator.submit(spec, ADA, supervised=True).job for _ in range(4))
    sweeps(site)
    reads = Reads(monkeypatch)
    first = listed(site)
    assert reads.take() == jobs
    assert listed(site) == first and reads.take() == []

    env = site.backend.env()
    canonical = site.cluster.observer.get(jobs[0]).submissions[0].canonical
    assert canonical is not None
    env.preempt(canonical)  # what find shows changed; the record not yet
    assert listed(site) == folded(site)
    reads.take()
    sweeps(site)  # the record moved: recovered by a new submission
    site.cluster.operator.cancel(jobs[1], ADA, "not needed")
    sweeps(site)
    site.backend.env().inject_foreign(jobs[2])  # a person is now asked about jobs[2]
    sweeps(site, 2)
    reads.take()
    after = listed(site)
    moved = reads.take()
    assert after == folded(site)
    assert {r["job"]: r["state"] for r in after}[jobs[1]] == "cancelled"
    assert [r for r in after if r["job"] == jobs[2]][0]["waiting"]
    assert jobs[3] not in moved and {jobs[0], jobs[1], jobs[2]} <= set(moved)
    reads.take()
    assert listed(site) == after and reads.take() == []

    def down(*args: object, **kw: object) -> None:
        raise UnreachableError("squeue: Unable to contact slurm controller (connect failure)")

    monkeypatch.setattr(site.backend, "find", down)
    monkeypatch.setattr(site.backend, "find_many", down)
    unreachable = listed(site)  # another look: every row folded again under it
    assert reads.take() == jobs
    assert unreachable == folded(site)


def test_a_commit_no_kept_row_knows_of_is_shown_at_once(tmp_path: Path) -> None:
    """A list that read the record at revision r and crashed before its rows were written, or
    wrote them after a commit of r+1 landed, leaves rows of revision r: the stamp of r no
    longer holds once r+1 exists, so the next list folds the record."""
    site = Site(tmp_path)
    (job,) = site.submit(1)
    sweeps(site)
    (before,) = listed(site)
    assert before["state"] == "running"
    shard = site.store.shard_of(job)
    old = rows_path(site.ledger, shard).read_bytes()
    site.cluster.operator.cancel(job, ADA, "not needed")
    sweeps(site)
    rows_path(site.ledger, shard).write_bytes(old)  # the late write of rows of revision r
    (after,) = listed(site)
    assert after["state"] == "cancelled" and [after] == folded(site)


def test_a_list_whose_rows_cannot_be_written_answers_from_the_fold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = Site(tmp_path)
    site.submit(2)
    sweeps(site)

    def full(store: FileRecords, shard: int, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(FileRecords, "keep_rows", full)
    result = site.run(["list", "--config", str(site.config)], env=ME)
    assert result.exit_code == 0
    assert len(result.stdout.splitlines()) == 3
    assert result.stderr.startswith("warning: kept rows not written: ")
    assert "No space left on device" in result.stderr
    assert not list((site.ledger / "sweep").glob("list-*"))


def forged(site: Site, job: str, state: str) -> bytes:
    """Rows of ``job`` that hold for its record now (the right stamp and look) but lie about
    its state: what only someone who can write the ledger could make."""
    store = FileRecords(site.ledger)
    revision = store.revision(job)
    stamp = store.stamp_at(job, revision)
    assert stamp is not None
    found = site.backend.find_many([job]).get(job) or Discovery()
    now = datetime.now(UTC)
    (row,) = [
        r
        for r in json.loads(
            site.run(["list", "--json", "--config", str(site.config)], env=ME).stdout
        )
        if r["job"] == job
    ]
    row["state"] = state
    until = memo.lapse(job, now, None)
    return listing.dump({job: listing.Kept(revision, stamp, memo.seen(found), until, row)})


def test_rows_another_user_wrote_are_not_trusted(tmp_path: Path) -> None:
    site = Site(tmp_path)
    (job,) = site.submit(1)
    sweeps(site)
    path = rows_path(site.ledger, site.store.shard_of(job))
    lie = forged(site, job, "succeeded")
    path.write_bytes(lie)
    (trusted,) = listed(site)
    assert trusted["state"] == "succeeded"  # the forgery holds: it is this user's own file
    path.write_bytes(lie)
    os.lchown(path, NOBODY, NOBODY)
    result = site.run(["list", "--json", "--config", str(site.config)], env=ME)
    assert result.exit_code == 0
    (row,) = json.loads(result.stdout)
    assert row["state"] == "running"
    assert result.stderr.startswith(f"warning: kept rows ignored: ledger file {path} belongs to")
    assert "nobody" in result.stderr and len(result.stderr.splitlines()) == 1
    assert path.stat().st_uid == os.geteuid()  # written again, as this user's
    os.chmod(path, 0o666)
    result = site.run(["list", "--json", "--config", str(site.config)], env=ME)
    assert "666" in result.stderr and json.loads(result.stdout)[0]["state"] == "running"


def test_status_finds_a_job_by_name_from_kept_rows_and_from_headers(tmp_path: Path) -> None:
    site = Site(tmp_path)
    (kept,) = site.submit(1)
    sweeps(site)
    listed(site)
    spec = site.spec.model_copy(update={"name": "eval"})
    fresh = site.cluster.operator.submit(spec, ADA, supervised=True).job
    config = ["--config", str(site.config), "--json"]
    by_name = site.run(["status", "finetune", *config], env=ME)
    assert json.loads(by_name.stdout)["job"] == kept
    assert json.loads(site.run(["status", "eval", *config], env=ME).stdout)["job"] == fresh
    site.cluster.operator.submit(spec, ADA, supervised=True)
    twice = site.run(["status", "eval", *config], env=ME)
    assert twice.exit_code == 2 and "ambiguous: 2 jobs match it" in twice.stderr


@pytest.mark.parametrize(
    "made_by",
    ["dispatch-list-rows 2 rows-1", "dispatch-list-rows 1 6ad3c0e4e5c0b1a8d2f1c9e0"],
    ids=["earlier-rows-version", "earlier-format"],
)
def test_status_takes_names_from_rows_an_earlier_release_kept_and_list_folds_again(
    made_by: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reads: list[str]
) -> None:
    """After an upgrade that changed the rows their rows are not used, their names are (a
    header never changes), so finding a job by name reads no header."""
    site = Site(tmp_path)
    site.submit(2)
    spec = site.spec.model_copy(update={"name": "eval"})
    wanted = site.cluster.operator.submit(spec, ADA, supervised=True).job
    sweeps(site)
    before = listed(site)
    for path in (site.ledger / "sweep").glob("list-*"):
        # As those releases wrote them: no shard stamp, the digest of the body alone.
        body = path.read_bytes().split(b"\n", 3)[3]
        digest = hashlib.blake2b(body, digest_size=16).hexdigest().encode()
        path.write_bytes(made_by.encode() + b"\n" + digest + b"\n" + body)
    reads.clear()
    result = site.run(["status", "eval", "--json", "--config", str(site.config)], env=ME)
    assert json.loads(result.stdout)["job"] == wanted and reads == []
    folded = Reads(monkeypatch)
    assert listed(site) == before and len(folded.take()) == 3


def test_rows_kept_by_an_earlier_release_with_the_same_rows_version_are_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release that changes no row (``listing.ROWS`` the same) keeps the rows of the one
    before: the first list after the upgrade reads no record. The rows name no source."""
    site = Site(tmp_path)
    site.submit(3)
    sweeps(site)
    before = listed(site)
    for path in (site.ledger / "sweep").glob("list-*"):
        head = path.read_bytes().partition(b"\n")[0]
        assert head == f"{listing.FORMAT} rows-{listing.ROWS}".encode()
    reads = Reads(monkeypatch)
    assert listed(site) == before and reads.take() == []


def test_a_list_over_shards_that_did_not_move_looks_at_no_file_of_their_jobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a list checked every row of a shard, the file keeps the shard's stamp; while the
    stamp is the same, the next list takes the rows without a look at any file of the jobs.
    A write to one job sends only that shard's jobs to their records' own stamps."""
    site = Site(tmp_path)
    jobs = site.submit(12)
    sweeps(site)
    before = listed(site)
    listed(site)  # checks every row, and keeps the stamps that vouch for them
    stamped: list[str] = []
    real = FileRecords.stamp_at

    def counting(store: FileRecords, job: str, revision: int) -> str | None:
        stamped.append(job)
        return real(store, job, revision)

    monkeypatch.setattr(FileRecords, "stamp_at", counting)
    reads = Reads(monkeypatch)
    assert listed(site) == before and reads.take() == [] and stamped == []
    moved = jobs[5]
    site.cluster.operator.hold(moved, ADA, "a look")
    reads.take()
    after = listed(site)
    shard = site.store.shard_of(moved)
    assert reads.take() == [moved]
    assert {site.store.shard_of(j) for j in stamped} == {shard}, stamped
    assert [r for r in after if r["job"] != moved] == [r for r in before if r["job"] != moved]


def test_a_list_whose_rows_hold_makes_no_system_call_on_a_jobs_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a shared filesystem each look at a name is a round trip to its server: a list whose
    shards did not move lists ``unsettled/`` (or ``jobs/``) and reads its kept rows, and
    looks at no file of any job, whatever the number of jobs."""
    site = Site(tmp_path)
    site.submit(12)
    sweeps(site)
    for _ in range(2):
        before = listed(site)  # the second checks every row and keeps the shards' stamps
    looked: list[str] = []
    for name in ("lstat", "stat"):
        real = getattr(os, name)

        def seen(path: Any, *a: Any, _real: Any = real, **k: Any) -> Any:
            if not isinstance(path, int) and "/jobs/" in os.fspath(path):
                looked.append(os.fspath(path))
            return _real(path, *a, **k)

        monkeypatch.setattr(os, name, seen)
    assert listed(site) == before
    assert looked == []


def test_a_job_whose_create_is_under_way_is_left_out_of_the_list(tmp_path: Path) -> None:
    """Its folder is there, not yet its header: the list leaves it out and says nothing, as
    before; a job whose folder has gone while the index says it has not settled is named."""
    site = Site(tmp_path)
    site.submit(2)
    sweeps(site)
    before = listed(site)
    job = "abcdefghijklmnop"
    (site.ledger / "jobs" / job).mkdir(mode=0o700)
    (site.ledger / "unsettled" / job).touch()
    for args in ([], ["--all"]):
        result = site.run(["list", "--json", *args, "--config", str(site.config)], env=ME)
        assert result.exit_code == 0 and result.stderr == "", result.stderr
        rows = json.loads(result.stdout)
        assert job not in [r["job"] for r in rows]
    assert listed(site) == before
    (site.ledger / "jobs" / job).rmdir()
    result = site.run(["list", "--config", str(site.config)], env=ME)
    assert result.exit_code == 1 and job in result.stderr, result.stderr
