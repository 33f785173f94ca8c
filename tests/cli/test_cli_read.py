"""``dispatch status``, ``list`` and ``escalations``: tables for people, ``--json`` for scripts."""

from __future__ import annotations

import json
from pathlib import Path

from cli_setup import ADA, Site


def sweeps(site: Site, n: int) -> None:
    for _ in range(n):
        assert site.sweep().exit_code == 0


def test_status_shows_the_job_as_fields_and_as_json(tmp_path: Path) -> None:
    site = Site(tmp_path)
    (job,) = site.submit()
    sweeps(site, 6)
    result = site.run(["status", job, "--config", str(site.config)])
    assert result.exit_code == 0
    fields = dict(line.split(None, 1) for line in result.stdout.splitlines())
    assert fields["job"] == job and fields["name"] == "finetune"
    assert fields["state"] == "running" and fields["settled"] == "no"
    data = json.loads(site.run(["status", job, "--json", "--config", str(site.config)]).stdout)
    assert data["job"] == job and data["state"] == "running"
    assert data["submissions"][0]["canonical"]["id"]


def test_list_shows_unsettled_jobs_and_all_with_all(tmp_path: Path) -> None:
    site = Site(tmp_path)
    done, live = site.submit(2)
    site.cluster.operator.cancel(done, ADA, "not needed")
    sweeps(site, 3)
    config = ["--config", str(site.config)]
    table = site.run(["list", *config]).stdout.splitlines()
    assert table[0].split() == [
        "JOB", "NAME", "STATE", "CAUSE", "SUBMISSIONS", "ESCALATIONS", "SETTLED"
    ]
    assert [row.split()[0] for row in table[1:]] == [live]
    everything = json.loads(site.run(["list", "--all", "--json", *config]).stdout)
    assert sorted(s["job"] for s in everything) == sorted([done, live])
    assert {s["job"]: s["state"] for s in everything}[done] == "cancelled"


def test_escalations_lists_each_with_its_delivery(tmp_path: Path) -> None:
    site = Site(tmp_path)
    (job,) = site.submit()
    sweeps(site, 6)
    foreign = site.backend.env().inject_foreign(job)
    sweeps(site, 2)
    config = ["--config", str(site.config)]
    rows = site.run(["escalations", job, *config]).stdout.splitlines()
    assert rows[0].split() == ["ID", "AT", "DELIVERED", "DETAIL"]
    assert rows[1].startswith(f"foreign:{foreign.id} ")
    (e,) = json.loads(site.run(["escalations", job, "--json", *config]).stdout)
    assert e["id"] == f"foreign:{foreign.id}" and e["delivered"] is not None and e["detail"]


def test_reading_a_job_without_a_record_exits_1_naming_it(tmp_path: Path) -> None:
    site = Site(tmp_path)
    for command in ("status", "escalations"):
        result = site.run([command, "nosuchjob", "--config", str(site.config)])
        assert result.exit_code == 1
        assert result.stderr == "error: dispatch: not found: no record for job nosuchjob\n"
