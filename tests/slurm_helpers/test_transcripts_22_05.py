"""The recorded Slurm 22.05 transcripts (tests/data/slurm-22.05) are complete and agree.

Each scenario folder must hold every capture, its JSON must parse, it must come from 22.05, and
the job's state must read the same in squeue, scontrol and squeue --json, so that tests built on
these files stand on real, consistent output.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm-22.05"
SCENARIOS = sorted(p.name for p in DATA.iterdir() if (p / "meta.json").is_file())
FILES = ["submit.txt", "squeue.json", "squeue.txt", "scontrol.txt", "sacct.txt", "sacct.json"]


def test_every_situation_was_recorded() -> None:
    wanted = {
        "held",
        "begin-future",
        "running",
        "completed",
        "failed-exit3",
        "timeout",
        "preempted-requeued",
        "preempted-cancel",
        "node-failed",
        "launch-failed",
        "no-capacity",
    }
    assert wanted <= set(SCENARIOS)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_transcript_is_complete_and_consistent(scenario: str) -> None:
    folder = DATA / scenario
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["sinfo_version"] == "slurm-wlm 22.05.8"
    for name in FILES:
        assert (folder / name).is_file(), name
    for name, call in meta["commands"].items():
        assert call["rc"] == 0, (name, call["stderr"])
    job_id = meta["job_id"]

    squeue_line = (folder / "squeue.txt").read_text().strip().split("|")
    assert squeue_line[0] == str(job_id)
    assert (
        squeue_line[4] == f"dispatch:{meta['scenario']}:1:1"
        or "dispatch-fail-prolog" in (squeue_line[4])
    )

    scontrol = (folder / "scontrol.txt").read_text()
    match = re.search(r"\bJobState=(\S+)", scontrol)
    assert match is not None
    assert match.group(1) == squeue_line[2]

    squeue_json = json.loads((folder / "squeue.json").read_text())
    assert squeue_json["meta"]["Slurm"]["release"] == "22.05.8"
    ours = [j for j in squeue_json["jobs"] if j["job_id"] == job_id]
    assert len(ours) == 1
    assert ours[0]["job_state"] == squeue_line[2]
    assert ours[0]["name"] == f"dj-{meta['scenario']}"

    sacct_json = json.loads((folder / "sacct.json").read_text())
    assert all(j["job_id"] == job_id for j in sacct_json["jobs"])
