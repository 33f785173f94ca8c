"""A ledger on sshfs is refused at start: two sshfs mounts of one folder each grant the same
``flock`` (seen here, below), so two login nodes would both hold every owner lock, and the
fork check of one host cannot see it. Real sshfs mounts over a real sshd
(``slurm_helpers/sharedfs``)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from live_sharedfs import bed, shared_folder
from record_samples import header

from dispatch.model.errors import UnavailableError
from dispatch.records import locks
from dispatch.records.file import FileRecords

pytestmark = pytest.mark.sharedfs

DISPATCH = Path(sys.executable).with_name("dispatch")


def granted_in_a_second_process(path: Path) -> bool:
    """Whether another process is granted an exclusive flock of ``path`` right now."""
    code = (
        "import fcntl, os, sys\n"
        "fd = os.open(sys.argv[1], os.O_RDWR)\n"
        "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "except BlockingIOError:\n    sys.exit(1)\n"
    )
    return subprocess.run([sys.executable, "-c", code, str(path)], timeout=60).returncode == 0


def test_sshfs_grants_one_lock_through_both_mounts_and_only_the_mount_table_tells() -> None:
    """Why the table is needed: the same lock file, held through mount a, is granted through
    mount b; through mount a itself it is refused, which is all the fork check can see."""
    with shared_folder(bed(), "sshfs") as (a, b):
        fd = os.open(a / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            assert granted_in_a_second_process(b / "lock")
            assert not granted_in_a_second_process(a / "lock")
        finally:
            os.close(fd)
        assert locks._second_process(a / "lock") == locks._GRANTED  # nobody holds it now


@pytest.mark.parametrize("client", ["a", "b"])
def test_a_ledger_on_sshfs_is_refused_naming_the_mount_and_what_to_use(client: str) -> None:
    with shared_folder(bed(), "sshfs") as (a, b):
        folder = a if client == "a" else b
        mount = bed().mount("sshfs", client)
        with pytest.raises(UnavailableError) as refused:
            FileRecords(folder / "ledger")
        message = str(refused.value)
        assert message.startswith(
            f"dispatch: unavailable: the ledger at {folder / 'ledger'} is on {mount} "
            "(fuse.sshfs), where a file lock taken on one host does not keep another host out"
        )
        assert "put the ledger on a shared filesystem whose locks reach every host" in message
        assert not (folder / "ledger").exists()


@pytest.mark.parametrize("made", [False, True], ids=["new", "moved-there"])
def test_dispatch_commands_refuse_a_ledger_on_sshfs_in_one_line(
    own_home: Path, tmp_path: Path, made: bool
) -> None:
    """A ledger to be made there (a sweep makes one) and one made elsewhere and copied there
    (which the reading commands open): each command says why in one line, exit 1."""
    with shared_folder(bed(), "sshfs") as (a, _b):
        verbs: list[list[str]] = [["sweep"], ["supervise", "--follow"]]
        if made:
            FileRecords(tmp_path / "ledger").create(header("j1"))
            shutil.copytree(tmp_path / "ledger", a / "ledger", symlinks=True)
            verbs += [["list"], ["status", "j1"], ["cancel", "j1"]]
        config = Path(tempfile.mkdtemp(dir=own_home)) / "dispatch.toml"
        config.write_text(f'ledger = "{a / "ledger"}"\n[backend]\nname = "memory"\n')
        for verb in verbs:
            done = subprocess.run(
                [str(DISPATCH), *verb, "--config", str(config)],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 1, (verb, done.stdout, done.stderr)
            lines = done.stderr.splitlines()
            assert len(lines) == 1, (verb, done.stderr)
            assert lines[0].startswith(
                f"error: dispatch: unavailable: the ledger at {a / 'ledger'} is on "
                f"{bed().mount('sshfs', 'a')} (fuse.sshfs), "
            ), (verb, lines[0])
            assert done.stdout == ""
        assert (a / "ledger").exists() == made
        if made:
            assert FileRecords(tmp_path / "ledger").jobs() == ["j1"]
            assert sorted(os.listdir(a / "ledger" / "jobs" / "j1")) == ["r0000000001.json"]
