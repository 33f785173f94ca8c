"""find_many for many jobs: the name list never becomes an argument too long to run.

Linux refuses to start a program with one argument over 128 KiB (MAX_ARG_STRLEN); a --name
list of every job's object name reached that at about 6,550 jobs. squeue and sacct select by
user alone (the uid is always on the command line; a job's name is its user's) and the
adapter keeps the rows whose comment names a job it asked for."""

from __future__ import annotations

from test_slurm_backend import ScriptedRunner

from dispatch.adapters.slurm import render
from dispatch.adapters.slurm.backend import SlurmBackend
from dispatch.adapters.slurm.parse import SEPARATOR
from dispatch.adapters.slurm.run import Reply
from dispatch.adapters.slurm.settings import SlurmSettings

MAX_ARG_STRLEN = 128 * 1024


def test_the_queries_select_the_users_jobs_and_never_carry_a_name_list() -> None:
    squeue = render.squeue_argv(uid=1000)
    sacct = render.sacct_argv(uid=1000, since="now-60days")
    json_squeue = render.squeue_argv(uid=1000, json=True)
    assert "--user=1000" in squeue and "--uid=1000" in sacct and "--user=1000" in json_squeue
    assert not [a for a in squeue + sacct + json_squeue if a.startswith("--name")]


def test_find_many_of_100000_jobs_is_one_squeue_and_one_sacct_with_short_arguments() -> None:
    """Stand-in transport (``ScriptedRunner``): squeue shows two of the jobs and one job of the
    same user that is not dispatch's; only the asked-for names come back."""
    jobs = [f"job{i:06d}" for i in range(100_000)]

    def squeue(argv: list[str]) -> Reply:
        # Rows shaped as 22.05 prints them (data/22.05/adapter/gated.json).
        def row(job_id: str, comment: str) -> str:
            fields = [
                job_id,
                "train",
                "RUNNING",
                "None",
                "0",
                "0",
                "0",
                "0",
                "N/A",
                "1796209814",
                "1796209815",
                "1796209915",
                "n1",
                job_id,
                "N/A",
                comment,
            ]
            return SEPARATOR.join(fields)

        rows = [
            row("11", f"dispatch:{jobs[7]}:1/1"),
            row("12", f"dispatch:{jobs[99_999]}:1/1"),
            row("13", "someone else's training"),
        ]
        return Reply(tuple(argv), 0, "\n".join(rows) + "\n", "")

    runner = ScriptedRunner(
        {
            "sinfo": "slurm 22.05.8\n",
            "id": "uid=1000(ada) gid=1000(ada) groups=1000(ada)\n",
            "scontrol show": "AccountingStorageType   = accounting_storage/slurmdbd\n",
            "sbatch --help": "",
            "squeue": squeue,
            "sacct": "",
        }
    )
    backend = SlurmBackend(runner, SlurmSettings(json="no"))
    found = backend.find_many(jobs)
    queries = [a for a in runner.seen if a[0] in ("squeue", "sacct")]
    assert [a[0] for a in queries] == ["squeue", "sacct"]
    longest: str = max((a for q in queries for a in q), key=len)
    assert len(longest.encode()) < MAX_ARG_STRLEN
    assert len(found) == len(jobs)
    shown = {job: [o.ref.id for o in d.objects] for job, d in found.items() if d.objects}
    assert shown == {jobs[7]: ["11"], jobs[99_999]: ["12"]}
