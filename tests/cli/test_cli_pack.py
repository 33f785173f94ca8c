"""dispatch pack, and the packing sweeps do: every read verb answers for a packed job as it did
for its folder, a verb that changes one puts its folder back, and bad settings are refused
naming the key (docs/cli.md, docs/ledger.md "Packs")."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from cli_setup import ADA, Site

from dispatch.config import load


def settled_site(tmp_path: Path, n: int, extra: str = "") -> tuple[Site, list[str]]:
    site = Site(tmp_path, extra)
    jobs = site.submit(n)
    site.sweep()
    env = site.backend.env()
    for job in jobs:
        ref = env.objects(job)[-1]
        env.write(ref, f"step 1 of {job}\n")
        env.complete(ref)
    for _ in range(10):
        site.sweep()
        if not os.listdir(site.ledger / "unsettled"):
            break
    assert not os.listdir(site.ledger / "unsettled")
    return site, jobs


def answers(site: Site, job: str) -> list[tuple[int, str]]:
    config = ["--config", str(site.config)]
    runs = [
        ["status", job, *config],
        ["status", job, "--json", *config],
        ["list", "--all", *config],
        ["list", "--all", "--json", *config],
        ["report", job, "--json", *config],
        ["logs", job, *config],
        ["escalations", job, *config],
    ]
    out = []
    for args in runs:
        result = site.run(args)
        # A job's age moves on between two runs; nothing else may differ.
        text = re.sub(r'"age_seconds": \d+', '"age_seconds": N', result.stdout + result.stderr)
        out.append((result.exit_code, re.sub(r"(?<= )\d+[smhd](?= )", "AGE", text)))
    return out


def test_read_verbs_answer_for_packed_jobs_as_for_their_folders(tmp_path: Path) -> None:
    site, jobs = settled_site(tmp_path, 6)
    before = {job: answers(site, job) for job in jobs}
    assert all(code == 0 for code, _ in before[jobs[0]][:5])
    result = site.run(["pack", "--older-than", "0s", "--json", "--config", str(site.config)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["packed"] == 6 and report["folders"] == 0
    assert os.listdir(site.ledger / "jobs") == []
    for job in jobs:
        assert answers(site, job) == before[job]


def test_a_supersede_of_a_packed_job_puts_its_folder_back(tmp_path: Path) -> None:
    site, jobs = settled_site(tmp_path, 1)
    site.run(["pack", "--older-than", "0s", "--config", str(site.config)])
    assert not (site.ledger / "jobs" / jobs[0]).exists()
    plan = site.cluster.operator.supersede(jobs[0], ADA, "again")
    assert (site.ledger / "jobs" / jobs[0] / "r0000000001.json").exists()
    status = site.run(["status", jobs[0], "--json", "--config", str(site.config)])
    assert json.loads(status.stdout)["superseded_by"] == plan.job


def test_a_sweep_packs_when_due_and_says_so(tmp_path: Path) -> None:
    site, jobs = settled_site(tmp_path, 20, '[sweep]\npack_after = "1ms"\n')
    # The sweeps that settled the jobs packed what had settled then, ten minutes apart at most.
    (site.ledger / "sweep" / "packed").unlink(missing_ok=True)
    result = site.sweep("--json")
    packing = json.loads(result.stdout)["packing"]
    assert packing is not None and packing["shards_left"] == 0
    assert (site.ledger / "sweep" / "packed").exists()
    again = json.loads(site.sweep("--json").stdout)
    assert again["packing"] is None  # not due again for ten minutes
    listed = site.run(["list", "--all", "--json", "--config", str(site.config)])
    assert sorted(row["job"] for row in json.loads(listed.stdout)) == jobs


def test_pack_says_what_it_did_in_one_line(tmp_path: Path) -> None:
    site, _ = settled_site(tmp_path, 3)
    result = site.run(["pack", "--older-than", "0s", "--config", str(site.config)])
    assert result.stdout == (
        "packed 3 settled records into "
        f"{len(os.listdir(site.ledger / 'packs')) // 2} packs; 0 job folders left in the ledger\n"
    )
    again = site.run(["pack", "--older-than", "0s", "--config", str(site.config)])
    assert (
        again.stdout == "packed 0 settled records into 0 packs; 0 job folders left in the ledger\n"
    )


@pytest.mark.parametrize(
    ("sweep", "says"),
    [
        ('pack_after = "soon"', "sweep.pack_after = 'soon': expected a duration such as 12h"),
        ('pack_after = "0s"', "sweep.pack_after"),
        ('forget_after = "1h"', "sweep.forget_after = '1h': expected a duration no shorter"),
        ('pack_after = "never"\nforget_after = "30d"', "sweep.forget_after"),
        ("pack_after = 3", "sweep.pack_after = 3"),
    ],
)
def test_bad_packing_settings_are_refused_naming_the_key(
    tmp_path: Path, sweep: str, says: str
) -> None:
    config = tmp_path / "dispatch.toml"
    config.write_text(f'ledger = "{tmp_path / "l"}"\n[backend]\nname = "slurm"\n[sweep]\n{sweep}\n')
    with pytest.raises(Exception, match=says.replace("(", r"\(")):
        load(config)


def test_packing_settings_read_as_written(tmp_path: Path) -> None:
    config = tmp_path / "dispatch.toml"
    config.write_text(
        f'ledger = "{tmp_path / "l"}"\n[backend]\nname = "slurm"\n[sweep]\npack_after = "never"\n'
    )
    assert load(config).pack_after is None
    config.write_text(
        f'ledger = "{tmp_path / "l"}"\n[backend]\nname = "slurm"\n'
        '[sweep]\npack_after = "2h"\nforget_after = "90d"\n'
    )
    settings = load(config)
    assert settings.pack_after is not None and settings.forget_after is not None
    assert (settings.pack_after.total_seconds(), settings.forget_after.total_seconds()) == (
        7200,
        90 * 86400,
    )


def test_forgotten_records_leave_every_read_verb(tmp_path: Path) -> None:
    site, jobs = settled_site(tmp_path, 4, '[sweep]\npack_after = "1ms"\nforget_after = "1ms"\n')
    config = ["--config", str(site.config)]
    listed = site.run(["list", "--all", "--json", *config])  # rows kept, vouched by stamps
    assert len(json.loads(listed.stdout)) == 4
    first = json.loads(site.run(["pack", "--older-than", "0s", "--json", *config]).stdout)
    assert (first["packed"], first["forgotten"]) == (4, 0)  # a record is forgotten from a pack
    result = site.run(["pack", "--older-than", "0s", "--json", *config])
    assert json.loads(result.stdout)["forgotten"] == 4
    assert json.loads(site.run(["list", "--all", "--json", *config]).stdout) == []
    gone = site.run(["status", jobs[0], *config])
    assert gone.exit_code != 0 and jobs[0] in gone.output
