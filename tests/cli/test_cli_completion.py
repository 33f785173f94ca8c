"""Shell completion (click's): verbs, and the ledger's job ids wherever a verb takes a JOB."""

from __future__ import annotations

from pathlib import Path

from cli_setup import Site
from click.testing import CliRunner

from dispatch.cli.main import main


def complete(site: Site, line: str) -> list[str]:
    words = line.split(" ")
    env = {
        "_DISPATCH_COMPLETE": "bash_complete",
        "COMP_WORDS": line,
        "COMP_CWORD": str(len(words) - 1),
        "DISPATCH_CONFIG": str(site.config),
    }
    result = CliRunner().invoke(main, [], env=env, prog_name="dispatch")
    assert result.exit_code == 0, result.stderr
    return [row.split(",", 1)[1] for row in result.stdout.splitlines() if row]


def test_verbs_complete(tmp_path: Path) -> None:
    site = Site(tmp_path)
    assert {"release", "requeue", "resubmit"} <= set(complete(site, "dispatch re"))
    assert "emergency-stop" in complete(site, "dispatch em")


def test_job_ids_complete_for_every_verb_that_takes_a_job(tmp_path: Path) -> None:
    site = Site(tmp_path)
    a, b = site.submit(2)
    for verb in (
        "status",
        "logs",
        "escalations",
        "hold",
        "release",
        "cancel",
        "requeue",
        "resubmit",
        "supersede",
        "give-up",
        "abandon",
        "emergency-stop",
    ):
        assert sorted(complete(site, f"dispatch {verb} ")) == sorted([a, b]), verb
        assert complete(site, f"dispatch {verb} {a[:3]}") == [
            j for j in sorted([a, b]) if j.startswith(a[:3])
        ]


def test_completion_offers_nothing_without_a_ledger(tmp_path: Path) -> None:
    site = Site(tmp_path)
    site.config.write_text(site.config.read_text().replace(str(site.ledger), str(tmp_path / "no")))
    assert complete(site, "dispatch status ") == []
    assert not (tmp_path / "no").exists()
