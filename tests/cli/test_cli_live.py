"""The people's commands live, as a user types them: jobs submitted with ``dispatch sbatch`` on
the local Slurm cluster, acted on with ``hold``, ``release``, ``cancel``, ``resubmit`` and
``give-up``, read with ``status`` and ``logs``, each action visible with its actor.

Every command is a real ``dispatch`` process with the user's environment; the supervisor is
``dispatch supervise --follow`` running beside them, as a user would leave it in tmux.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import live_cluster
import pytest

from dispatch.adapters.slurm.output_paths import paths_from_scontrol

DISPATCH = str(Path(sys.executable).parent / "dispatch")


class Shell:
    """A user's shell in a project folder, with a config naming a fresh ledger and the cluster."""

    def __init__(self, folder: Path, cluster: dict[str, str]) -> None:
        self.folder = folder
        self.config = folder / "dispatch.toml"
        self.config.write_text(
            f'ledger = "{folder / "ledger"}"\n[backend]\nname = "slurm"\n'
            f'[backend.settings]\ntransport = "cli"\nslurm_conf = "{cluster["SLURM_CONF"]}"\n'
        )
        self.env = {
            **os.environ,
            **cluster,
            "USER": "ada",
            "DISPATCH_CONFIG": str(self.config),
            "XDG_STATE_HOME": str(folder / "state"),
        }

    def attempt(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [DISPATCH, *args],
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=live_cluster.WAIT,
            check=False,
        )

    def run(self, *args: str) -> str:
        done = self.attempt(*args)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout

    def status(self, job: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.run("status", job, "--json"))
        return data

    def wait(self, job: str, what: str, ok: Any) -> dict[str, Any]:
        result: dict[str, Any] = live_cluster.wait_for(what, lambda: self.status(job), ok)
        return result

    def submit(self, name: str, body: str) -> str:
        (self.folder / f"{name}.sbatch").write_text(
            "#!/bin/bash\n#SBATCH --partition=low\n"
            f"#SBATCH --output={self.folder}/{name}-%j.out\n{body}\n"
        )
        return self.run("sbatch", "--parsable", f"{name}.sbatch").strip()


@pytest.fixture
def shell(tmp_path: Path) -> Iterator[Shell]:
    try:
        cluster = live_cluster.cluster_env()
    except RuntimeError as err:
        pytest.fail(str(err))
    folder = tmp_path
    sh = Shell(folder, cluster)
    sweeper = subprocess.Popen(
        [DISPATCH, "supervise", "--follow", "--every", "1s"],
        cwd=folder,
        env=sh.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield sh
    finally:
        sweeper.send_signal(signal.SIGTERM)
        sweeper.wait(live_cluster.WAIT)
        for row in json.loads(sh.run("list", "--json")):
            sh.attempt("emergency-stop", row["job"])


def actions(data: dict[str, Any]) -> list[tuple[str, str]]:
    return [(a["action"], a["by"]) for a in data["actions"]]


@pytest.mark.live
def test_a_job_is_held_released_and_cancelled_from_the_shell(shell: Shell) -> None:
    job = shell.submit("held", 'echo "hello from $SLURM_JOB_ID"\nsleep 300')
    running = shell.wait(job, "the job to run", lambda d: d["state"] == "running")
    slurm_job = running["submissions"][0]["object"]
    assert running["scheduler"]["reachable"] and running["submissions"][0]["executions"][0]["nodes"]
    hello = f"hello from {slurm_job}\n"
    live_cluster.wait_for("its output", lambda: shell.attempt("logs", job[:8]).stdout, hello.__eq__)

    said = shell.run("hold", job, "--for", "1h", "--reason", "dataset rebuild")
    assert said.startswith(f"hold 1 placed on job {job} until ")
    shell.wait(job, "the hold", lambda d: d["holds"] and d["holds"][0]["active"])
    assert shell.run("release", job) == (
        f"hold 1 of job {job} released; the next sweep lets it run\n"
    )
    said = shell.run("cancel", job, "--reason", "wrong config")
    assert said.startswith("cancel committed; clean-up: ")
    done = shell.wait(job, "the job to settle", lambda d: d["settled"])
    assert done["state"] == "cancelled"
    assert actions(done) == [
        ("hold", "human:ada"),
        ("release", "human:ada"),
        ("cancel", "human:ada"),
    ]
    assert [(e["to"], e["by"]) for e in done["history"] if e["by"] == "human:ada"] == [
        ("held", "human:ada"),
        ("pending", "human:ada"),
    ]
    text = shell.run("status", job)
    assert "hold by human:ada: dataset rebuild" in text
    assert "cancel by human:ada: wrong config" in text
    assert f"Slurm job {slurm_job} (first, authorized " in text
    forgotten(shell, job, slurm_job, hello)
    controller_down(shell, job)


def forgotten(shell: Shell, job: str, slurm_job: str, hello: str) -> None:
    """Once the controller has forgotten the Slurm job (``MinJobAge``), ``logs`` still prints
    its output from the path kept when a look first saw it run; with nothing kept, one line
    says what is missing."""
    live_cluster.forget_job(shell.env, slurm_job)
    assert shell.run("logs", job).startswith(hello)
    kept = shell.folder / "state" / "dispatch" / "slurm-output" / f"dj-{job}.{slurm_job}.0"
    kept.unlink()
    missing = shell.attempt("logs", job)
    assert missing.returncode == 1 and missing.stdout == "", missing
    assert len(missing.stderr.splitlines()) == 1, missing.stderr
    assert f"Slurm no longer knows job {slurm_job} (MinJobAge)" in missing.stderr
    assert "kept no output path" in missing.stderr, missing.stderr


def controller_down(shell: Shell, job: str) -> None:
    """With the controller unreachable (a slurm.conf naming a port nobody listens on), the
    record still answers status and list, and says the scheduler is unreachable."""
    etc = Path(shell.env["SLURM_CONF"]).parent
    broken = shell.folder / "etc-down"
    broken.mkdir(exist_ok=True)
    for f in etc.iterdir():
        text = f.read_text() if f.is_file() else ""
        if f.name == "slurm.conf":
            text = re.sub(r"(?m)^SlurmctldPort=.*$", "SlurmctldPort=6999", text)
        (broken / f.name).write_text(text)
    shell.config.write_text(
        shell.config.read_text().replace(shell.env["SLURM_CONF"], str(broken / "slurm.conf"))
    )
    shell.env["SLURM_CONF"] = str(broken / "slurm.conf")
    text = shell.run("status", job)
    assert re.search(r"(?m)^state +cancelled$", text)
    down = r"(?m)^scheduler now +unreachable \(.*Unable to contact slurm controller"
    assert re.search(down, text)
    listed = shell.attempt("list", "--all")
    assert listed.returncode == 0 and listed.stdout.splitlines()[1].split()[0] == job
    assert listed.stderr.startswith("note: the scheduler is unreachable")


@pytest.mark.live
def test_a_failing_job_is_answered_with_resubmit_then_give_up(shell: Shell) -> None:
    job = shell.submit("fails", "#DISPATCH --rule=non-zero-exit:hold:2:1h\necho trying\nexit 3")
    held = shell.wait(
        job, "the recovery hold", lambda d: d["holds"] and d["holds"][-1]["kind"] == "recovery"
    )
    assert held["state"] == "held"
    err_line = shell.attempt("release", job)
    assert err_line.returncode == 1 and "is a recovery hold" in err_line.stderr
    assert shell.run("resubmit", job, "--reason", "flaky node") == (
        f"resubmit of job {job} asked; the next sweep launches submission 2\n"
    )
    again = shell.wait(job, "the second hold", lambda d: len(d["holds"]) == 2)
    assert [s["n"] for s in again["submissions"]] == [1, 2]
    assert shell.run("give-up", job, "--reason", "it really fails").startswith(
        f"job {job} given up"
    )
    done = shell.wait(job, "the job to settle", lambda d: d["settled"])
    assert done["state"] == "failed" and done["cause"]["kind"] == "non-zero-exit"
    assert actions(done) == [("resubmit", "human:ada"), ("give-up", "human:ada")]
    text = shell.run("status", job)
    assert "resubmit by human:ada: flaky node" in text
    assert "give-up by human:ada: it really fails" in text
    assert shell.run("logs", job, "--submission", "2") == "trying\n"
    assert shell.attempt("logs", job, "--submission", "3").returncode == 1


def test_the_output_paths_are_read_from_scontrols_one_line_reply() -> None:
    reply = (
        "JobId=185 JobName=dj-x UserId=root(0) WorkDir=/tmp/p StdErr=/tmp/p/err-185.txt "
        "StdIn=/dev/null StdOut=/tmp/p/out-185.txt Power= TresPerNode=gres:fake:2\n"
    )
    assert paths_from_scontrol(reply) == {
        "stdout": "/tmp/p/out-185.txt",
        "stderr": "/tmp/p/err-185.txt",
    }


@pytest.mark.live
def test_logs_of_a_job_writing_to_dev_zero_is_one_line_not_a_memory_error(shell: Shell) -> None:
    """``logs`` read ``/dev/zero`` until ``MemoryError``, and a FIFO as the output forever
    (opening it waits for a writer): the output is opened without blocking and refused unless
    it is a regular file, with and without ``--follow``."""
    fifo = shell.folder / "out.fifo"
    os.mkfifo(fifo)
    jobs = {}
    for name, output in (("zero", Path("/dev/zero")), ("fifo", fifo)):
        (shell.folder / f"{name}.sbatch").write_text(
            f"#!/bin/bash\n#SBATCH --partition=low\n#SBATCH --output={output}\nsleep 300\n"
        )
        jobs[output] = shell.run("sbatch", "--parsable", f"{name}.sbatch").strip()
    for output, job in jobs.items():
        shell.wait(job, "the job to run", lambda d: d["state"] == "running")
        for args in (["logs", job], ["logs", job, "--follow"]):
            done = shell.attempt(*args)
            assert (done.returncode, done.stdout) == (1, ""), done.stderr
            assert f"{output}, which is not a regular file" in done.stderr
            assert done.stderr.count("\n") == 1


@pytest.mark.live
def test_cancel_of_a_name_that_is_also_another_jobs_id_prefix_refuses_and_cancels_nothing_live(
    shell: Shell,
) -> None:
    """A job *named* like the start of another job's id: ``dispatch cancel`` with that word
    cancelled the other job. On the live cluster it is refused (exit 2) naming both, and both
    jobs keep running."""
    first = shell.submit("first", "sleep 300")
    (shell.folder / "second.sbatch").write_text(
        f"#!/bin/bash\n#SBATCH --partition=low\n#SBATCH --output={shell.folder}/second.out\n"
        "sleep 300\n"
    )
    second = shell.run("sbatch", "--parsable", f"--job-name={first[:3]}", "second.sbatch").strip()
    for job in (first, second):
        shell.wait(job, "the job to run", lambda d: d["state"] == "running")
    done = shell.attempt("cancel", first[:3], "--reason", "meant one of them")
    assert (done.returncode, done.stdout) == (2, "")
    assert f"{second} (its name)" in done.stderr and f"{first} (the start of its id)" in done.stderr
    for job in (first, second):
        assert shell.status(job)["state"] == "running"
        assert [a for a, _ in actions(shell.status(job))].count("cancel") == 0
