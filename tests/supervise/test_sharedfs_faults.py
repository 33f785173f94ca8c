"""A sweep whose shared filesystem fails under it: JuiceFS's metadata server paused for 30 s,
the mount lazily unmounted, its FUSE daemon killed, the volume full. Each is made while a real
``dispatch sweep`` (the command, with the served scheduler as its backend: the stand-in for
Slurm) has noted its jobs' revisions and waits at its look at the scheduler, so the fault
always falls mid-sweep, before the sweep reads its records. Each must be said clearly (the
stall on stderr while it lasts, a failure in the sweep's report), and once the filesystem is
back, sweeps from both mounts settle every job with nothing lost and nothing run twice.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from live_sharedfs import Bed, bed
from served_scheduler import Served
from sharedfs_world import (  # noqa: F401 - the fixtures
    CHILDREN,
    Sweepers,
    check_once,
    roots_fixture,
    served_fixture,
    settle_all,
    submit,
)

pytestmark = pytest.mark.sharedfs

PAUSE_SECONDS = 30
WAIT = 300.0  # seconds: a bound on each wait below, not a timing assertion


@pytest.fixture
def config(roots: tuple[Path, Path], own_home: Path) -> Path:
    """A config whose ledger is the one of ``roots`` through mount b."""
    path = Path(tempfile.mkdtemp(dir=own_home)) / "dispatch.toml"
    path.write_text(f'ledger = "{roots[1]}"\n[backend]\nname = "memory"\n')
    return path


@pytest.fixture(autouse=True)
def mended() -> Iterator[None]:
    """Whatever a test broke is mended after it: the volume without a quota, Redis running,
    both mounts answering."""
    yield
    b = bed()
    os.kill(b.redis_pid, signal.SIGCONT)
    b.juicefs("config", "--inodes", "0", "-y")
    bed(repair=True)


def cli(served: Served, *argv: str) -> subprocess.CompletedProcess[str]:
    """``dispatch ARGV`` with the served scheduler as its backend."""
    args = [str(CHILDREN), "cli", served.address, served.authkey.hex(), *argv]
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=WAIT, check=False
    )


def faulted_sweep(
    served: Served, config: Path, fault: Callable[[], None], tmp: Path
) -> tuple[int, str, str]:
    """A sweep that makes ``fault`` happen once it has noted its jobs' revisions: its exit
    code, stdout and stderr."""
    gate = tmp / "gate"
    err = tmp / "stderr"
    args = [str(CHILDREN), "gated-cli", served.address, served.authkey.hex(), str(gate)]
    with open(err, "w") as stderr, open(tmp / "stdout", "w") as stdout:
        child = subprocess.Popen(
            [sys.executable, *args, "sweep", "--config", str(config)], stdout=stdout, stderr=stderr
        )
    deadline = time.monotonic() + WAIT
    while "gate: waiting" not in err.read_text():
        assert child.poll() is None and time.monotonic() < deadline, err.read_text()
        time.sleep(0.05)
    fault()
    gate.touch()
    code = child.wait(WAIT)
    return code, (tmp / "stdout").read_text(), err.read_text()


def launched(served: Served, roots: tuple[Path, Path], config: Path, n: int) -> list[str]:
    """``n`` jobs, launched by a first sweep, then half of their executions preempted: the
    next sweep has records to read and decisions to commit."""
    jobs = submit(served, roots[0], n)
    first = cli(served, "sweep", "--config", str(config))
    assert first.returncode == 0, first.stderr
    served.scheduler.play(1, 0.5, 0.0)
    return jobs


def recovered(served: Served, roots: tuple[Path, Path], jobs: list[str]) -> None:
    """Once the filesystem is back: sweepers on both mounts settle every job, and the checks
    of ``check_once`` hold (nothing lost, nothing run twice)."""
    bed(repair=True)
    sweepers = Sweepers(served)
    try:
        sweepers.start(roots[0])
        sweepers.start(roots[1])
        settle_all(served, roots[0], sweepers)
    finally:
        sweepers.stop()
    check_once(served, roots[1], jobs)


def failures(stderr: str) -> list[str]:
    """The sweep's lines for passes that failed, and no traceback among its lines."""
    assert "Traceback" not in stderr, stderr
    return [line for line in stderr.splitlines() if line.startswith("failed: job ")]


def test_a_metadata_server_paused_mid_sweep_is_said_while_it_lasts_and_nothing_is_lost(
    served: Served, roots: tuple[Path, Path], config: Path, tmp_path: Path
) -> None:
    b = bed()
    jobs = launched(served, roots, config, 20)

    resume = threading.Timer(PAUSE_SECONDS, os.kill, (b.redis_pid, signal.SIGCONT))

    def pause() -> None:
        os.kill(b.redis_pid, signal.SIGSTOP)
        resume.start()

    code, out, err = faulted_sweep(served, config, pause, tmp_path)
    resume.join()
    assert code == 0, err
    assert out.startswith("swept 20 unsettled jobs in "), out
    said = [line for line in err.splitlines() if "has not answered" in line]
    assert said and said[0].startswith(
        f"warning: the ledger at {roots[1]} has not answered for 1"
    ), err
    assert f"the ledger at {roots[1]} answered again after " in err
    assert failures(err) == []
    recovered(served, roots, jobs)


def test_a_mount_lazily_unmounted_mid_sweep_fails_its_passes_by_name(
    served: Served, roots: tuple[Path, Path], config: Path, tmp_path: Path
) -> None:
    b = bed()
    jobs = launched(served, roots, config, 12)
    mount = b.mount("juicefs", "b")

    def unmount() -> None:
        subprocess.run(["umount", "-l", str(mount)], check=True, timeout=60)

    code, out, err = faulted_sweep(served, config, unmount, tmp_path)
    assert code == 1, (out, err)
    failed = failures(err)
    assert failed and all(
        f"the ledger at {roots[1]} is gone ({roots[1] / 'jobs'} is missing: was its "
        "filesystem unmounted?)" in line
        for line in failed
    ), err
    # Nothing of the ledger was made on the folder the mount covered.
    assert roots[1].parent.name not in os.listdir(mount)
    recovered(served, roots, jobs)


def kill_client(b: Bed, client: str) -> None:
    """SIGKILL the JuiceFS client of mount ``client`` and its supervisor, which would start
    it again: the mount is left without a daemon."""
    state = Path(b.env["SHAREDFS_STATE"])
    supervisor = int((state / "run" / f"juicefs-{client}.pid").read_text())
    children = subprocess.run(
        ["pgrep", "-P", str(supervisor)], capture_output=True, text=True, check=False
    ).stdout.split()
    for pid in (supervisor, *map(int, children)):
        os.kill(pid, signal.SIGKILL)


def test_a_fuse_daemon_killed_mid_sweep_fails_its_passes_saying_why(
    served: Served, roots: tuple[Path, Path], config: Path, tmp_path: Path
) -> None:
    jobs = launched(served, roots, config, 12)
    code, out, err = faulted_sweep(served, config, lambda: kill_client(bed(), "b"), tmp_path)
    assert code == 1, (out, err)
    # Each pass that met it failed, or the sweep stopped at once naming the ledger.
    said = failures(err) + [line for line in err.splitlines() if line.startswith("error: ")]
    assert said and all("Transport endpoint is not connected" in line for line in said), err
    stopped = [line for line in said if line.startswith("error: ")]
    assert all(
        line.startswith(
            f"error: dispatch: unavailable: the ledger at {roots[1]} failed under the sweep: "
        )
        for line in stopped
    ), err
    recovered(served, roots, jobs)


def test_a_full_volume_mid_sweep_fails_the_commits_saying_so(
    served: Served, roots: tuple[Path, Path], config: Path, tmp_path: Path
) -> None:
    b = bed()
    jobs = launched(served, roots, config, 12)
    probe = b.mount("juicefs", "b") / roots[1].parent.name / "probe"

    def fill() -> None:
        used = subprocess.run(
            ["df", "--output=iused", str(b.mount("juicefs", "b"))],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()[-1]
        b.juicefs("config", "--inodes", used, "-y")
        deadline = time.monotonic() + WAIT
        while True:  # the clients learn the quota within a few seconds
            try:
                probe.touch()
            except OSError:
                return
            probe.unlink()
            assert time.monotonic() < deadline, "the quota was never enforced"
            time.sleep(0.2)

    code, out, err = faulted_sweep(served, config, fill, tmp_path)
    assert code == 1, (out, err)
    failed = failures(err)
    assert failed and all("No space left on device" in line for line in failed), err
    b.juicefs("config", "--inodes", "0", "-y")
    recovered(served, roots, jobs)
