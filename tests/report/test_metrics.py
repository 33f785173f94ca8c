"""``dispatch sweep --metrics FILE``: a Prometheus text file, written as the textfile collector
needs it (a temporary name, then a rename), that Prometheus's own parser reads back."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from cli_setup import ADA, Site  # noqa: E402

import dispatch  # noqa: E402
from dispatch.report.metrics import Sample, render, write  # noqa: E402

NAME = r"^[a-zA-Z_:][a-zA-Z0-9_:]*$"


def parsed(text: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def test_the_metrics_parse_and_follow_prometheus_naming() -> None:
    text = render(
        Sample(
            jobs={"running": 2},
            endings={"preempted": 3, "node-lost": 1},
            firings={"resubmit": 4},
            escalations_waiting=1,
            sweep_seconds=0.25,
            scheduler_queries=2,
            sweep_jobs={"passed": 2, "skipped": 0, "failed": 0, "not_reached": 0},
            finished_at=1_700_000_000.0,
        )
    )
    families = list(text_string_to_metric_families(text))
    for f in families:
        assert f.name.startswith("dispatch_")
        assert f.documentation
        if f.type == "counter":
            assert all(s.name.endswith("_total") for s in f.samples)
    m = parsed(text)
    assert m["dispatch_jobs"][(("state", "running"),)] == 2
    assert m["dispatch_jobs"][(("state", "failed"),)] == 0
    assert m["dispatch_endings_total"][(("cause", "node-lost"),)] == 1
    assert m["dispatch_rule_firings_total"][(("action", "resubmit"),)] == 4
    assert m["dispatch_rule_firings_total"][(("action", "hold"),)] == 0
    assert m["dispatch_sweep_duration_seconds"][()] == 0.25
    assert m["dispatch_sweep_scheduler_queries"][()] == 2


def test_writing_renames_a_finished_temporary_file_into_place(tmp_path: Path) -> None:
    target = tmp_path / "dispatch.prom"
    target.write_text("old\n")
    write(target, "dispatch_jobs 1\n")
    assert target.read_text() == "dispatch_jobs 1\n"
    assert [p.name for p in tmp_path.iterdir()] == ["dispatch.prom"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "dispatch.prom"
    target.write_text("old\n")

    def refuse(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("os.replace", refuse)
    with pytest.raises(OSError):
        write(target, "new\n")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["dispatch.prom"]


def test_a_sweep_writes_the_ledgers_counts_and_its_own_cost(tmp_path: Path) -> None:
    site = Site(tmp_path)
    rule = dispatch.Rule(on=["preempted"], action="resubmit", budget=2)
    spec = site.spec.model_copy(update={"recovery": dispatch.RecoveryPolicy(rules=(rule,))})
    job = site.cluster.operator.submit(spec, ADA, supervised=True).job
    site.submit()
    for _ in range(3):
        assert site.sweep().exit_code == 0
    first = site.cluster.observer.get(job).submissions[0].canonical
    assert first is not None
    site.backend.env().preempt(first)
    metrics = tmp_path / "dispatch.prom"
    assert site.sweep("--metrics", str(metrics)).exit_code == 0
    m = parsed(metrics.read_text())
    assert m["dispatch_endings_total"] == {(("cause", "preempted"),): 1}
    assert m["dispatch_rule_firings_total"][(("action", "resubmit"),)] == 1
    assert sum(m["dispatch_jobs"].values()) == 2
    assert m["dispatch_sweep_jobs"][(("result", "passed"),)] == 2
    # One query for both jobs, and more for the rounds that carried the preempted one on.
    assert m["dispatch_sweep_scheduler_queries"][()] > 1
    assert m["dispatch_sweep_duration_seconds"][()] > 0
    # A sweep with nothing to do asks the scheduler once for every job.
    for _ in range(3):
        assert site.sweep().exit_code == 0
    assert site.sweep("--metrics", str(metrics)).exit_code == 0
    assert parsed(metrics.read_text())["dispatch_sweep_scheduler_queries"][()] == 1


def test_the_config_names_the_metrics_file_relative_to_itself(tmp_path: Path) -> None:
    site = Site(tmp_path, extra='[sweep]\nmetrics = "metrics/dispatch.prom"\n')
    (tmp_path / "metrics").mkdir()
    site.submit()
    assert site.sweep().exit_code == 0
    m = parsed((tmp_path / "metrics" / "dispatch.prom").read_text())
    assert sum(m["dispatch_jobs"].values()) == 1


def test_a_metrics_key_that_is_not_a_path_is_refused_naming_it(tmp_path: Path) -> None:
    site = Site(tmp_path, extra="[sweep]\nmetrics = 3\n")
    result = site.sweep()
    assert result.exit_code == 2
    assert "sweep.metrics = 3" in result.stderr


def _ledger_with_history(site: Site, settled: int, running: int) -> list[str]:
    """``settled`` jobs that succeeded and ``running`` ones still running."""
    jobs = site.submit(settled + running)
    for _ in range(3):
        assert site.sweep().exit_code == 0
    for job in jobs[:settled]:
        ref = site.cluster.observer.get(job).submissions[0].canonical
        assert ref is not None
        site.backend.env().complete(ref)
    for _ in range(3):
        assert site.sweep().exit_code == 0
    return jobs


def test_metrics_after_a_sweep_fold_only_the_records_that_changed_and_count_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What each job counts for is kept between sweeps: the next metrics read none of the
    records that did not change, and say what folding every record says. A settled record that
    gains a revision is counted again."""
    from dispatch.records.file import FileRecords

    site = Site(tmp_path)
    jobs = _ledger_with_history(site, settled=6, running=2)
    metrics = tmp_path / "dispatch.prom"
    assert site.sweep("--metrics", str(metrics)).exit_code == 0
    first = parsed(metrics.read_text())
    assert first["dispatch_jobs"][(("state", "succeeded"),)] == 6
    assert first["dispatch_jobs"][(("state", "running"),)] == 2
    read: list[str] = []
    real = FileRecords.read

    def counting(self: FileRecords, job: str) -> object:
        read.append(job)
        return real(self, job)

    listed: list[bool] = []
    stamped: list[str] = []
    real_jobs, real_stamp = FileRecords.jobs, FileRecords.stamp_at

    def listing(self: FileRecords, include_settled: bool = False) -> list[str]:
        listed.append(include_settled)
        return real_jobs(self, include_settled)

    def stamping(self: FileRecords, job: str, revision: int) -> str | None:
        stamped.append(job)
        return real_stamp(self, job, revision)

    monkeypatch.setattr(FileRecords, "read", counting)
    monkeypatch.setattr(FileRecords, "jobs", listing)
    monkeypatch.setattr(FileRecords, "stamp_at", stamping)
    assert site.sweep("--metrics", str(metrics)).exit_code == 0
    assert not set(read) & set(jobs), "no record that did not change is read again"
    # Nothing moved: the shards' stamps vouch for every kept total; nothing is listed or looked at.
    assert True not in listed and stamped == []
    again = parsed(metrics.read_text())
    assert {k: v for k, v in again.items() if "sweep" not in k} == {
        k: v for k, v in first.items() if "sweep" not in k
    }
    # A settled job gains a revision (a person's hold on a settled job is refused, a supersede
    # is not): its share is folded again, and the counts follow the record.
    done = site.run(["supersede", jobs[0], "--config", str(site.config), "--reason", "again"])
    assert done.exit_code == 0, done.output
    read.clear()
    stamped.clear()
    assert site.sweep("--metrics", str(metrics)).exit_code == 0
    assert jobs[0] in read and not set(read) & set(jobs[1:6])
    moved = {site.store.shard_of(j) for j in read}
    assert {site.store.shard_of(j) for j in stamped} <= moved, "only the moved shards' jobs"
    monkeypatch.undo()
    kept = parsed(metrics.read_text())
    (site.ledger / "sweep" / "metrics-kept").unlink()
    assert site.sweep("--metrics", str(metrics)).exit_code == 0
    cold = parsed(metrics.read_text())
    assert {k: v for k, v in kept.items() if "sweep" not in k} == {
        k: v for k, v in cold.items() if "sweep" not in k
    }


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],
        lambda data: data.replace(b"shares-", b"shares-9"),
        lambda data: data.replace(b'"succeeded"', b'"failed"'),
    ],
    ids=["truncated", "another-version", "edited"],
)
def test_kept_metrics_that_are_damaged_or_of_another_version_are_folded_again(
    tmp_path: Path, damage: object
) -> None:
    site = Site(tmp_path)
    _ledger_with_history(site, settled=3, running=1)
    metrics = tmp_path / "dispatch.prom"
    assert site.sweep("--metrics", str(metrics)).exit_code == 0
    path = site.ledger / "sweep" / "metrics-kept"
    path.write_bytes(damage(path.read_bytes()))  # type: ignore[operator]
    assert site.sweep("--metrics", str(metrics)).exit_code == 0
    counts = parsed(metrics.read_text())["dispatch_jobs"]
    assert counts[(("state", "succeeded"),)] == 3 and counts[(("state", "failed"),)] == 0
