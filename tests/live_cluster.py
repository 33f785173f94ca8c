"""What every live test shares: the local Slurm cluster's client environment, and bounded waits.

Importable from any test folder (``tests/conftest.py`` puts this folder on ``sys.path``).
"""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
REPO = Path(__file__).resolve().parents[1]
LOCALCLUSTER = REPO / "slurm_helpers" / "localcluster"
WAIT = 180.0  # seconds: every wait on the real scheduler is bounded by this


def cluster_env() -> dict[str, str]:
    """Start the local cluster (idempotent) and return the environment its clients need."""
    up = subprocess.run(
        [str(LOCALCLUSTER), "up"], capture_output=True, text=True, timeout=900, check=False
    )
    if up.returncode != 0:
        raise RuntimeError(f"localcluster up failed ({up.returncode}):\n{up.stdout}{up.stderr}")
    printed = subprocess.run(
        [str(LOCALCLUSTER), "env"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    env = {}
    for line in printed.splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        env[key.strip()] = value.strip().strip("'\"")
    if not Path(env.get("SLURM_CONF", "")).is_file():
        raise RuntimeError(f"localcluster env named no slurm.conf: {printed!r}")
    return env


def dispatch_jobs(
    *jobs: str,
    fields: str = "JobID",
    accounting: bool = False,
    states: str = "all",
    prefix: str = "",
) -> str:
    """Shell text that prints ``fields`` (``|`` between them), a line each, of the user's Slurm
    jobs that are dispatch jobs ``jobs``: those whose comment starts ``dispatch:<job>:`` (a
    group's one array ``dispatch:<group>:``, a task's own arrays ``dispatch:<group>_<index>:``).
    A Slurm job keeps its user's name, so only the comment says whose it is.

    From squeue (``fields`` as ``--Format`` names them; ``states`` as ``--states``, "" for
    squeue's default: the jobs that have not ended), or with ``accounting`` from sacct over the
    last day, every run (``-D``; ``fields`` as ``--format`` names them; 22.05 stores a job's
    comment only once it ran). ``prefix``: shell text before the Slurm command (a release's
    chroot)."""
    assert jobs and all(re.fullmatch(r"[\w.-]+", job) for job in jobs), jobs
    picks = " || ".join(f'index($1, "dispatch:{job}:") == 1' for job in jobs)
    if accounting:
        listing = f'sacct -X -n -P -D -S now-1days -u "$(id -u)" -o Comment,{fields}'
    else:
        form = ",".join(f"{f}:|" for f in ("Comment", *fields.split(",")))[:-1]
        chosen = f" -t {states}" if states else ""
        listing = f"squeue -h -a{chosen} -u \"$(id -u)\" -O '{form}'"
    return f"{prefix}{listing} | awk -F'|' '{picks} {{ sub(/^[^|]*[|]/, \"\"); print }}'"


def cancel_dispatch_jobs(*jobs: str, prefix: str = "") -> str:
    """Shell text that cancels the Slurm jobs of dispatch jobs ``jobs`` the controller still
    shows (``dispatch_jobs``): a cleanup, quiet when there are none."""
    ids = dispatch_jobs(*jobs, states="", prefix=prefix)
    return f"{ids} | xargs -r {prefix}scancel"


def wait_for(
    what: str, probe: Callable[[], T], ok: Callable[[T], bool], patience: float = WAIT
) -> T:
    """Poll ``probe`` until ``ok`` holds; after ``patience`` s, fail naming ``what``."""
    deadline = time.monotonic() + patience
    value = probe()
    while not ok(value):
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {patience:g}s for {what}; last seen: {value!r}")
        time.sleep(0.5)
        value = probe()
    return value


def forget_job(env: dict[str, str], slurm_job: str) -> None:
    """Make the controller forget ``slurm_job``, a job that ended, as ``MinJobAge`` (300 s
    here) does minutes later: ``MinJobAge=2`` in the cluster's slurm.conf and ``scontrol
    reconfigure`` until ``scontrol show job`` no longer knows it (the controller purges ended
    jobs about once a minute), then the config as it was, reconfigured again.

    The cluster is shared with tests running beside this one (CI's other stages): the file is
    replaced whole, never truncated in place, so a client reading it meanwhile reads one
    config or the other; and ``localcluster``'s own lock is held throughout, so a ``localcluster
    up`` meanwhile waits instead of writing the config back and restarting the daemons."""
    conf = Path(env["SLURM_CONF"])

    def reconfigure() -> None:
        subprocess.run(["scontrol", "reconfigure"], env=env, check=True, timeout=WAIT)

    def known() -> bool:
        show = ["scontrol", "show", "job", slurm_job]
        return subprocess.run(show, env=env, capture_output=True, timeout=WAIT).returncode == 0

    with open(conf.parent.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        before = conf.read_text()
        try:
            replace_text(conf, re.sub(r"(?m)^MinJobAge=\d+$", "MinJobAge=2", before))
            reconfigure()
            wait_for(f"the controller to forget job {slurm_job}", known, lambda k: not k)
        finally:
            replace_text(conf, before)
            reconfigure()


def replace_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` at once (a temp file renamed over it), keeping its mode."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.chmod(tmp, path.stat().st_mode & 0o7777)
    os.replace(tmp, path)
