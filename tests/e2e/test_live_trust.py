"""Live attacks by one user on another's dispatch jobs, on the local Slurm cluster: ada (uid
2001) submits with ``dispatch sbatch`` and sweeps as users do; eve (uid 2002) is another user
of the same login node and cluster, without root.

Nothing of dispatch or Slurm is stood in. Where an attack must catch a moment (another
process's command line while it runs), the moment is held open for it, so the test needs no
luck: the stand-in that holds it is named where it is used.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import live_cluster
import local_users
import pytest
from local_users import ADA, EVE

pytestmark = [pytest.mark.live, pytest.mark.slow]


class Person:
    """A user at the login node's shell: their home (the ledger in ``~/.dispatch``), their
    environment, their commands run as their uid."""

    def __init__(self, uid: int, place: Path, cluster: dict[str, str], path: str = "") -> None:
        self.uid = uid
        self.home = place / str(uid)
        self.home.mkdir()
        local_users.give(self.home, uid, 0o700)
        bin_ = local_users.bin_folder()
        self.env = {
            "HOME": str(self.home),
            "USER": local_users.ensure(uid).pw_name,
            "PATH": f"{path}{os.pathsep if path else ''}{bin_}{os.pathsep}/usr/bin:/bin",
            "SLURM_CONF": cluster["SLURM_CONF"],
        }

    def run(self, script: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """``script`` in bash, as this user, in their home."""
        argv = ["bash", "-euo", "pipefail", "-c", script]
        return local_users.run_as(self.uid, argv, self.env, cwd=self.home, timeout=timeout)

    def sh(self, script: str) -> str:
        done = self.run(script)
        assert done.returncode == 0, f"{script!r} exited {done.returncode}:\n{done.stderr}"
        return done.stdout

    def status(self, job: str) -> dict[str, object]:
        body: dict[str, object] = json.loads(self.sh(f"dispatch status --json {job}"))
        return body

    def write(self, name: str, text: str) -> Path:
        path = self.home / name
        path.write_text(text)
        local_users.give(path, self.uid, 0o644)
        return path


@pytest.fixture
def place() -> Iterator[Path]:
    local_users.ensure(ADA)
    local_users.ensure(EVE)
    with local_users.shared_place() as where:
        yield where


@pytest.fixture
def cluster() -> dict[str, str]:
    try:
        return live_cluster.cluster_env()
    except RuntimeError as err:
        pytest.fail(str(err))


# A stand-in that holds the moment open: put first on ada's PATH as `sbatch`, it notes its
# pid, waits until eve has read its command line (or a minute), then runs the real sbatch with
# the words it was given.
HOLDING_SBATCH = """#!/bin/bash
echo $$ > "{moments}/pending/$$"
for _ in $(seq 600); do [ -e "{moments}/seen/$$" ] && break; sleep 0.1; done
exec /usr/bin/sbatch "$@"
"""

# Eve, polling ada's processes the moment they are held: each one's command line, and its
# parent's, as /proc shows them to any user.
EVE_READS = """
cd {moments}
while [ ! -e stop ]; do
    for f in pending/*; do
        [ -e "$f" ] || continue
        pid=${{f#pending/}}
        [ -e "seen/$pid" ] && continue
        ppid=$(awk '{{print $4}}' /proc/$pid/stat)
        for p in $pid $ppid; do tr '\\0' ' ' < /proc/$p/cmdline; echo; done >> {eve}/read
        touch "seen/$pid"
    done
    sleep 0.1
done
"""


def test_a_value_given_with_export_never_shows_on_any_command_line_another_user_reads_live(
    place: Path, cluster: dict[str, str]
) -> None:
    """``dispatch sbatch --export=ALL,TOKEN=...`` put the value on sbatch's command line at
    every launch, the sweep's relaunches included, where eve's ``/proc`` poller read it. Each
    sbatch (the first launch and the sweep's relaunch after a failure its rule resubmits) is
    held until eve has read its command line and its parent's: none holds the value, and
    both runs of the job got it."""
    moments = place / "moments"
    for folder in (moments, moments / "pending", moments / "seen"):
        folder.mkdir()
        os.chmod(folder, 0o1777)
    shim = place / "shim"
    shim.mkdir()
    (shim / "sbatch").write_text(HOLDING_SBATCH.format(moments=moments))
    os.chmod(shim, 0o755)
    os.chmod(shim / "sbatch", 0o755)
    ada = Person(ADA, place, cluster, path=str(shim))
    eve = Person(EVE, place, cluster)
    token = f"s3cret-{secrets.token_hex(8)}"
    ada.write(
        "train.sbatch",
        "#!/bin/bash\n#SBATCH --partition=low\n#SBATCH --output=/dev/null\n"
        "#DISPATCH --rule=non-zero-exit:resubmit:1\n"
        'echo "$TOKEN" > "$HOME/token-$DISPATCH_SUBMISSION"\n'
        '[ "$DISPATCH_SUBMISSION" = 1 ] && exit 3\nexit 0\n',
    )
    reader = subprocess.Popen(
        [*local_users.as_user(EVE), "bash", "-c", EVE_READS.format(moments=moments, eve=eve.home)],
        env=eve.env,
    )
    try:
        job = ada.sh(f"dispatch sbatch --parsable --export=ALL,TOKEN={token} train.sbatch").strip()
        deadline = time.monotonic() + live_cluster.WAIT
        while not ada.status(job)["settled"]:
            assert time.monotonic() < deadline, ada.status(job)
            ada.sh("dispatch sweep")
            time.sleep(1)
    finally:
        (moments / "stop").touch()
        reader.wait(60)
    assert ada.status(job)["state"] == "succeeded"
    read = (eve.home / "read").read_text().splitlines()
    sbatch_lines = [line for line in read if "sbatch" in line and "--hold" in line]
    assert len(sbatch_lines) >= 2, read  # the first launch and the sweep's relaunch
    assert "--export=ALL,TOKEN " in " ".join(sbatch_lines) + " "
    assert not [line for line in read if token in line and "dispatch sbatch" not in line], read
    for n in (1, 2):
        assert (ada.home / f"token-{n}").read_text().strip() == token


def spool_of(cluster: dict[str, str]) -> Path:
    """The SPANK plugin's spool (the cluster started with ``localcluster up --spank``)."""
    spool = cluster.get("LOCALCLUSTER_SPANK_SPOOL")
    assert spool, "start the cluster with `slurm_helpers/localcluster up --spank`"
    return Path(spool)


def users_folder(spool: Path, uid: int) -> Path:
    """``SPOOL/<uid>``, as the plugin makes it at the user's first job (0700, the user's)."""
    folder = spool / str(uid)
    if not folder.exists():
        folder.mkdir()
        local_users.give(folder, uid, 0o700)
    return folder


def ended(person: Person, slurm_job: str) -> str:
    """``State ExitCode`` of ``slurm_job`` once accounting has its end."""
    return live_cluster.wait_for(
        f"Slurm job {slurm_job} to end",
        lambda: person.sh(f"sacct -n -X -P -j {slurm_job} -o State,ExitCode").strip(),
        lambda row: row.split("|")[0] in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"),
    )


def test_a_job_with_a_long_name_that_got_an_old_fenced_id_is_never_stopped_by_that_fence_live(
    place: Path, cluster: dict[str, str]
) -> None:
    """A fence an earlier job left under a reused Slurm id never stops another job. The task
    read its job's name into 160 bytes: a name of 160 characters or more read as no name, and
    ada's own job that got the id of an old fenced dispatch job (ids restarted) was killed
    with exit 97. Her job, named with 200 characters, gets such an id (the fence is written
    for it while it is held) and runs."""
    ada = Person(ADA, place, cluster)
    folder = users_folder(spool_of(cluster), ADA)
    name = "n" * 200
    out = ada.home / "long.out"
    slurm_job = ada.sh(
        f"sbatch --parsable --hold --partition=low --job-name={name} --output={out} "
        "--wrap='echo ran'"
    ).strip()
    # What an old dispatch job, over long ago, left under the same id.
    ada.sh(
        f"cd {folder} && printf 'job=old\\nsubmission=1\\n' > fence.{slurm_job} && "
        "printf 'current=ended\\n' > current.old"
    )
    ada.sh(f"scontrol release {slurm_job}")
    assert ended(ada, slurm_job) == "COMPLETED|0:0", out.read_text() if out.exists() else ""
    assert out.read_text() == "ran\n"
