"""Shared checkpoints on the live cluster with the SPANK plugin, as a user drives them.

Nothing is stood in: ``localcluster up --spank`` loads the plugin into the real slurmd and
slurmstepd; every command is a real ``dispatch`` process (``sbatch``, ``status``, ``cancel``)
beside ``dispatch supervise --follow``; a real ``high`` job preempts, a real slurmd is stopped.
Waits poll with a bound; nothing asserts on elapsed time.

With ``SLURM_LIVE_PREFIX`` and ``LOCALCLUSTER_CHROOT`` (a release chroot started with
``localcluster --release R up --spank``, as ``.ci/test``'s release stage runs them) the same
scenarios run against that release: dispatch reaches its Slurm through the prefix, reads the
plugin's spool through the chroot's folder, and the user's folder is one path on both sides
(a folder under the chroot, which the chroot sees under the same name through a link).
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import live_cluster
import pytest
from local_webhook import Peer

pytestmark = pytest.mark.live

DISPATCH = str(Path(sys.executable).parent / "dispatch")
WAIT = 240.0  # seconds: a hold asks the cessation signal again every minute
# Another release reached through a command prefix: SLURM_LIVE_PREFIX="chroot DIR env ...".
PREFIX = tuple(shlex.split(os.environ.get("SLURM_LIVE_PREFIX", "")))
CHROOT = os.environ.get("LOCALCLUSTER_CHROOT", "")
INNER_STATE = "var/lib/localcluster"  # the state folder inside a release's chroot


class Shell:
    """A user's shell with a config naming a fresh ledger, the cluster and the plugin's spool."""

    def __init__(self, folder: Path, cluster: dict[str, str], spool: str, extra: str = "") -> None:
        self.folder = folder
        self.config = folder / "dispatch.toml"
        reach = (
            f"prefix = {json.dumps(list(PREFIX))}\n"
            if PREFIX
            else f'slurm_conf = "{cluster["SLURM_CONF"]}"\n'
        )
        self.config.write_text(
            f'ledger = "{folder / "ledger"}"\n[backend]\nname = "slurm"\n'
            f'[backend.settings]\ntransport = "cli"\n{reach}'
            + (f'spank_spool = "{spool}"\n' if spool else "")
            + extra
        )
        self.env = {**os.environ, **cluster, "USER": "ada", "DISPATCH_CONFIG": str(self.config)}

    def slurm(self, *argv: str) -> None:
        """Run a Slurm command of the cluster's release, as an administrator would."""
        subprocess.run([*PREFIX, *argv], env=self.env, check=True, capture_output=True)

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
        result: dict[str, Any] = live_cluster.wait_for(
            what, lambda: self.status(job), ok, patience=WAIT
        )
        return result

    def script(self, name: str, rule: str, body: str) -> str:
        (self.folder / f"{name}.sbatch").write_text(
            "#!/bin/bash\n#SBATCH --partition=low\n#SBATCH --nodes=2\n"
            f"#SBATCH --output={self.folder}/{name}-%j.out\n"
            f"#DISPATCH --rule={rule}\n#DISPATCH --checkpoint=shared\n{body}\n"
        )
        return f"{name}.sbatch"


def localcluster() -> list[str]:
    """The command that manages the cluster these tests run on."""
    release = Path(CHROOT).parent.name.removeprefix("localcluster-")
    return [str(live_cluster.LOCALCLUSTER), *(["--release", release] if PREFIX else [])]


def cluster() -> dict[str, str]:
    """The cluster's client environment; behind a prefix, only its state folder."""
    if PREFIX:
        assert CHROOT, "SLURM_LIVE_PREFIX needs LOCALCLUSTER_CHROOT"
        return {"LOCALCLUSTER_STATE": str(Path(CHROOT) / INNER_STATE)}
    return live_cluster.cluster_env()


def spool() -> str:
    """The plugin's spool as this host sees it, the plugin loaded."""
    if PREFIX:
        state = Path(cluster()["LOCALCLUSTER_STATE"])
        assert (state / "etc" / "spank.on").exists(), "start the release with `up --spank`"
        return str(state / "dispatch-spool")
    up = subprocess.run(
        [str(live_cluster.LOCALCLUSTER), "up", "--spank"], capture_output=True, text=True
    )
    assert up.returncode == 0, up.stderr
    return live_cluster.cluster_env()["LOCALCLUSTER_SPANK_SPOOL"]


def user_folder(tmp_path: Path) -> Iterator[Path]:
    """A folder the user works in, the same path on the host and where the jobs run.

    Behind a chroot prefix: a folder in the chroot's ``/tmp``, and inside the chroot a link
    at the host's name of it, so a job's ``cd``, output paths and flags name one path."""
    if not PREFIX:
        yield tmp_path
        return
    inner = Path("/tmp") / f"dispatch-e2e-{secrets.token_hex(4)}"
    folder = Path(CHROOT) / inner.relative_to("/")
    folder.mkdir()
    link = Path(CHROOT) / folder.relative_to("/")
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(inner)
    try:
        yield folder
    finally:
        link.unlink()
        shutil.rmtree(folder, ignore_errors=True)


def shell_in(folder: Path, spank_spool: str, extra: str = "") -> Iterator[Shell]:
    sh = Shell(folder, cluster(), spank_spool, extra)
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


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    yield from user_folder(tmp_path)


@pytest.fixture
def shell(folder: Path) -> Iterator[Shell]:
    yield from shell_in(folder, spool())


@pytest.fixture
def plain_shell(folder: Path) -> Iterator[Shell]:
    spool()
    yield from shell_in(folder, "")


def wait_flag(folder: Path) -> str:
    return f'until [ -e "{folder}/go-$DISPATCH_SUBMISSION" ]; do sleep 1; done\necho trained'


def preempt(sh: Shell, node: str) -> None:
    sh.slurm(
        "sbatch",
        "--partition=high",
        f"--nodelist={node}",
        "--exclusive",
        "--output=/dev/null",
        "--wrap=sleep 15",
    )


def test_a_preempted_shared_checkpoint_recovers_by_itself_once_every_node_reported(
    shell: Shell,
) -> None:
    script = shell.script("shared", "preempted:resubmit:2", wait_flag(shell.folder))
    plan = shell.run("sbatch", "--plan", script)
    assert "checkpoint shared: every rule is a hold, lifted by itself once the cessation" in plan
    job = shell.run("sbatch", "--parsable", script).strip()
    first = shell.wait(job, "running", lambda d: d["state"] == "running")
    execution = first["submissions"][0]["executions"][0]
    slurm_job, nodes = execution["object"], execution["nodes"]
    assert len(nodes) == 2
    preempt(shell, nodes[0])
    second = shell.wait(job, "submission 2 running", lambda d: len(d["submissions"]) == 2)
    (shell.folder / "go-2").touch()
    done = shell.wait(job, "the job to settle", lambda d: d["settled"])
    assert (done["state"], second["holds"][0]["kind"]) == ("succeeded", "recovery")
    proven = [c for c in done["cessation"] if c["object"] == slurm_job and c["ceased"]]
    assert proven, done["cessation"]
    assert proven[-1]["detail"] == (
        f"every node of Slurm job {slurm_job} (execution 0) recorded its end: {', '.join(nodes)}"
    )
    assert f"Slurm job {slurm_job}: ceased: every node" in shell.run("status", job)
    assert [(e["to"], e["submission"]) for e in done["history"]][-1] == ("succeeded", 2)


def test_a_node_whose_slurmd_stopped_leaves_the_hold_waiting_and_cancel_names_it(
    shell: Shell,
) -> None:
    script = shell.script("lost", "node-lost:resubmit:2", "sleep 600")
    job = shell.run("sbatch", "--parsable", script).strip()
    running = shell.wait(job, "running", lambda d: d["state"] == "running")
    execution = running["submissions"][0]["executions"][0]
    slurm_job, lost = execution["object"], execution["nodes"][-1]
    state = Path(shell.env["LOCALCLUSTER_STATE"])
    os.kill(int((state / "run" / f"slurmd-{lost}.pid").read_text().split()[0]), signal.SIGTERM)
    try:
        shell.slurm("scontrol", "update", f"nodename={lost}", "state=down", "reason=spank-e2e")
        unproven = f"cessation unproven on {lost}: no epilog record of Slurm job {slurm_job}"
        held = shell.wait(
            job,
            "the cessation answer naming the lost node",
            lambda d: any(c["detail"].startswith(unproven) for c in d["cessation"]),
        )
        assert len(held["submissions"]) == 1 and held["holds"][0]["active"]
        assert "recovery hold 1" in held["waiting"]
        said = shell.run("cancel", job, "--reason", "node gone")
        assert f"{slurm_job}: {unproven}" in said, said
    finally:
        subprocess.run([*localcluster(), "up"], capture_output=True, timeout=900)


def test_a_node_whose_end_cannot_be_proven_is_escalated_and_the_webhook_gets_it(
    folder: Path, tmp_path: Path
) -> None:
    """The node's slurmd is killed under a shared-checkpoint job: the hold waits (no proof
    that its processes are gone), and once it has waited the job's clean-up deadline (20 s
    here) the sweeper escalates ``cessation-unproven:1``, naming the node, to the webhook."""
    with Peer(tmp_path) as peer:
        deliver = f'[deliver]\nwebhook = "{peer.url}"\ntimeout = "10s"\n'
        for shell in shell_in(folder, spool(), deliver):
            script = shell.script("unproven", "node-lost:resubmit:2", "sleep 600")
            text = (shell.folder / script).read_text()
            (shell.folder / script).write_text(
                text.replace(
                    "#DISPATCH --checkpoint",
                    "#DISPATCH --cleanup-deadline=20s\n#DISPATCH --checkpoint",
                )
            )
            job = shell.run("sbatch", "--parsable", script).strip()
            running = shell.wait(job, "running", lambda d: d["state"] == "running")
            execution = running["submissions"][0]["executions"][0]
            lost = execution["nodes"][-1]
            state = Path(shell.env["LOCALCLUSTER_STATE"])
            pid = int((state / "run" / f"slurmd-{lost}.pid").read_text().split()[0])
            os.kill(pid, signal.SIGTERM)
            try:
                shell.slurm("scontrol", "update", f"nodename={lost}", "state=down", "reason=e2e")
                posted = live_cluster.wait_for(
                    "the webhook to get cessation-unproven:1",
                    peer.requests,
                    lambda got: any("cessation-unproven:1" in r["body"] for r in got),
                    patience=WAIT,
                )
                [body] = [r["body"] for r in posted if "cessation-unproven:1" in r["body"]]
                assert f"cessation unproven on {lost}" in body, body
                st = shell.status(job)
                assert len(st["submissions"]) == 1 and st["holds"][0]["active"]
                [e] = [e for e in st["escalations"] if e["id"] == "cessation-unproven:1"]
                assert e["delivered"] is not None and e["waiting"], e
                assert e["answer"] == f"dispatch resubmit {job} | dispatch give-up {job} | " + (
                    f"dispatch cancel {job}"
                )
            finally:
                subprocess.run([*localcluster(), "up"], capture_output=True, timeout=900)


def stale_script(sh: Shell, name: str, stale_run: str) -> str:
    """Submission 1 exits 3 (a rule resubmits), submission 2 waits for its flag; a run of
    submission 1's Slurm job after the first (requeued by hand) does ``stale_run``."""
    (sh.folder / f"{name}.sbatch").write_text(
        "#!/bin/bash\n#SBATCH --partition=low\n"
        f"#SBATCH --output={sh.folder}/{name}-%j.out\n"
        "#DISPATCH --rule=requeued:requeue:1\n#DISPATCH --rule=non-zero-exit:resubmit:1\n"
        'if [ "$DISPATCH_SUBMISSION" = 1 ]; then\n'
        '    if [ "${SLURM_RESTART_COUNT:-0}" != 0 ]; then ' + stale_run + "; fi\n"
        '    echo "first $SLURM_RESTART_COUNT"; exit 3\nfi\n' + wait_flag(sh.folder) + "\n"
    )
    return f"{name}.sbatch"


def requeue_the_first(sh: Shell, job: str) -> tuple[str, dict[str, Any]]:
    """Once submission 2 runs, an administrator requeues submission 1's Slurm job (a requeue
    rule made it requeueable); Slurm runs it again once its credential expired."""
    second = sh.wait(
        job,
        "submission 2 running",
        lambda d: d["state"] == "running" and len(d["submissions"]) == 2,
    )
    first: str = second["submissions"][0]["object"]
    sh.slurm("scontrol", "requeue", first)
    return first, second


def test_without_the_plugin_shared_checkpoints_wait_and_a_stale_run_is_cancelled(
    plain_shell: Shell,
) -> None:
    sh = plain_shell
    script = sh.script("plain", "preempted:resubmit:2", wait_flag(sh.folder))
    plan = sh.run("sbatch", "--plan", script)
    assert (
        "checkpoint shared: every rule is a hold for a person to decide (no cessation signal: "
        "no spank_spool setting" in plan
    )
    # Preempted, it is held for a person, and status says why: no cessation signal.
    shared = sh.run("sbatch", "--parsable", script).strip()
    running = sh.wait(shared, "running", lambda d: d["state"] == "running")
    preempt(sh, running["submissions"][0]["executions"][0]["nodes"][0])
    unproven = "no cessation evidence: no spank_spool setting: the SPANK plugin is not used"
    held = sh.wait(
        shared,
        "the hold and the cessation answer",
        lambda d: any(c["detail"].startswith(unproven) for c in d["cessation"]),
    )
    assert len(held["submissions"]) == 1 and held["holds"][0]["active"]
    assert "recovery hold 1" in held["waiting"]
    assert f"not proven ceased: {unproven}" in sh.run("status", shared)
    sh.run("cancel", shared, "--reason", "decided by a person")
    # Nothing refuses a stale execution at launch here: it starts, and the supervisor
    # (dispatch supervise --follow) cancels it once it finds it running.
    job = sh.run("sbatch", "--parsable", stale_script(sh, "unfenced", "echo stale-run; sleep 600"))
    first, second = requeue_the_first(sh, job.strip())
    job = job.strip()
    stopped = sh.wait(
        job,
        "the stale execution stopped and ended",
        lambda d: any(x["state"] == "ended" and x["stopped"] for x in d["stale"]),
    )
    [x] = stopped["stale"]
    assert (x["object"], x["submission"], x["restarts"], x["current"]) == (first, 1, 1, 2)
    assert x["stopped"]["by"].startswith("supervisor:"), x
    # Nothing refused it at launch. Whether its script printed before the supervisor's cancel
    # reached it is a race (the cancel follows the first look that shows it running).
    out = (sh.folder / f"unfenced-{first}.out").read_text()
    assert "stale execution:" not in out and x["cause"]["exit_code"] != 97, (out, x)
    # Never the job's: the current submission runs on, no rule fired, no state changed.
    assert stopped["state"] == "running" and len(stopped["submissions"]) == 2
    assert [(r["index"], r["firings"]) for r in stopped["rules"]] == [(0, 0), (1, 1)]
    assert stopped["history"] == second["history"]
    said = sh.run("status", job)
    assert f"Slurm job {first} (submission 1, execution 1) ran again when submission 2" in said
    assert f" by {x['stopped']['by']}; not the job's, no rule fired" in said, said
    (sh.folder / "go-2").touch()
    assert sh.wait(job, "the job to settle", lambda d: d["settled"])["state"] == "succeeded"


def test_an_older_submission_requeued_by_hand_is_refused_and_read_as_stale(shell: Shell) -> None:
    job = shell.run("sbatch", "--parsable", stale_script(shell, "stale", "echo stale-run")).strip()
    first, second = requeue_the_first(shell, job)
    stale = shell.wait(
        job,
        "the stale execution to end",
        lambda d: any(x["state"] == "ended" for x in d["stale"]),
    )
    [x] = stale["stale"]
    assert (x["object"], x["submission"], x["restarts"], x["current"]) == (first, 1, 1, 2)
    # Refused by the plugin, which fences, before its program started. (The supervisor also
    # stops a stale execution it sees running: whether a look fell in its second of life is
    # a race, so `stopped` may say so or not.)
    assert x["cause"]["exit_code"] == 97, x
    out = (shell.folder / f"stale-{first}.out").read_text()
    assert "first 1" not in out and "stale-run" not in out
    assert f"stale execution: job {job} is at submission 2; submission 1 may not run" in out
    assert stale["state"] == "running" and len(stale["submissions"]) == 2
    assert [(r["index"], r["firings"]) for r in stale["rules"]] == [(0, 0), (1, 1)]
    assert stale["history"] == second["history"]
    said = shell.run("status", job)
    assert f"Slurm job {first} (submission 1, execution 1) ran again when submission 2" in said
    (shell.folder / "go-2").touch()
    done = shell.wait(job, "the job to settle", lambda d: d["settled"])
    assert done["state"] == "succeeded"
