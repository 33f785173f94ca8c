"""The SPANK plugin in C: it builds with every warning an error, and its parsing and spool
handling hold under valgrind.

Real parts only: gcc against the machine's own ``slurm/spank.h`` (Debian's libslurm-dev), and
``spank_spool_test.c`` run on real files under valgrind (which fails the run on any invalid
read or write, or leaked memory). The test needs root, as the plugin runs as root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "slurm_helpers" / "spank" / "build"
SOURCE = REPO / "slurm_helpers" / "spank" / "dispatch_spank.c"
DRIVER = Path(__file__).with_name("spank_spool_test.c")
HOOKS = {
    "slurm_spank_init",
    "slurm_spank_job_prolog",
    "slurm_spank_job_epilog",
    "slurm_spank_task_init",
    "slurm_spank_task_exit",
    "slurm_spank_exit",
}


def test_the_plugin_builds_against_spank_h_with_warnings_as_errors(tmp_path: Path) -> None:
    dest = tmp_path / "dispatch_spank.so"
    built = subprocess.run([str(BUILD), str(dest)], capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stderr
    assert "-Wall -Wextra -Werror" in BUILD.read_text()
    symbols = subprocess.run(
        ["nm", "-D", "--defined-only", str(dest)], capture_output=True, text=True, check=True
    ).stdout
    exported = {line.split()[-1] for line in symbols.splitlines() if " T " in line}
    assert exported >= HOOKS
    assert "plugin_name" in symbols and "plugin_type" in symbols


def test_the_build_command_refuses_a_relative_destination(tmp_path: Path) -> None:
    built = subprocess.run(
        [str(BUILD), "dispatch_spank.so"], capture_output=True, text=True, cwd=tmp_path
    )
    assert built.returncode == 2 and "usage:" in built.stderr
    assert not (tmp_path / "dispatch_spank.so").exists()


def test_parsing_and_spool_handling_under_valgrind(tmp_path: Path) -> None:
    assert os.geteuid() == 0, "run as root: the plugin's file handling runs as root"
    assert shutil.which("valgrind"), "valgrind is needed (Debian: apt-get install valgrind)"
    binary = tmp_path / "spank_spool_test"
    subprocess.run(
        ["gcc", "-g", "-O0", "-Wall", "-Wextra", "-Werror", "-o", str(binary), str(DRIVER)],
        check=True,
    )
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    # A spool on a small filesystem of its own, which the test fills as another user would.
    full = tmp_path / "full"
    full.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=1733", "tmpfs", full], check=True)
    try:
        run = subprocess.run(
            ["valgrind", "-q", "--error-exitcode=3", "--leak-check=full", str(binary)],
            capture_output=True,
            text=True,
            env=dict(os.environ, SCRATCH=str(scratch), FULL=str(full)),
            timeout=300,
        )
    finally:
        subprocess.run(["umount", full], check=True)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert run.stdout.rstrip().endswith("0 failed")
    assert run.stdout.count("\nok ") >= 80
    assert SOURCE.name in DRIVER.read_text()
