"""``dispatch logs`` of outputs larger than memory, live: a job's output file on the local
Slurm cluster, read by a real ``dispatch logs`` process under an address-space limit.

``logs`` read the whole output into memory, and ``--follow`` read it whole again every second:
a 3 GiB output under ``ulimit -v 2000000`` ended in a ``MemoryError`` traceback. Both now copy
a chunk at a time, and ``--follow`` reads only what was appended.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import live_cluster
import pytest
import test_cli_live
from test_cli_live import DISPATCH, Shell

pytestmark = pytest.mark.live
# The user's shell in a project folder, with a sweep running beside it.
shell = test_cli_live.shell

GIB = 1 << 30
# ``ulimit -v`` as the report had it: under 2 GiB of address space (KiB).
ADDRESS_LIMIT_KIB = 2_000_000


def test_logs_of_a_three_gib_output_streams_under_a_two_gib_address_limit(shell: Shell) -> None:
    """The output is a 3 GiB file (sparse: it costs no disk); ``logs`` copies every byte of it
    and exits 0 with a process that may map less than 2 GiB."""
    big = shell.folder / "big.out"
    job = shell.submit(
        "big", f"#SBATCH --output={big}\ntruncate -s {3 * GIB} {big}\necho end\nsleep 300"
    )
    shell.wait(job, "the job to run", lambda d: d["state"] == "running")
    live_cluster.wait_for("the output to grow", lambda: _size(big), lambda n: n > 3 * GIB)
    done = subprocess.run(
        [
            "bash",
            "-o",
            "pipefail",
            "-c",
            f"ulimit -v {ADDRESS_LIMIT_KIB} && {DISPATCH} logs {job} | wc -c",
        ],
        cwd=shell.folder,
        env=shell.env,
        capture_output=True,
        text=True,
        timeout=live_cluster.WAIT,
    )
    assert done.returncode == 0, done.stderr
    assert "MemoryError" not in done.stderr
    assert int(done.stdout) == big.stat().st_size


def _size(path: Path) -> int:
    """The size of ``path``; 0 before the job has made it."""
    return path.stat().st_size if path.exists() else 0


def _tail(path: Path) -> bytes:
    """The last line of ``path`` with its newline (b"" while it has none), read from its end."""
    with path.open("rb") as f:
        f.seek(max(0, f.seek(0, os.SEEK_END) - 64))
        text = f.read()
    if not text.endswith(b"\n"):
        return b""
    return text[:-1].rsplit(b"\n", 1)[-1] + b"\n"


def _read_bytes(pid: int) -> int:
    """How many bytes process ``pid`` has read so far (``rchar`` in ``/proc/PID/io``)."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError(f"/proc/{pid}/io has no rchar")


def test_logs_follow_reads_only_what_was_appended(shell: Shell) -> None:
    """The job writes 64 MiB, then one line each time the test asks, then ends. ``--follow``
    must print each line (so it read again at least twice after the first read), yet have
    read about the 64 MiB once: it had read them again every second."""
    size = 64 << 20
    out = shell.folder / "follow.out"
    body = (
        f"#SBATCH --output={out}\n"
        f"head -c {size} /dev/zero | tr '\\0' x\n"
        "for part in 1 2; do\n"
        "    until [ -e part$part ]; do sleep 0.2; done\n"
        "    echo; echo appended $part\n"
        "done\n"
        "until [ -e stop ]; do sleep 0.2; done\n"
    )
    job = shell.submit("follow", body)
    shell.wait(job, "the job to run", lambda d: d["state"] == "running")
    live_cluster.wait_for("the first 64 MiB", lambda: _size(out), lambda n: n >= size)
    printed = shell.folder / "printed"
    with printed.open("wb") as sink:
        follow = subprocess.Popen(
            [DISPATCH, "logs", job, "--follow"], cwd=shell.folder, env=shell.env, stdout=sink
        )
        try:
            live_cluster.wait_for(
                "--follow's first read", lambda: _size(printed), lambda n: n >= size
            )
            for part in (1, 2):
                (shell.folder / f"part{part}").touch()
                line = f"appended {part}\n".encode()
                live_cluster.wait_for(
                    f"--follow to print part {part}", lambda: _tail(printed), line.__eq__
                )
            read = _read_bytes(follow.pid)
            (shell.folder / "stop").touch()
            assert follow.wait(live_cluster.WAIT) == 0
        finally:
            follow.kill()
    assert printed.stat().st_size == out.stat().st_size
    # Once the 64 MiB, and what Python, the Slurm commands' replies and the lines add.
    assert read < size * 1.5, f"--follow read {read} bytes of a {size}-byte output"
