"""The ssh transport against a real OpenSSH server, in front of the real local Slurm cluster.

Nothing is stood in: ``live_ssh`` starts Debian's sshd on 127.0.0.1 (key-only, strict modes),
the client is the real ``ssh`` with strict host key checking, and behind it run the real
Slurm 22.05 commands of ``slurm_helpers/localcluster``. These tests always go through ssh;
``SLURM_LIVE_TRANSPORT=ssh`` runs the whole live suite and the conformance suite that way too.
"""

from __future__ import annotations

import secrets
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import live_cluster
import live_ssh
import pytest
from test_slurm_live import jobs, new_job

from dispatch.adapters.slurm.backend import SlurmBackend
from dispatch.adapters.slurm.run import CommandRunner
from dispatch.adapters.slurm.settings import SlurmSettings
from dispatch.batch import request
from dispatch.model.enums import CauseKind, ObjectState
from dispatch.model.errors import OutcomeUnknownError, UnreachableError
from dispatch.model.objects import ObjectRef, StartRequest
from dispatch.model.values import JobSpec

__all__ = ["jobs"]  # the fixture, used by name: it stops the jobs through this module's backend

pytestmark = pytest.mark.live

HOSTILE = "a b 'single' \"double\"\nsecond line $(echo ran) `echo ran` ${HOME} ; | & \\ ,="
WORDS = ("a b", "it's", 'say "hi"', "two\nlines", "$(echo ran)", "`echo ran`", ";|&", "", "*")


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    try:
        return live_cluster.cluster_env()
    except RuntimeError as err:
        pytest.fail(str(err))


@pytest.fixture(scope="module")
def server() -> live_ssh.SshServer:
    try:
        return live_ssh.server()
    except RuntimeError as err:
        pytest.fail(str(err))


@pytest.fixture
def backend(server: live_ssh.SshServer, env: dict[str, str]) -> SlurmBackend:
    return SlurmBackend(server.runner(env), SlurmSettings(transport="ssh"))


@pytest.fixture
def lone_server() -> Iterator[live_ssh.SshServer]:
    """A server of this test's own, which the test may break."""
    s = live_ssh.start()
    yield s
    s.stop()


def request_for(job: str, spec: JobSpec) -> StartRequest:
    return StartRequest(job=job, submission=1, attempt=1, lineage_submission=1, spec=spec)


def wait_ended(backend: SlurmBackend, ref: ObjectRef) -> None:
    live_cluster.wait_for(
        f"{ref} to end", lambda: backend.inspect(ref).state, lambda s: s is ObjectState.ENDED
    )


def odd_folder(tmp_path: Path) -> Path:
    """A folder whose name needs quoting: blanks and both quotes."""
    folder = tmp_path / 'it\'s a "folder"'
    folder.mkdir()
    return folder


def test_command_words_and_env_values_arrive_verbatim_through_ssh(
    backend: SlurmBackend, jobs: list[str], tmp_path: Path
) -> None:
    """Blanks, quotes, newlines and shell syntax in the command, the environment and the
    output path cross ssh's remote shell and Slurm unchanged."""
    folder = odd_folder(tmp_path)
    out = folder / "out put.txt"
    program = 'printf "[%s]\\n" "$@"; printf "<%s>\\n" "$HOSTILE"'
    spec = JobSpec(
        command=("sh", "-c", program, "sh", *WORDS),
        env={"HOSTILE": HOSTILE},
        output_path=str(out),
        working_directory=str(folder),
    )
    job = new_job(jobs)
    ref = backend.start(request_for(job, spec))
    (obs,) = backend.find(job).objects
    assert (obs.ref.id, obs.state, obs.submission) == (ref.id, ObjectState.GATED, 1)
    backend.open(ref)
    wait_ended(backend, ref)
    assert backend.inspect(ref).cause.kind is CauseKind.NONE
    expected = "".join(f"[{w}]\n" for w in WORDS) + f"<{HOSTILE}>\n"
    assert out.read_text() == expected


def test_the_runners_own_variables_reach_the_far_end_verbatim(
    server: live_ssh.SshServer, env: dict[str, str]
) -> None:
    """``env NAME=VALUE`` on the remote command line (how SLURM_CONF travels) keeps a value
    with blanks, quotes, newlines and shell syntax whole."""
    runner = server.runner({**env, "DISPATCH_TEST_VALUE": HOSTILE})
    assert runner.run(["printenv", "DISPATCH_TEST_VALUE"]).stdout == HOSTILE + "\n"
    assert runner.run(["printenv", "SLURM_CONF"]).stdout == env["SLURM_CONF"] + "\n"


class ProcessTable:
    """Watches every process's command line while a call runs, for a given text."""

    def __init__(self, text: str) -> None:
        self.text = text.encode()
        self.seen: list[str] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self.done.is_set():
            for proc in Path("/proc").iterdir():
                try:
                    line = (proc / "cmdline").read_bytes()
                except OSError:
                    continue
                if self.text in line:
                    self.seen.append(line.replace(b"\0", b" ").decode(errors="replace"))

    def __enter__(self) -> ProcessTable:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()


def submit_script(
    backend: SlurmBackend, jobs: list[str], folder: Path, text: str, environment: dict[str, str]
) -> ObjectRef:
    cmd = request.split(["job.sbatch", "it's", "a b"])
    req = request.build(cmd, text, "job.sbatch", str(folder), environment)
    return backend.start(request_for(new_job(jobs), req.spec))


SCRIPT = """#!/bin/bash
#SBATCH --output=out.txt
echo "secret=$SECRET"
echo "pwd=$(pwd)"
echo "supervisor=${SUPERVISOR_ONLY-unset} sshd=${SSH_CONNECTION-unset}"
printf 'arg=[%s]\\n' "$@"
"""


def test_a_batch_script_job_gets_the_submitters_environment_over_ssh_never_on_a_command_line(
    backend: SlurmBackend, jobs: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The environment travels on stdin ahead of the script: the job sees exactly it (not
    sshd's, not the supervisor's), and no process's command line ever shows a value of it.
    The watch is proven able to see such a value by a control: a value the runner passes on
    its command line (``env NAME=VALUE``) is seen."""
    monkeypatch.setenv("SUPERVISOR_ONLY", "1")
    folder = odd_folder(tmp_path)
    secret = f"s3cr3t-{secrets.token_hex(8)} {HOSTILE}"
    marker = secret.split()[0]
    environment = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "SECRET": secret}
    with ProcessTable(marker) as table:
        ref = submit_script(backend, jobs, folder, SCRIPT, environment)
    assert table.seen == []
    backend.open(ref)
    wait_ended(backend, ref)
    out = (folder / "out.txt").read_text()
    assert f"secret={secret}\npwd={folder}\n" in out
    assert "supervisor=unset sshd=unset\n" in out
    assert "arg=[it's]\narg=[a b]\n" in out

    control = f"control-{secrets.token_hex(8)}"
    backend.runner.env["DISPATCH_TEST_CONTROL"] = control
    with ProcessTable(control) as table:
        backend.runner.run(["sleep", "1"])
    assert any(control in line for line in table.seen)


def test_a_submitters_variable_that_is_not_a_shell_name_does_not_travel_over_ssh(
    backend: SlurmBackend, jobs: list[str], tmp_path: Path
) -> None:
    """A known limit: exported bash functions (``BASH_FUNC_f%%``) cannot be set by the far
    end's POSIX shell; the job starts without them, with everything else."""
    environment = {"PATH": "/usr/bin:/bin", "SECRET": "kept", "BASH_FUNC_f%%": "() { :; }"}
    text = SCRIPT.replace('echo "pwd', 'echo "func=$(env | grep -c BASH_FUNC_f)"\necho "pwd')
    ref = submit_script(backend, jobs, tmp_path, text, environment)
    backend.open(ref)
    wait_ended(backend, ref)
    out = (tmp_path / "out.txt").read_text()
    assert "secret=kept\nfunc=0\n" in out


def test_a_dead_ssh_server_is_unreachable_for_reads_and_effects(
    lone_server: live_ssh.SshServer, env: dict[str, str]
) -> None:
    """No connection means the command never ran: unreachable, never a Slurm cause and never
    outcome-unknown."""
    backend = SlurmBackend(lone_server.runner(env), SlurmSettings(transport="ssh"))
    assert backend.slurm_release == (22, 5)
    lone_server.stop()
    with pytest.raises(UnreachableError, match="ssh could not start it"):
        backend.find("nosuchjob")
    spec = JobSpec(command=("true",), output_path="/dev/null")
    with pytest.raises(UnreachableError, match="Connection refused"):
        backend.start(request_for("nosuchjob", spec))
    with pytest.raises(UnreachableError):
        backend.stop(ObjectRef(id="1", name="dj-nosuchjob"), "test")


def test_a_connection_lost_during_a_call_is_outcome_unknown_for_an_effect(
    lone_server: live_ssh.SshServer,
) -> None:
    """The session's sshd dies while the command runs: an effect may or may not have acted, a
    read is unreachable."""
    runner = lone_server.runner({})
    # The command's parent is its session's sshd (the login shell execs env, env execs sh).
    cut = ["sh", "-c", "kill -KILL $PPID; sleep 5"]
    with pytest.raises(OutcomeUnknownError, match="connection failed"):
        runner.run(cut, effect=True)
    with pytest.raises(UnreachableError, match="connection failed"):
        runner.run(cut)


def test_a_server_whose_host_key_is_not_the_known_one_is_refused(
    lone_server: live_ssh.SshServer, env: dict[str, str], tmp_path: Path
) -> None:
    """Host key checking is on: a wrong key, or none known, and nothing runs."""
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    wrong = tmp_path / "known_hosts_wrong"
    wrong.write_text(f"[127.0.0.1]:{lone_server.port} {Path(f'{other}.pub').read_text()}")
    empty = tmp_path / "known_hosts_empty"
    empty.write_text("")
    touched = tmp_path / "ran"
    for known, says in ((wrong, "IDENTIFICATION HAS CHANGED"), (empty, "host key is known")):
        runner = lone_server.runner(env, known_hosts=known)
        with pytest.raises(UnreachableError, match=says):
            runner.run(["touch", str(touched)], effect=True)
    assert not touched.exists()
    assert lone_server.runner(env).run(["touch", str(touched)], effect=True).ok
    assert touched.exists()


def test_only_the_authorized_key_logs_in_and_no_password_is_offered(
    lone_server: live_ssh.SshServer, tmp_path: Path
) -> None:
    stranger = tmp_path / "stranger_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    options = [
        o if o != str(lone_server.folder / "client_key") else str(stranger)
        for o in lone_server.options()
    ]
    runner = CommandRunner.ssh(lone_server.host, options=options)
    with pytest.raises(UnreachableError, match=r"Permission denied \(publickey\)"):
        runner.run(["true"], effect=True)
    # Asked for a password, the server names publickey as its only method.
    asked = subprocess.run(
        [
            "ssh",
            *lone_server.options(),
            "-o",
            "PreferredAuthentications=password",
            "-o",
            "BatchMode=yes",
            lone_server.host,
            "true",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert asked.returncode == 255 and "Permission denied (publickey)" in asked.stderr
