"""``dispatch report``: where a job's hours went, as text, JSON and CSV, for one job or all;
the checkpoint store the job names (or ``--store``) decides what an ending lost."""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime
from pathlib import Path

import pytest
from cli_setup import ADA, Site

import dispatch
import publish

ME = {"USER": "ada"}


def sweeps(site: Site, n: int = 6) -> None:
    for _ in range(n):
        assert site.sweep().exit_code == 0


def report(site: Site, *args: str) -> tuple[int, str, str]:
    result = site.run(["report", *args, "--config", str(site.config)], env=ME)
    return result.exit_code, result.stdout, result.stderr


def preempted_then_recovered(site: Site, store: Path | None) -> str:
    """Submission 1 publishes once, then is preempted; submission 2 succeeds."""
    rule = dispatch.Rule(on=["preempted"], action="resubmit", budget=2)
    env = {"PUBLISH_STORE": str(store)} if store else {}
    spec = site.spec.model_copy(
        update={"recovery": dispatch.RecoveryPolicy(rules=(rule,)), "env": env, "nodes": 2}
    )
    job = site.cluster.operator.submit(spec, ADA, supervised=True).job
    sweeps(site)
    if store is not None:
        save = store.parent / "save"
        save.mkdir()
        (save / "model.bin").write_bytes(b"weights")
        publish.save(
            publish.open_store(str(store), publish.load_config(None)),
            save,
            100,
            publish.Epoch(1_000_000),
        )
    first = site.cluster.observer.get(job).submissions[0].canonical
    assert first is not None
    site.backend.env().preempt(first)
    sweeps(site)
    second = site.cluster.observer.get(job).submissions[1].canonical
    assert second is not None
    site.backend.env().complete(second)
    sweeps(site)
    return job


def _run_seconds(site: Site, job: str, n: int) -> float:
    out = site.run(["status", job, "--json", "--config", str(site.config)], env=ME).stdout
    (x,) = json.loads(out)["submissions"][n - 1]["executions"]
    return (
        datetime.fromisoformat(x["ended"]) - datetime.fromisoformat(x["started"])
    ).total_seconds()


def test_the_parts_of_the_report_add_up_to_the_wall_time(tmp_path: Path) -> None:
    site = Site(tmp_path)
    job = preempted_then_recovered(site, None)
    code, out, err = report(site, job, "--json")
    assert (code, err) == (0, "")
    d = json.loads(out)
    parts = d["queued_seconds"] + d["running_seconds"] + d["settling_seconds"]
    assert parts == pytest.approx(d["wall_seconds"], abs=0.01)
    assert sum(d["queued"].values()) == pytest.approx(d["queued_seconds"], abs=0.01)
    assert d["settled"] and d["state"] == "succeeded" and d["executions"] == 2
    assert d["useful_seconds"] + d["lost_seconds"] + d["at_risk_seconds"] == pytest.approx(
        d["running_seconds"], abs=0.01
    )


def test_without_a_store_the_preempted_run_is_lost_whole_and_the_report_says_so(
    tmp_path: Path,
) -> None:
    site = Site(tmp_path)
    job = preempted_then_recovered(site, None)
    d = json.loads(report(site, job, "--json")[1])
    ((lost),) = d["lost"]
    assert (lost["cause"], lost["endings"]) == ("preempted", 1)
    assert lost["seconds"] == pytest.approx(_run_seconds(site, job, 1), abs=0.002)
    assert lost["node_hours"] == pytest.approx(2 * lost["seconds"] / 3600, abs=1e-6)
    assert d["checkpoints"] == {
        "store": None,
        "publications": 0,
        "error": None,
        "whole_runs_at_risk": True,
    }
    code, out, _ = report(site, job)
    assert code == 0
    assert "no store named: each ended run is counted lost whole" in out
    assert "lost           " in out and "preempted" in out


def test_the_store_the_job_names_is_read_for_its_publications(tmp_path: Path) -> None:
    site = Site(tmp_path)
    store = tmp_path / "checkpoints"
    job = preempted_then_recovered(site, store)
    d = json.loads(report(site, job, "--json")[1])
    assert d["checkpoints"] == {
        "store": str(store),
        "publications": 1,
        "error": None,
        "whole_runs_at_risk": False,
    }
    assert d["lost"][0]["seconds"] <= _run_seconds(site, job, 1) + 0.001  # to the ms


def test_a_store_given_on_the_command_line_wins_and_an_unreadable_one_is_named(
    tmp_path: Path,
) -> None:
    site = Site(tmp_path)
    job = preempted_then_recovered(site, tmp_path / "checkpoints")
    bad = tmp_path / "not-a-store"
    bad.write_text("a file, not a folder")
    d = json.loads(report(site, job, "--json", "--store", str(bad / "x"))[1])
    assert d["checkpoints"]["store"] == str(bad / "x")
    assert d["checkpoints"]["whole_runs_at_risk"] is True
    assert "is not a folder" in d["checkpoints"]["error"]
    out = report(site, job, "--store", str(bad / "x"))[1]
    assert f"{bad / 'x'} unreadable (" in out


def test_all_jobs_as_a_table_and_as_csv_with_the_same_columns_for_every_row(
    tmp_path: Path,
) -> None:
    site = Site(tmp_path)
    job = preempted_then_recovered(site, None)
    (waiting,) = site.submit()
    code, out, _ = report(site, "--all")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == [
        "JOB",
        "NAME",
        "STATE",
        "WALL",
        "QUEUED",
        "RUNNING",
        "LOST",
        "NODE-HOURS",
        "GOODPUT",
    ]
    assert {ln.split()[0] for ln in lines[1:]} == {job, waiting}
    code, out, _ = report(site, "--since", "1h", "--csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and {r["job"] for r in rows} == {job, waiting}
    done = next(r for r in rows if r["job"] == job)
    assert float(done["lost_preempted_seconds"]) > 0 and done["lost_node_lost_seconds"] == "0.0"
    assert float(done["wall_seconds"]) == pytest.approx(
        sum(
            float(done[k])
            for k in (
                "gate_seconds",
                "pending_seconds",
                "held_seconds",
                "running_seconds",
                "settling_seconds",
            )
        ),
        abs=0.01,
    )


@pytest.mark.parametrize("args", [[], ["JOB", "--all"], ["--json", "--csv", "--all"]])
def test_a_report_needs_one_job_or_all_and_one_format(tmp_path: Path, args: list[str]) -> None:
    site = Site(tmp_path)
    (job,) = site.submit()
    code, out, err = report(site, *[job if a == "JOB" else a for a in args])
    assert code == 2 and out == ""
    assert err.startswith("error: ") and len(err.splitlines()) == 1


def _documented_keys() -> set[str]:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    section = doc.split("### `dispatch report JOB`", 1)[1].split("\n### ", 1)[0]
    rows = [ln.split("|")[1] for ln in section.splitlines() if ln.startswith("| `")]
    return {k.strip(" `") for row in rows for k in row.split(",")}


def test_the_json_keys_are_the_ones_docs_cli_md_lists(tmp_path: Path) -> None:
    site = Site(tmp_path)
    (job,) = site.submit()
    assert set(json.loads(report(site, job, "--json")[1])) == _documented_keys()


def test_a_manifest_time_without_a_zone_is_skipped_in_every_report_form(tmp_path: Path) -> None:
    """A manifest whose time has no zone (rewritten, with a matching log entry) raised
    ``TypeError`` comparing it with the run's times, in ``report``, ``--json``, ``--csv`` and
    ``--timeline``; that publication is not counted, and every form answers."""
    import hashlib

    from publish.log import LogEntry, entries

    site = Site(tmp_path)
    store = tmp_path / "checkpoints"
    job = preempted_then_recovered(site, store)
    opened = publish.open_store(str(store), publish.load_config(None))
    (pid,) = list(entries(opened))
    entry = LogEntry.from_json(opened.get_bytes(pid.log_key), pid)
    body = json.loads(opened.get_bytes(entry.manifest_key))
    body["time"] = "2026-01-05T09:00:00"
    raw = json.dumps(body).encode()
    opened.put_bytes(entry.manifest_key, raw)
    forged = LogEntry(entry.publication, entry.upload, hashlib.sha256(raw).hexdigest())
    opened.put_bytes(pid.log_key, forged.to_json())
    for args in ([job], [job, "--json"], ["--all", "--csv"]):
        code, out, err = report(site, *args)
        assert code == 0 and "Traceback" not in err, err
    assert json.loads(report(site, job, "--json")[1])["checkpoints"]["publications"] == 0
    result = site.run(["status", job, "--timeline", "--config", str(site.config)], env=ME)
    assert result.exit_code == 0, result.stderr
