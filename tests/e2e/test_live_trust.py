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
from typing import Any

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

    def status(self, job: str) -> dict[str, Any]:
        body: dict[str, Any] = json.loads(self.sh(f"dispatch status --json {job}"))
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


class Sweeping:
    """``dispatch supervise --follow --every 1s`` as ``person``, in their home, while the
    block runs (as a user leaves it in tmux)."""

    def __init__(self, person: Person) -> None:
        self.person = person
        argv = [*local_users.as_user(person.uid), "dispatch", "supervise", "--follow"]
        self.process = subprocess.Popen(
            [*argv, "--every", "1s"],
            cwd=person.home,
            env=person.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def __enter__(self) -> Sweeping:
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.wait(live_cluster.WAIT)
        for row in json.loads(self.person.sh("dispatch list --json")):
            self.person.run(f"dispatch emergency-stop {row['job']}")


def configured(person: Person, spool: Path) -> None:
    """``person``'s config: the cluster's Slurm and the plugin's spool."""
    folder = person.home / ".dispatch"
    folder.mkdir()
    local_users.give(folder, person.uid, 0o700)
    person.write(
        ".dispatch/config.toml",
        f'ledger = "{folder}/ledger"\n[backend]\nname = "slurm"\n'
        f'[backend.settings]\ntransport = "cli"\nslurm_conf = "{person.env["SLURM_CONF"]}"\n'
        f'spank_spool = "{spool}"\n',
    )


# Submission 1 runs a step without the job's environment (srun --export=NONE), then exits 3
# (a rule resubmits); submission 2 waits for its flag; a later run of submission 1's Slurm job
# (requeued by hand) says so and waits, as a stale execution would go on training.
STALE = """#!/bin/bash
#SBATCH --partition=low
#SBATCH --output={home}/first-%j.out
#DISPATCH --rule=requeued:requeue:1
#DISPATCH --rule=non-zero-exit:resubmit:1
if [ "$DISPATCH_SUBMISSION" = 1 ]; then
    if [ "${{SLURM_RESTART_COUNT:-0}}" != 0 ]; then echo stale-run; sleep 600; fi
    srun --export=NONE /bin/sh -c 'echo "step epoch=$DISPATCH_EPOCH"'
    exit 3
fi
until [ -e {home}/go ]; do sleep 1; done
"""


def first_and_second(person: Person, job: str) -> tuple[str, dict[str, Any]]:
    """Once submission 2 runs: submission 1's Slurm job, and the status then."""
    second = live_cluster.wait_for(
        "submission 2 running",
        lambda: person.status(job),
        lambda d: d["state"] == "running" and len(d["submissions"]) == 2,
    )
    first: str = second["submissions"][0]["object"]
    return first, second


def fresh_users_folder(spool: Path, uid: int) -> Path:
    """``SPOOL/<uid>`` gone, as before the user's first job ever (what it held moved aside)."""
    folder = spool / str(uid)
    if folder.exists() or folder.is_symlink():
        folder.rename(spool / f".test-before-{uid}-{secrets.token_hex(4)}")
    return folder


def test_a_users_first_job_is_fenced_before_its_release_and_a_stale_run_of_it_is_refused_live(
    place: Path, cluster: dict[str, str]
) -> None:
    """Ada's first job ever: her spool folder does not exist yet. ``dispatch sbatch`` fences
    it before its release; its ``srun --export=NONE`` step gets ``DISPATCH_EPOCH``; and once
    submission 2 runs, submission 1's Slurm job requeued by hand is refused at launch."""
    spool = spool_of(cluster)
    folder = fresh_users_folder(spool, ADA)
    ada = Person(ADA, place, cluster)
    configured(ada, spool)
    ada.write("stale.sbatch", STALE.format(home=ada.home))
    with Sweeping(ada):
        done = ada.run("dispatch sbatch --parsable stale.sbatch")
        assert done.returncode == 0, done.stderr
        assert "not fenced" not in done.stderr, done.stderr
        job = done.stdout.strip()
        assert folder.stat().st_uid == ADA and folder.stat().st_mode & 0o777 == 0o700
        first, _ = first_and_second(ada, job)
        out = ada.home / f"first-{first}.out"
        assert "step epoch=1000000\n" in out.read_text(), out.read_text()
        subprocess.run(["scontrol", "requeue", first], env=cluster, check=True)
        stale = live_cluster.wait_for(
            "the stale run to end",
            lambda: ada.status(job),
            lambda d: any(x["state"] == "ended" for x in d["stale"]),
        )
        [x] = stale["stale"]
        assert x["cause"]["exit_code"] == 97, x
        text = out.read_text()
        assert "stale-run" not in text and "stale execution:" in text, text
        (ada.home / "go").touch()
        live_cluster.wait_for("the job to settle", lambda: ada.status(job), lambda d: d["settled"])


def test_a_spool_folder_another_user_made_first_is_named_in_status_and_a_stale_run_is_stopped_live(
    place: Path, cluster: dict[str, str]
) -> None:
    """Eve makes ``SPOOL/2001`` before ada's first job (the spool lets users make their own).
    Ada's dispatch never writes her fences there: her job is released without its fence, and
    ``status`` says so. The plugin moves eve's folder aside at ada's job's start; the stale
    run of submission 1, requeued by hand, which no fence refuses, is stopped by ada's
    supervisor."""
    spool = spool_of(cluster)
    folder = fresh_users_folder(spool, ADA)
    ada, eve = Person(ADA, place, cluster), Person(EVE, place, cluster)
    eve.sh(f"mkdir -m 777 {folder} && echo planted > {folder}/fence.1")
    configured(ada, spool)
    ada.write("stale.sbatch", STALE.format(home=ada.home))
    with Sweeping(ada):
        done = ada.run("dispatch sbatch --parsable stale.sbatch")
        assert done.returncode == 0, done.stderr
        assert "not fenced" in done.stderr and "another user may have made it" in done.stderr
        job = done.stdout.strip()
        running = live_cluster.wait_for(
            "the run", lambda: ada.status(job), lambda d: d["state"] in ("running", "recovering")
        )
        slurm_job = running["submissions"][0]["object"]
        assert running["unfenced"] == [{"object": slurm_job, "submission": 1}], running
        said = ada.sh(f"dispatch status {job}")
        assert f"{slurm_job} (submission 1) was released without a fence" in said, said
        # Taken back from eve at the job's start: ada's own now, eve's moved aside.
        assert folder.stat().st_uid == ADA and folder.stat().st_mode & 0o777 == 0o700
        assert [p for p in spool.glob(f".reclaimed-{ADA}-*") if p.stat().st_uid == EVE]
        first, _ = first_and_second(ada, job)
        subprocess.run(["scontrol", "requeue", first], env=cluster, check=True)
        stopped = live_cluster.wait_for(
            "the stale run stopped by the supervisor",
            lambda: ada.status(job),
            lambda d: any(x["stopped"] for x in d["stale"]),
            patience=2 * live_cluster.WAIT,
        )
        [x] = stopped["stale"]
        assert x["stopped"]["by"].startswith("supervisor:"), x
        (ada.home / "go").touch()
        live_cluster.wait_for("the job to settle", lambda: ada.status(job), lambda d: d["settled"])


def evidence(spool: Path, slurm_job: str) -> Path:
    """Ada's epilog record of ``slurm_job``'s first run, once the node has written it."""
    found = live_cluster.wait_for(
        f"the epilog record of Slurm job {slurm_job}",
        lambda: list((spool / str(ADA)).glob(f"{slurm_job}.0.*.epilog")),
        bool,
        patience=60,
    )
    assert "ended=epilog\n" in found[0].read_text()
    return found[0]


def test_another_user_filling_the_spool_never_stops_the_evidence_of_your_jobs_live(
    place: Path, cluster: dict[str, str]
) -> None:
    """Eve fills the spool's filesystem (here a small one of its own, mounted over the spool
    for the test, as a shared filesystem without per-user quotas would be): the plugin's
    writes for every user then failed, so no job had cessation evidence and every shared
    checkpoint's recovery waited for a person. Ada's job, run after, still has its epilog
    record: the plugin writes it into a file of its reserve, made while there was room."""
    spool = spool_of(cluster)
    marker = (spool / "plugin").read_bytes()
    ada, eve = Person(ADA, place, cluster), Person(EVE, place, cluster)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,mode=1733", "dispatch-spool-test", str(spool)],
        check=True,
    )
    try:
        (spool / "plugin").write_bytes(marker)
        os.chmod(spool / "plugin", 0o444)
        # A job while there is room: its evidence is written (and the plugin's reserve made).
        first = ada.sh("sbatch --parsable --partition=low --output=/dev/null --wrap=true").strip()
        assert ended(ada, first) == "COMPLETED|0:0"
        evidence(spool, first)
        filled = eve.run(
            f"mkdir -m 700 {spool}/{EVE} && dd if=/dev/zero of={spool}/{EVE}/fill bs=4k"
        )
        assert "No space left on device" in filled.stderr, filled.stderr
        job = ada.sh("sbatch --parsable --partition=low --output=/dev/null --wrap=true").strip()
        assert ended(ada, job) == "COMPLETED|0:0"
        record = evidence(spool, job)
        assert f"job={job}\n" in record.read_text() and record.stat().st_uid == ADA
    finally:
        subprocess.run(["umount", str(spool)], check=True)
