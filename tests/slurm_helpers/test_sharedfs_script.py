"""``slurm_helpers/sharedfs``: docs/sharedfs.md's commands as printed, ``up`` that leaves a
running bed alone, ``down`` that leaves nothing mounted or running, and each volume's two
mounts being two clients of one volume."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest
from live_cluster import REPO
from live_sharedfs import bed

pytestmark = pytest.mark.sharedfs

DOC = REPO / "docs" / "sharedfs.md"


def doc_commands() -> list[str]:
    block = re.search(r"```sh\n(.*?)```", DOC.read_text(), re.S)
    assert block is not None, "docs/sharedfs.md has no sh block"
    return [line.split("  #")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def shell(line: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", line], cwd=REPO, capture_output=True, text=True, timeout=1800, check=False
    )


def left_behind(state: Path) -> tuple[list[str], list[str]]:
    """Mounts under the state folder, and processes whose command line names it."""
    with open("/proc/self/mountinfo") as table:
        mounts = [f.split()[4] for f in table if f.split()[4].startswith(str(state))]
    procs = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                alive = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
            except OSError:
                continue
            if str(state) in argv and alive and int(entry.name) != os.getpid():
                procs.append(f"{entry.name}: {argv}")
    return mounts, procs


def pids(state: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((state / "run").glob("*.pid"))}


def test_the_documented_commands_run_as_printed_and_down_leaves_nothing() -> None:
    state = Path(bed().env["SHAREDFS_STATE"])
    before = pids(state)
    lines = doc_commands()
    assert lines[0] == "slurm_helpers/sharedfs up" and lines[-1] == "slurm_helpers/sharedfs down"
    up = shell(lines[0])
    assert up.returncode == 0, up.stderr
    assert pids(state) == before  # a running bed is left as it is
    env = shell(f"{lines[1]} && env | grep ^SHAREDFS_ | sort")
    for fs in ("JUICEFS", "GLUSTERFS", "SSHFS"):
        for client in ("A", "B"):
            assert f"SHAREDFS_{fs}_{client}={state}/mnt/" in env.stdout
    assert shell(lines[2]).returncode == 0
    try:
        slower = shell(lines[3])
        assert slower.returncode == 0, slower.stderr
        assert "5 ms added" in shell(lines[2]).stdout
    finally:
        assert shell(f"{lines[0]} --rtt-ms 1").returncode == 0
    try:
        down = shell(lines[4])
        assert down.returncode == 0, down.stderr
        assert left_behind(state) == ([], [])
        status = shell(lines[2])
        assert status.returncode == 1 and "NOT MOUNTED" in status.stdout
    finally:  # the tests after this one find the bed up again
        again = shell(lines[0])
        assert again.returncode == 0, again.stderr
    assert shell(lines[2]).returncode == 0


@pytest.mark.parametrize("fs", ["juicefs", "glusterfs", "sshfs"])
def test_a_file_made_through_one_mount_is_seen_through_the_other(fs: str) -> None:
    b = bed()
    a_root, b_root = b.mount(fs, "a"), b.mount(fs, "b")
    assert oct(a_root.stat().st_mode & 0o7777) in ("0o755", "0o1777")
    made = a_root / f".seen-{os.getpid()}"
    made.write_text("from a")
    try:
        assert (b_root / made.name).read_text() == "from a"
    finally:
        made.unlink()
    # Mount b may answer from its entry cache for a while (sshfs keeps names 20 s, GlusterFS's
    # FUSE client 1 s): a client's cache delays what another client did, no more.
    deadline = time.monotonic() + 60
    while (b_root / made.name).exists():
        assert time.monotonic() < deadline, f"{b_root / made.name} still seen after 60 s"
        time.sleep(0.5)
